"""open_clip image-text models as video encoders: frames embedded independently, unit rows averaged per clip;
their text tower in the same space."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import torch

from spacewalk.core.errors import ConfigError
from spacewalk.encoders.base import (
    DEFAULT_IMAGE_MODEL_FRAMES,
    _check_clip,
    _config_digest,
    _identity,
    _normalize,
    _prepare,
    _weights_name,
    resolve_device,
)
from spacewalk.encoders.text_tower import TowerTextEncoder
from spacewalk.encoders.towers import FrameMeanTower, _FrameTransform, _trainable


class OpenClipVideoEncoder:
    """An image-text model as a video encoder: frames embedded independently, then averaged.
    `batch_size` counts frames per forward pass, so memory does not depend on T."""

    averages_frames = True

    def __init__(self, model, model_name: str, weights: str, device: torch.device, batch_size: int,
                 num_frames: int, tokenizer=None):
        from open_clip.transform import PreprocessCfg, image_transform_v2

        self.model = _prepare(model, device)
        self.device = device
        self.batch_size = int(batch_size)
        self.num_frames = int(num_frames)
        # The model's own inference transform (resize shortest side, centre crop, its mean/std).
        self.transform = image_transform_v2(PreprocessCfg(**model.visual.preprocess_cfg), is_train=False)
        self.dim = int(model.visual.output_dim)
        self._tokenizer = tokenizer
        self._core = dict(model=model_name, weights=weights, dim=self.dim)
        # num_frames does not change encode() but does change what callers feed it: part of the identity.
        self.identity = _identity("OpenClipVideoEncoder", **self._core, num_frames=self.num_frames,
                                  pooling="mean_of_unit_frames")

    def preprocess(self, frames: Sequence[np.ndarray]) -> torch.Tensor:
        """uint8 frames [H, W, 3] (any sizes) -> float [N, 3, S, S] on the encoder's device."""
        from PIL import Image

        return torch.stack([self.transform(Image.fromarray(f)) for f in frames]).to(self.device)

    def embed(self, pixels: torch.Tensor) -> torch.Tensor:
        """[B, T, 3, S, S] -> [B, dim] unit rows; differentiable (for all-layer fine-tuning)."""
        b, t = pixels.shape[:2]
        frames = _normalize(self.model.encode_image(pixels.flatten(0, 1))).view(b, t, -1)
        return _normalize(frames.mean(1))

    def encode(self, clips: Sequence[np.ndarray]) -> np.ndarray:
        clips = [_check_clip(c) for c in clips]
        owner = np.repeat(np.arange(len(clips)), [len(c) for c in clips])
        frames = [f for c in clips for f in c]  # clips may differ in frame size: no concatenate
        sums = torch.zeros(len(clips), self.dim, dtype=torch.float32)
        with torch.inference_mode():
            for start in range(0, len(frames), self.batch_size):
                emb = _normalize(self.model.encode_image(self.preprocess(frames[start:start + self.batch_size])))
                sums.index_add_(0, torch.from_numpy(owner[start:start + self.batch_size]), emb.cpu())
        return _normalize(sums).numpy()

    def text_encoder(self) -> TowerTextEncoder:
        import open_clip

        tokenizer = self._tokenizer or open_clip.get_tokenizer(
            self._core["model"], context_length=getattr(self.model, "context_length", None))

        def embed(texts: list[str]) -> torch.Tensor:
            return self.model.encode_text(tokenizer(texts).to(self.device))

        return TowerTextEncoder(_identity("OpenClipTextEncoder", **self._core), self.dim, self.batch_size, embed)

    def trainable_tower(self) -> FrameMeanTower:
        return _trainable(FrameMeanTower(copy.deepcopy(self.model.visual), self.dim))

    def clip_transform(self, train: bool = False) -> _FrameTransform:
        from open_clip.transform import PreprocessCfg, image_transform_v2

        cfg = PreprocessCfg(**self.model.visual.preprocess_cfg)
        return _FrameTransform(self.transform if not train else image_transform_v2(cfg, is_train=True))


def open_clip_video_encoder(model_name: str = "ViT-B-32", pretrained: str | None = None, device: str = "cpu",
                            batch_size: int = 64, num_frames: int = DEFAULT_IMAGE_MODEL_FRAMES,
                            random_init: bool = False, model_cfg: dict | None = None,
                            init_seed: int | None = None) -> OpenClipVideoEncoder:
    """model_name: an open_clip architecture ("ViT-B-32", "EVA02-B-16", ...) or "hf-hub:org/repo" /
    "local-dir:/path" (which carry their own weights; `pretrained` is then ignored).
    pretrained: an open_clip tag ("openai", "laion2b_s34b_b79k", ...; open_clip downloads it into its cache on
    first use) or a local checkpoint file. For OpenAI weights given as a file, pick the "-quickgelu" variant of
    the architecture (a tag sets it by itself).
    A missing `pretrained` is an error unless `random_init=True`: a bank of random features is never wanted
    by accident. `model_cfg` overrides the architecture's config (embed_dim, vision_cfg, text_cfg), for tiny
    test models. num_frames: frames sampled per clip by callers (image models have no pre-training count).
    init_seed: a random model's weights drawn from this seed (and named by it), not from the global generator,
    so that a feature bank built with it and a run's trainable copy of it (all-layer) are the same network."""
    import open_clip

    schema, identifier = open_clip.factory.parse_model_name(model_name)
    if schema is None and not pretrained and not random_init:
        raise ConfigError(f"open_clip_video_encoder({model_name!r}) has no weights: give `pretrained` (an open_clip "
                          "tag or a checkpoint file), or random_init=True for a randomly initialised model")
    kwargs = dict(model_cfg or {})
    if schema is None and pretrained:
        tag = open_clip.get_pretrained_cfg(model_name, pretrained)
        # OpenAI's weights were trained with QuickGELU; open_clip only warns when the config says otherwise.
        kwargs["force_quick_gelu"] = bool(tag.get("quick_gelu", False)) if tag else False
        weights = pretrained if tag else _weights_name(pretrained)
    else:
        weights = f"{schema}:{_weights_name(identifier)}" if schema else "random"
    if init_seed is not None and weights == "random":
        weights = f"random(seed={int(init_seed)})"
    if model_cfg:
        weights += f", model_cfg={_config_digest(model_cfg)}"

    def create():
        return open_clip.create_model(model_name, pretrained=None if schema else pretrained,
                                      pretrained_image=False, pretrained_text=False, **kwargs)

    if init_seed is None:
        model = create()
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(init_seed))
            model = create()
    return OpenClipVideoEncoder(model, model_name, weights, resolve_device(device), batch_size, num_frames)
