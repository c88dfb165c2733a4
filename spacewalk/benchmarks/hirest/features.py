"""Per-video HiREST features at 1 fps: the authors' released files, or our own extraction in the same layout.

The authors release (docs/hirest.md, The paper's models, j-min/HiREST README "Prepare Features"):

    eva_clip_features/<id>.mp4.pt              float [T, 1024]: EVA-CLIP-g frame embeddings, 1 per second
    ASR/<id>.srt                               Whisper transcript
    ASR_feats_all-MiniLM-L6-v2/<id>.pt         float [n, 384]: MiniLM embedding of each subtitle, in order

`HiRESTFeatures` reads exactly that layout, so a user who downloaded them trains and evaluates with no
video at all: point `frames_dir`, `asr_dir` and `asr_features_dir` at those three folders. Queries are
embedded by a text encoder (the authors used EVA-CLIP-g's text tower, which we cannot ship), or read
from a `query_features.pt` file ({query: float [D]}).

`extract_features` makes the same files from videos with any `encoder=` video model (frames at the centre
of each second) and the MiniLM text encoder (subtitles), plus `query_features.pt` and a `meta.json` that
names the encoders: a folder whose meta does not match is rebuilt, a matching one is resumed file by
file. Every file is written atomically. Under DDP each rank extracts its share of the videos.

Where a subtitle covers seconds [floor(start), floor(end)), its embedding is written on every one of those
seconds, later subtitles over earlier ones; other seconds are zero (silence). This is what the authors'
loader does (`warped[start.seconds:end.seconds] = feats[i]`).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from spacewalk.benchmarks.hirest.subtitles import Subtitle, read_srt, write_srt
from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import atomic_path, load_json, write_json

log = logging.getLogger(__name__)

FRAMES_DIR = "frames"
ASR_DIR = "ASR"
ASR_FEATURES_DIR = "ASR_feats_all-MiniLM-L6-v2"
QUERY_FILE = "query_features.pt"
META_FILE = "meta.json"
FORMAT_VERSION = 1


def _load_tensor(path: Path, item: str, ndim: int) -> np.ndarray:
    if not path.is_file():
        raise DataError("feature file not found", file=path, item=item)
    try:
        value = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated or foreign file: torch raises many types
        raise DataError(f"not a readable torch file ({type(e).__name__}: {e})", file=path, item=item) from e
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if not isinstance(value, torch.Tensor) or value.dim() != ndim:
        shape = list(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise DataError(f"expected a {ndim}-D float tensor, got {shape}", file=path, item=item)
    array = value.float().numpy()
    if not np.isfinite(array).all():
        raise DataError("contains NaN or infinity", file=path, item=item)
    return array


def per_second(subtitles: Sequence[Subtitle], embeddings: np.ndarray, num_frames: int) -> np.ndarray:
    """[num_frames, D]: each subtitle's embedding on the whole seconds it covers, zeros elsewhere."""
    out = np.zeros((num_frames, embeddings.shape[1]), dtype=np.float32)
    for sub, emb in zip(subtitles, embeddings):
        out[int(math.floor(sub.start)):int(math.floor(sub.end))] = emb
    return out


