"""What every encoder family shares: the two interfaces (text -> unit vectors, video clips -> unit vectors),
the device choice, frame resampling and the small rules every family applies the same way (identity strings,
unit rows, clip checks, frozen float32 models)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import torch

# image models have no pre-training frame count: the frames per clip callers sample from them by default
DEFAULT_IMAGE_MODEL_FRAMES = 8


@runtime_checkable
class TextEncoder(Protocol):
    identity: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class VideoEncoder(Protocol):
    identity: str
    dim: int
    num_frames: int

    def encode(self, clips: Sequence[np.ndarray]) -> np.ndarray: ...

    def text_encoder(self) -> TextEncoder | None: ...


def local_rank() -> int:
    """This process's rank on its node when a launcher started several (torchrun and Lightning's own DDP processes
    set LOCAL_RANK, SLURM's srun SLURM_LOCALID), else 0."""
    return int(os.environ.get("LOCAL_RANK", os.environ.get("SLURM_LOCALID", 0)))


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """"auto": the GPU when there is one, else the CPU. "auto" and a bare "cuda" name the process's own GPU,
    cuda:<local rank> (modulo the GPUs it sees: a task bound to one GPU sees it as cuda:0): they are resolved when
    an encoder or a backend is built, before Lightning selects the rank's GPU, and torch's bare "cuda" would then
    put every process of a node on GPU 0 (and a bank's encoder on another GPU than its inputs)."""
    name = str(device)
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and torch.cuda.is_available():
        return torch.device("cuda", local_rank() % torch.cuda.device_count())
    return torch.device(name)


def uniform_frame_indices(num_available: int, num_frames: int) -> np.ndarray:
    """Centres of `num_frames` equal slices of [0, num_available): repeats frames when there are too few."""
    if num_available < 1:
        raise ValueError("a clip needs at least one frame")
    return ((np.arange(num_frames) + 0.5) * num_available / num_frames).astype(np.int64)


def _identity(kind: str, **fields) -> str:
    return f"{kind}(" + ", ".join(f"{k}={v}" for k, v in fields.items()) + ")"


def _config_digest(config: dict | str) -> str:
    text = config if isinstance(config, str) else json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def _weights_name(name_or_path: str) -> str:
    # A local folder or file is named by its absolute path, a hub id by itself.
    path = Path(name_or_path).expanduser()
    return str(path.resolve()) if path.exists() else name_or_path


def _normalize(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.normalize(x.float(), dim=-1)


def _check_clip(clip: np.ndarray) -> np.ndarray:
    clip = np.asarray(clip)
    if clip.ndim != 4 or clip.shape[-1] != 3 or clip.shape[0] < 1 or clip.dtype != np.uint8:
        raise ValueError(f"a clip must be uint8 [T >= 1, H, W, 3] RGB, got {clip.dtype} {list(clip.shape)}")
    return clip


def _prepare(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    # Frozen, float32: banks built on CPU and on GPU then differ only by float noise.
    return model.to(device=device, dtype=torch.float32).eval().requires_grad_(False)


def _features(output) -> torch.Tensor:
    # transformers 5 returns a model output from get_*_features, 4.x a tensor.
    return output if isinstance(output, torch.Tensor) else output.pooler_output
