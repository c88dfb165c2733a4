"""Non-learned intra-video retrieval (docs/spacewalk18.md, Intra-video retrieval): the TW-FINCH clustering baseline.

TW-FINCH: windows of `window_seconds` (12 s) every `stride_seconds` (1 s) over the whole recording,
clustered by spacewalk.algorithms.tw_finch into `n_clusters` (100) temporally weighted clusters; a sample's
prediction is the candidate whose window falls in the query window's cluster, a coin (seeded) when both
or neither do. A time's window is the one whose centre is nearest to it.

The window features come from the DataModule's feature bank (`window_features` with a 12 s window), so
nothing is re-encoded: with video, the bank's 12 s cells or per-frame features; on a text-only bank, the
window transcript feature, i.e. the embeddings of the bank's sentences overlapping the 12 s window pooled
as the DataModule's `text_pool` says (a window without speech is a zero vector, at cosine distance 1
from everything). The paper clusters video features.
"""

from __future__ import annotations

import logging

import numpy as np

from spacewalk.algorithms.tw_finch import tw_finch
from spacewalk.benchmarks.spacewalk18.data.dataset import FPS
from spacewalk.core.errors import ConfigError

log = logging.getLogger(__name__)


class TWFinchRetrieval:
    def __init__(self, window_seconds: float = 12.0, stride_seconds: float = 1.0, n_clusters: int = 100,
                 seed: int = 43, tie_tolerance: float = 1e-6):
        if window_seconds <= 0 or stride_seconds <= 0 or n_clusters < 1:
            raise ConfigError("window_seconds and stride_seconds must be positive and n_clusters at least 1, got "
                              f"window_seconds={window_seconds}, stride_seconds={stride_seconds}, "
                              f"n_clusters={n_clusters}")
        self.window_seconds, self.stride_seconds = float(window_seconds), float(stride_seconds)
        self.n_clusters, self.seed = int(n_clusters), int(seed)
        self.tie_tolerance = float(tie_tolerance)

    def window_starts(self, duration: float) -> np.ndarray:
        return np.arange(0.0, max(duration - self.window_seconds, 0.0) + 1e-9, self.stride_seconds)

    def clusters(self, datamodule, video_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(window starts [N] in seconds, cluster label [N]) of one recording."""
        rec = datamodule.dataset.recordings[video_id]
        starts = self.window_starts(rec.duration)
        centres = np.minimum(starts + self.window_seconds / 2, rec.duration)
        features = datamodule.window_features(datamodule.bank.load(video_id), rec.duration, centres,
                                              context_seconds=self.window_seconds)
        return starts, tw_finch(features, self.n_clusters, self.tie_tolerance)

    def predict(self, datamodule, split: str) -> dict[str, np.ndarray]:
        out = {}
        for r, video_id in enumerate(datamodule.video_ids[split]):
            samples = datamodule.samples[split][video_id]
            starts, labels = self.clusters(datamodule, video_id)
            log.info("TW-FINCH: %s, %d windows in %d clusters", video_id, len(starts), labels.max() + 1)

            def cluster_at(frames: np.ndarray, labels: np.ndarray = labels) -> np.ndarray:
                k = np.rint((frames / FPS - self.window_seconds / 2) / self.stride_seconds).astype(np.int64)
                return labels[np.clip(k, 0, len(labels) - 1)]

            query = cluster_at(np.array([s.query_frame_index for s in samples]))
            cands = np.stack([cluster_at(np.array([s.candidate_frame_indices[i] for s in samples]))
                              for i in (0, 1)], 1)
            same = cands == query[:, None]
            coin = np.random.default_rng([self.seed, r]).integers(0, 2, len(samples))
            out[video_id] = np.where(same[:, 0] & ~same[:, 1], 0, np.where(same[:, 1] & ~same[:, 0], 1, coin))
            log.info("TW-FINCH: %s, %.1f %% of samples decided by a coin", video_id,
                     100 * (same[:, 0] == same[:, 1]).mean())
        return out