class HiRESTFeatures:
    """Frames, subtitles and queries of HiREST videos, from files in the released layout.

    frames_dir: `<video>.pt` per video (video = "<id>.mp4"), float [T, D], row t = second [t, t+1).
    asr_dir / asr_features_dir: `<id>.srt` and `<id>.pt` [n, 384]; either both or neither (no audio: zeros).
    query_features: a `{query: float [D]}` torch file; query_encoder: a TextEncoder; one of the two.
    """

    def __init__(self, frames_dir: str | Path, asr_dir: str | Path | None = None,
                 asr_features_dir: str | Path | None = None, query_features: str | Path | None = None,
                 query_encoder=None, asr_dim: int = 384):
        self.frames_dir = Path(frames_dir)
        if not self.frames_dir.is_dir():
            raise DataError("frame feature folder not found", file=self.frames_dir)
        if (asr_dir is None) != (asr_features_dir is None):
            raise DataError("give both the subtitle folder and the subtitle-embedding folder, or neither",
                            file=asr_dir or asr_features_dir)
        self.asr_dir = Path(asr_dir) if asr_dir is not None else None
        self.asr_features_dir = Path(asr_features_dir) if asr_features_dir is not None else None
        if (query_features is None) == (query_encoder is None):
            raise ConfigError("give exactly one of query_features (a file) and query_encoder")
        self._queries: dict[str, np.ndarray] | None = None
        self._query_path = Path(query_features) if query_features is not None else None
        self.query_encoder = query_encoder
        self.asr_dim = int(asr_dim)
        self._video_dim: int | None = None

    def __repr__(self) -> str:
        return f"HiRESTFeatures(frames_dir={str(self.frames_dir)!r}, asr={self.asr_dir is not None})"

    @property
    def has_asr(self) -> bool:
        return self.asr_dir is not None

    def frames(self, video: str) -> np.ndarray:
        array = _load_tensor(self.frames_dir / f"{video}.pt", video, ndim=2)
        if len(array) == 0:
            raise DataError("no frames", file=self.frames_dir / f"{video}.pt", item=video)
        if self._video_dim is None:
            self._video_dim = array.shape[1]
        elif array.shape[1] != self._video_dim:
            raise DataError(f"feature width {array.shape[1]} differs from the other videos' {self._video_dim}",
                            file=self.frames_dir / f"{video}.pt", item=video)
        return array

    @property
    def video_dim(self) -> int:
        if self._video_dim is None:
            first = next(iter(sorted(self.frames_dir.glob("*.pt"))), None)
            if first is None:
                raise DataError("no feature files", file=self.frames_dir)
            self.frames(first.name[:-3])
        return self._video_dim

    def subtitles(self, video: str) -> list[Subtitle]:
        if self.asr_dir is None:
            return []
        from spacewalk.benchmarks.hirest.dataset import video_id

        return read_srt(self.asr_dir / f"{video_id(video)}.srt")

    def asr_per_second(self, video: str, num_frames: int) -> np.ndarray:
        if self.asr_dir is None:
            return np.zeros((num_frames, self.asr_dim), dtype=np.float32)
        from spacewalk.benchmarks.hirest.dataset import video_id

        subs = self.subtitles(video)
        path = self.asr_features_dir / f"{video_id(video)}.pt"
        emb = _load_tensor(path, video, ndim=2) if subs else np.zeros((0, self.asr_dim), np.float32)
        if len(emb) != len(subs) or (subs and emb.shape[1] != self.asr_dim):
            raise DataError(f"{len(emb)} x {emb.shape[1]} embeddings for {len(subs)} subtitles of width "
                            f"{self.asr_dim}", file=path, item=video)
        return per_second(subs, emb, num_frames)

    @property
    def query_dim(self) -> int:
        if self.query_encoder is not None:
            return int(self.query_encoder.dim)
        return len(next(iter(self._query_table().values())))

    def _query_table(self) -> dict[str, np.ndarray]:
        if self._queries is None:
            raw = torch.load(self._query_path, map_location="cpu", weights_only=True) \
                if self._query_path.is_file() else None
            if not isinstance(raw, dict) or not raw:
                raise DataError("expected a non-empty {query: tensor} file", file=self._query_path)
            self._queries = {q: torch.as_tensor(v).float().numpy() for q, v in raw.items()}
        return self._queries

    def query(self, text: str) -> np.ndarray:
        if self.query_encoder is not None:
            return self.query_encoder.encode([text])[0]
        table = self._query_table()
        if text not in table:
            raise DataError("no embedding for this query", file=self._query_path, item=repr(text))
        return table[text]


# --------------------------------------------------------------------------------------------------
# our own extraction, in the released layout


def _rank_and_world() -> tuple[int, int]:
    # torchrun / SLURM set these before Lightning starts; extraction runs before the Trainer exists
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


def extraction_meta(video_encoder, text_encoder, query_encoder, fps: float, frame_size: int | None) -> dict:
    return {"format": FORMAT_VERSION, "video_encoder": video_encoder.identity,
            "text_encoder": text_encoder.identity, "query_encoder": query_encoder.identity,
            "fps": fps, "frame_size": frame_size}


