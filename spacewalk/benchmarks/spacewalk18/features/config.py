"""A feature bank's settings: the grid of k-second cells, the frames decoded inside them, and how a build runs."""

from __future__ import annotations

from dataclasses import dataclass

from spacewalk.core.errors import ConfigError
from spacewalk.media.frame_prefetch import check_settings
from spacewalk.media.video import BACKENDS, gpu_index


@dataclass(frozen=True)
class BankConfig:
    segment_seconds: float = 12.0  # k: grid cells [j*k, (j+1)*k) anchored at t = 0, clipped to the recording
    fps: float = 1.0  # frames per second decoded inside a cell (k * fps frames for a full cell)
    frame_size: int | None = 224  # short side after a decode-time resize (aspect kept); None = native
    video_backend: str = "decord"
    # How the build runs, not what it makes (so not in meta.json: changing them leaves a bank fresh).
    # prefetch: batches each decoder decodes ahead of the encoder (0: decode, then encode, in turn);
    # decoders: threads splitting a recording by time (spacewalk/media/frame_prefetch.py; docs/feature_bank.md).
    prefetch: int = 2
    decoders: int = 1
    # "cuda[:i]": decord decodes on that GPU (NVDEC; decord built with CUDA; untested here). In meta.json
    # only when not "cpu" (GPU decoding may round pixels differently; cpu banks built before it stay fresh).
    decode_device: str = "cpu"

    def __post_init__(self):
        if not self.segment_seconds > 0 or not self.fps > 0:
            raise ConfigError(f"segment_seconds and fps must be positive, got {self.segment_seconds}, {self.fps}")
        if self.frame_size is not None and self.frame_size < 1:
            raise ConfigError(f"frame_size must be a positive int or None, got {self.frame_size}")
        if self.video_backend not in BACKENDS:
            raise ConfigError(f"unknown video backend {self.video_backend!r}; choose from {sorted(BACKENDS)}")
        check_settings(self.decoders, self.prefetch)
        if gpu_index(self.decode_device) is not None and self.video_backend != "decord":
            raise ConfigError(f"decode_device={self.decode_device!r} needs video_backend='decord' (GPU decoding is "
                              f"decord's), got {self.video_backend!r}")
