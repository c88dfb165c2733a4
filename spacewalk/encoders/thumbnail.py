"""The thumbnail video encoder: colour thumbnails of the frames, no weights at all (the synthetic data's default)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from spacewalk.encoders.base import DEFAULT_IMAGE_MODEL_FRAMES, _check_clip, _identity, _normalize


class ThumbnailVideoEncoder:
    """Each frame shrunk to a `grid` x `grid` colour thumbnail (area averaging), centred and L2-normalised;
    frames averaged per clip. No weights and no text tower: the encoder the synthetic datasets train on
    (their steps differ by colour and layout, which a thumbnail keeps), and a floor any learned encoder
    must beat. It is not a substitute for CLIP on real video."""

    averages_frames = True

    def __init__(self, grid: int = 8):
        self.grid = int(grid)
        self.dim = 3 * self.grid * self.grid
        # no pre-training count: the count callers sample from image models (sparse frame sampling's k)
        self.num_frames = DEFAULT_IMAGE_MODEL_FRAMES
        self.identity = _identity("ThumbnailVideoEncoder", grid=self.grid, dim=self.dim)

    def frame_features(self, frames: np.ndarray) -> torch.Tensor:
        pixels = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2).float() / 255.0
        thumbs = torch.nn.functional.adaptive_avg_pool2d(pixels, self.grid).flatten(1)
        # centring removes the overall brightness, which otherwise dominates every cosine
        return _normalize(thumbs - thumbs.mean(1, keepdim=True))

    def encode(self, clips: Sequence[np.ndarray]) -> np.ndarray:
        out = [self.frame_features(_check_clip(c)).mean(0) for c in clips]
        return _normalize(torch.stack(out)).numpy() if out else np.zeros((0, self.dim), np.float32)

    def text_encoder(self) -> None:
        return None


def thumbnail_video_encoder(grid: int = 8) -> ThumbnailVideoEncoder:
    return ThumbnailVideoEncoder(grid)