def _frame_features(video_path: Path, encoder, fps: float, frame_size: int | None, backend: str,
                    chunk: int = 64) -> np.ndarray:
    from spacewalk.media.video import open_video

    size = (frame_size, frame_size) if frame_size else None
    with open_video(video_path, backend=backend, size=size) as reader:
        count = max(1, int(math.ceil(reader.duration * fps - 1e-6)))
        # the centre of each 1/fps slot, kept inside the stream
        times = np.minimum((np.arange(count) + 0.5) / fps, max(reader.duration - 0.5 / reader.fps, 0.0))
        rows = []
        for start in range(0, count, chunk):
            frames = reader.frames_at(times[start:start + chunk])
            rows.append(encoder.encode([f[None] for f in frames]))
    return np.concatenate(rows).astype(np.float32)


def _save_tensor(path: Path, array: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        torch.save(torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32)), tmp)


def extract_features(videos: Iterable[str], queries: Iterable[str], videos_dir: str | Path,
                     out_dir: str | Path, video_encoder, text_encoder, query_encoder=None,
                     asr_source_dir: str | Path | None = None, fps: float = 1.0, frame_size: int | None = 224,
                     backend: str = "decord", wait_seconds: float = 3600.0) -> Path:
    """Write frames/, ASR/, ASR_feats_all-MiniLM-L6-v2/ and query_features.pt under `out_dir`.

    videos: names "<id>.mp4" found in `videos_dir`; a video whose file is missing is an error (no silent
    gaps). asr_source_dir: `<id>.srt` subtitles to embed (a video without one has no speech).
    query_encoder: defaults to the video encoder's text tower, else `text_encoder`.
    """
    from tqdm import tqdm

    from spacewalk.benchmarks.hirest.dataset import video_id

    videos, queries = list(dict.fromkeys(videos)), sorted(set(queries))
    videos_dir, out_dir = Path(videos_dir), Path(out_dir)
    if query_encoder is None:
        query_encoder = video_encoder.text_encoder() or text_encoder
    meta = extraction_meta(video_encoder, text_encoder, query_encoder, fps, frame_size)
    meta["asr_source"] = str(Path(asr_source_dir).resolve()) if asr_source_dir else None
    rank, world = _rank_and_world()
    meta_path = out_dir / META_FILE
    if rank == 0:
        if meta_path.is_file() and load_json(meta_path) != meta:
            log.info("features in %s were made differently (%s): rebuilding", out_dir, meta_path)
            for sub in (FRAMES_DIR, ASR_DIR, ASR_FEATURES_DIR):
                for f in (out_dir / sub).glob("*"):
                    f.unlink()
            (out_dir / QUERY_FILE).unlink(missing_ok=True)
        write_json(meta_path, meta)
    else:
        _wait_for(lambda: meta_path.is_file() and load_json(meta_path) == meta, wait_seconds, meta_path)

    mine = videos[rank::world]
    todo = [v for v in mine if not (out_dir / FRAMES_DIR / f"{v}.pt").is_file()]
    for video in tqdm(todo, desc=f"HiREST features (rank {rank})", disable=not todo):
        path = videos_dir / video
        if not path.is_file():
            raise DataError("video file not found (download the videos, or use released features)", file=path,
                            item=video)
        frames = _frame_features(path, video_encoder, fps, frame_size, backend)
        srt_path = Path(asr_source_dir) / f"{video_id(video)}.srt" if asr_source_dir else None
        subs = read_srt(srt_path) if srt_path is not None and srt_path.is_file() else []
        emb = text_encoder.encode([s.text for s in subs]) if subs else np.zeros((0, 384), np.float32)
        write_srt(out_dir / ASR_DIR / f"{video_id(video)}.srt", subs)
        _save_tensor(out_dir / ASR_FEATURES_DIR / f"{video_id(video)}.pt", emb)
        # the frame file last: its presence marks the video done (resume skips it)
        _save_tensor(out_dir / FRAMES_DIR / f"{video}.pt", frames)
    if rank == 0 and not (out_dir / QUERY_FILE).is_file():
        table = dict(zip(queries, torch.from_numpy(query_encoder.encode(queries))))
        with atomic_path(out_dir / QUERY_FILE) as tmp:
            torch.save(table, tmp)
    _wait_for(lambda: (out_dir / QUERY_FILE).is_file()
              and all((out_dir / FRAMES_DIR / f"{v}.pt").is_file() for v in videos), wait_seconds, out_dir)
    return out_dir


