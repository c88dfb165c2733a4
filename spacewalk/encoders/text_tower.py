"""The text tower of a video/image-text model (open_clip, X-CLIP): texts into the same space as its clips."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from spacewalk.encoders.base import _normalize

# Text towers of video models: short texts, cheap next to video, so not tied to the video batch size.
TEXT_BATCH_SIZE = 64


def _encode_texts(texts: Sequence[str], dim: int, batch_size: int,
                  embed: Callable[[list[str]], torch.Tensor]) -> np.ndarray:
    """Shared by every text tower: zero rows for blank texts, length-sorted batches, unit rows."""
    if isinstance(texts, str):
        raise TypeError("encode() takes a sequence of strings, not one string")
    out = np.zeros((len(texts), dim), dtype=np.float32)
    keep = [i for i, t in enumerate(texts) if t.strip()]
    # Sorting by length keeps padding (and wasted compute) small, as sentence-transformers does.
    keep.sort(key=lambda i: -len(texts[i]))
    with torch.inference_mode():
        for start in range(0, len(keep), batch_size):
            rows = keep[start:start + batch_size]
            out[rows] = _normalize(embed([texts[i] for i in rows])).cpu().numpy()
    return out


class TowerTextEncoder:
    """The text tower of a video/image-text model: shares the model object with its video side."""

    def __init__(self, identity: str, dim: int, batch_size: int, embed: Callable[[list[str]], torch.Tensor]):
        self.identity = identity
        self.dim = int(dim)
        self.batch_size = int(batch_size)
        self._embed = embed

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return _encode_texts(texts, self.dim, self.batch_size, self._embed)
