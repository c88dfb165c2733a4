"""The trainable video towers of all-layer fine-tuning (models/all_layer.py): a copy of a video encoder's
weights mapping preprocessed frames to the clip feature exactly as the encoder's `encode` computes it, and the
per-clip preprocessing into those frames (`clip_transform`, with the training augmentation)."""

from __future__ import annotations

import numpy as np
import torch

from spacewalk.encoders.base import _check_clip, _features, _normalize


class VideoTower(torch.nn.Module):
    """A trainable copy of a video encoder: preprocessed frames [B, k, 3, S, S] (its `clip_transform`) ->
    [B, dim] unit rows, the clip feature its encoder's `encode` gives for the same k frames. For freezing the
    first N blocks, `blocks()` are the transformer blocks in the order they run and `stem()` the parameters
    that run before them; `set_activation_checkpointing(True)` recomputes the blocks' activations in backward."""

    dim: int

    def blocks(self) -> torch.nn.ModuleList:
        raise NotImplementedError

    def stem(self) -> list[torch.nn.Parameter]:
        raise NotImplementedError

    def set_activation_checkpointing(self, on: bool) -> None:
        raise NotImplementedError


def _hf_activation_checkpointing(model, on: bool) -> None:
    # transformers 5 renamed gradient_checkpointing_enable/disable (kept as deprecated aliases) to activation_*
    prefix = "activation" if hasattr(model, "activation_checkpointing_enable") else "gradient"
    getattr(model, f"{prefix}_checkpointing_{'enable' if on else 'disable'}")()


class FrameMeanTower(VideoTower):
    """An open_clip image tower over k frames: each frame embedded and normalised, the mean normalised
    (OpenClipVideoEncoder.encode's pooling)."""

    def __init__(self, visual: torch.nn.Module, dim: int):
        super().__init__()
        self.visual, self.dim = visual, int(dim)

    def forward(self, pixels: torch.Tensor, frame_mask: torch.Tensor | None = None) -> torch.Tensor:
        """`frame_mask` [B, k]: clips of fewer than k frames, padded (only the frames marked True count)."""
        b, k = pixels.shape[:2]
        if frame_mask is None:
            frames = _normalize(self.visual(pixels.flatten(0, 1))).view(b, k, -1)
            return _normalize(frames.mean(1))
        rows = _normalize(self.visual(pixels[frame_mask]))  # padding frames are not encoded at all
        owner = torch.arange(b, device=pixels.device).repeat_interleave(frame_mask.sum(1))
        return _normalize(rows.new_zeros(b, rows.shape[1]).index_add(0, owner, rows))

    def blocks(self) -> torch.nn.ModuleList:
        # open_clip's own ViT, or a timm trunk (EVA02 and kin)
        trunk = getattr(self.visual, "trunk", None)
        return trunk.blocks if trunk is not None else self.visual.transformer.resblocks

    def stem(self) -> list[torch.nn.Parameter]:
        names = ("conv1", "class_embedding", "positional_embedding", "ln_pre",  # open_clip ViT
                 "trunk.patch_embed", "trunk.cls_token", "trunk.pos_embed")  # timm
        return [p for n, p in self.visual.named_parameters() if n.split(".")[0] in names or n.startswith(names)]

    def set_activation_checkpointing(self, on: bool) -> None:
        self.visual.set_grad_checkpointing(on)


class XClipVideoTower(VideoTower):
    """X-CLIP's video side: the frames through its ViT, projected, then its multi-frame integration
    transformer (`get_video_features`, transformers' own code), normalised. `model` is an XCLIPModel copy
    without its text side."""

    def __init__(self, model, dim: int):
        super().__init__()
        self.model, self.dim = model, int(dim)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return _normalize(_features(self.model.get_video_features(pixel_values=pixels)))

    def blocks(self) -> torch.nn.ModuleList:
        return self.model.vision_model.encoder.layers

    def stem(self) -> list[torch.nn.Parameter]:
        vision = self.model.vision_model
        return [*vision.embeddings.parameters(), *vision.pre_layernorm.parameters()]

    def set_activation_checkpointing(self, on: bool) -> None:
        _hf_activation_checkpointing(self.model, on)


def _videomae_features(model, pixels: torch.Tensor) -> torch.Tensor:
    # VideoMAEModel has no pooler: the mean of the last hidden state over all tokens
    out = model(pixel_values=pixels)
    pooled = getattr(out, "pooler_output", None)
    return pooled if pooled is not None else out.last_hidden_state.mean(1)


class VideoMAETower(VideoTower):
    """VideoMAE: the k frames as one clip (tubelets), the mean of the last hidden state, normalised."""

    def __init__(self, model, dim: int):
        super().__init__()
        self.model, self.dim = model, int(dim)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return _normalize(_videomae_features(self.model, pixels))

    def blocks(self) -> torch.nn.ModuleList:
        return self.model.encoder.layer

    def stem(self) -> list[torch.nn.Parameter]:
        return list(self.model.embeddings.parameters())

    def set_activation_checkpointing(self, on: bool) -> None:
        _hf_activation_checkpointing(self.model, on)


def _trainable(tower: VideoTower) -> VideoTower:
    # the copy's weights in float32 whatever the frozen model's, all trainable, in training mode
    return tower.float().train().requires_grad_(True)


class _FrameTransform:
    """An open_clip image transform applied to each of a clip's frames (a training transform draws its
    augmentation per frame, from torch's generator)."""

    def __init__(self, transform):
        self.transform = transform

    def __call__(self, frames: np.ndarray) -> torch.Tensor:
        from PIL import Image

        return torch.stack([self.transform(Image.fromarray(f)) for f in frames])


class _ClipTransform:
    """A transformers video processor applied to one clip of exactly the frames given (no resampling). The
    processors have no training augmentation, so train=True first crops the whole clip at random (one
    RandomResizedCrop for all its frames, so the frames stay aligned; open_clip's training scale 0.9-1 of the
    area) to the model's input size, which the processor then only rescales and normalises."""

    def __init__(self, processor, size: int, train: bool):
        self.processor, self.size, self.train = processor, int(size), bool(train)

    def __call__(self, frames: np.ndarray) -> torch.Tensor:
        frames = _check_clip(frames)
        if self.train:
            from torchvision.transforms import v2

            crop = v2.RandomResizedCrop(self.size, scale=(0.9, 1.0), antialias=True)
            clip = torch.from_numpy(np.ascontiguousarray(frames)).permute(0, 3, 1, 2)  # [k, 3, H, W]: one crop
            frames = crop(clip).permute(0, 2, 3, 1).numpy()
        batch = self.processor([list(frames)], return_tensors="pt", input_data_format="channels_last")
        return batch["pixel_values"][0].to(torch.float32)