def _wait_for(ready, seconds: float, what: Path) -> None:
    """A file barrier: extraction runs before any process group exists, so ranks meet on the disk."""
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"gave up waiting for {what} after {seconds:.0f} s (did another rank fail?)")
        time.sleep(1.0)


def extracted_features(out_dir: str | Path, query_encoder=None) -> HiRESTFeatures:
    """Our own extraction's folder as HiRESTFeatures (queries from its query_features.pt)."""
    out_dir = Path(out_dir)
    return HiRESTFeatures(out_dir / FRAMES_DIR, out_dir / ASR_DIR, out_dir / ASR_FEATURES_DIR,
                          query_features=None if query_encoder is not None else out_dir / QUERY_FILE,
                          query_encoder=query_encoder)


def released_features(data_dir: str | Path, query_features: str | Path | None = None,
                      query_encoder=None, frames: str = "eva_clip_features") -> HiRESTFeatures:
    """The authors' released features unpacked under `data_dir` (their README: ./data/)."""
    data_dir = Path(data_dir)
    asr = data_dir / ASR_DIR
    return HiRESTFeatures(data_dir / frames, asr if asr.is_dir() else None,
                          data_dir / ASR_FEATURES_DIR if asr.is_dir() else None,
                          query_features=query_features, query_encoder=query_encoder)


def prepare_features(dataset, source: str = "extract", out_dir: str | Path | None = None,
                     videos_dir: str | Path | None = None, asr_dir: str | Path | None = None,
                     released_dir: str | Path | None = None, query_features: str | Path | None = None,
                     video_encoder=None, text_encoder=None, fps: float = 1.0, frame_size: int | None = 224,
                     backend: str = "decord", encoder_name: str = "encoder") -> HiRESTFeatures:
    """The features a HiREST run reads, as `data.features` configures them.

    source="extract": our own extraction of every video the annotations name (videos_dir defaults to
    <root>/data/videos, subtitles to <root>/data/ASR) into out_dir (default <root>/features/<encoder_name>),
    reused and resumed across runs.
    source="released": the authors' files under released_dir (default <root>/data); queries from
    `query_features` if given, else embedded by the video encoder's text tower, else by the text encoder.
    """
    root = Path(dataset.root)
    queries = [q for split in ("train", "val", "test") for q in dataset.split(split)]
    if source == "released":
        query_encoder = None
        if query_features is None:
            tower = video_encoder.text_encoder() if video_encoder is not None else None
            query_encoder = tower or text_encoder
            if query_encoder is None:
                raise ConfigError("released features need query embeddings: data.features.query_features=<file> "
                                  "or an encoder with a text side")
        return released_features(released_dir or root / "data", query_features=query_features,
                                 query_encoder=query_encoder)
    if source != "extract":
        raise ConfigError(f"data.features.source must be 'extract' or 'released', got {source!r}")
    if video_encoder is None or text_encoder is None:
        raise ConfigError("extracting HiREST features needs a video and a text encoder (e.g. encoder=thumbnail "
                          "or encoder=clip_vit_b32); with the authors' files use data.features.source=released")
    out_dir = Path(out_dir) if out_dir else root / "features" / encoder_name
    asr = Path(asr_dir) if asr_dir else root / "data/ASR"
    extract_features(dataset.videos(), queries, Path(videos_dir) if videos_dir else root / "data/videos", out_dir,
                     video_encoder, text_encoder, asr_source_dir=asr if asr.is_dir() else None, fps=fps,
                     frame_size=frame_size, backend=backend)
    return extracted_features(out_dir)
