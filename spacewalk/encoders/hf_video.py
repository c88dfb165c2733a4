"""transformers video models as video encoders: X-CLIP (with its text tower) and VideoMAE (video only), each
fed exactly its pre-training frame count per clip."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence

import numpy as np
import torch

from spacewalk.core.errors import ConfigError
from spacewalk.encoders.base import (
    _check_clip,
    _config_digest,
    _features,
    _identity,
    _normalize,
    _prepare,
    _weights_name,
    resolve_device,
    uniform_frame_indices,
)
from spacewalk.encoders.text_tower import TEXT_BATCH_SIZE, TowerTextEncoder
from spacewalk.encoders.towers import (
    VideoMAETower,
    VideoTower,
    XClipVideoTower,
    _ClipTransform,
    _trainable,
    _videomae_features,
)


class HFVideoEncoder:
    """A transformers video model fed exactly `num_frames` frames per clip; `batch_size` counts clips."""

    averages_frames = False  # the frames attend to each other: a clip feature is not a mean of frame features

    def __init__(self, kind: str, model, image_processor, features: Callable[[torch.Tensor], torch.Tensor],
                 weights: str, device: torch.device, batch_size: int, num_frames: int, dim: int, pooling: str,
                 text_tower: Callable[[], TowerTextEncoder] | None = None,
                 video_tower: Callable[[], VideoTower] | None = None, input_size: int | None = None):
        """`video_tower` builds the trainable copy (a VideoTower over copies of `model`'s video weights);
        `input_size` is the model's square frame size (the training crop's)."""
        self.model = _prepare(model, device)
        self.image_processor = image_processor
        self._video_tower = video_tower
        self.input_size = input_size
        self.device = device
        self.batch_size = int(batch_size)
        self.num_frames = int(num_frames)
        self.dim = int(dim)
        self._features = features
        self._text_tower = text_tower
        self.identity = _identity(kind, model=type(model).__name__, weights=weights, dim=self.dim,
                                  num_frames=self.num_frames, pooling=pooling)

    def preprocess(self, clips: Sequence[np.ndarray]) -> torch.Tensor:
        """uint8 clips of any T -> float [B, num_frames, 3, S, S] on the encoder's device."""
        videos = [list(c[uniform_frame_indices(len(c), self.num_frames)]) for c in map(_check_clip, clips)]
        # channels_last stated outright: tiny frames (H or W = 3) would make the processor guess wrongly.
        batch = self.image_processor(videos, return_tensors="pt", input_data_format="channels_last")
        return batch["pixel_values"].to(self.device, torch.float32)

    def embed(self, pixels: torch.Tensor) -> torch.Tensor:
        """[B, num_frames, 3, S, S] -> [B, dim] unit rows; differentiable (for all-layer fine-tuning)."""
        return _normalize(self._features(pixels))

    def encode(self, clips: Sequence[np.ndarray]) -> np.ndarray:
        out = np.zeros((len(clips), self.dim), dtype=np.float32)
        with torch.inference_mode():
            for start in range(0, len(clips), self.batch_size):
                chunk = clips[start:start + self.batch_size]
                out[start:start + len(chunk)] = self.embed(self.preprocess(chunk)).cpu().numpy()
        return out

    def text_encoder(self) -> TowerTextEncoder | None:
        return self._text_tower() if self._text_tower else None

    def trainable_tower(self) -> VideoTower:
        if self._video_tower is None:
            raise ConfigError(f"{self.identity} offers no trainable video tower")
        return _trainable(self._video_tower())

    def clip_transform(self, train: bool = False) -> _ClipTransform:
        """Exactly `num_frames` frames in: the towers of clip models have a fixed frame count."""
        return _ClipTransform(self.image_processor, self.input_size, train)


def _hf_weights(name_or_path: str | None, config, init_seed: int | None = None) -> str:
    if config is not None:
        seed = "" if init_seed is None else f"(seed={int(init_seed)})"
        return f"random{seed}:{_config_digest(config.to_json_string(use_diff=False))}"
    if name_or_path is None:
        raise ConfigError("give name_or_path (a hub id or a local folder), or a config for a random model")
    return _weights_name(name_or_path)


def _random_model(model_class, config, init_seed: int | None):
    """A model of random weights from `config`; from init_seed's generator when given (not the global one), so
    that a feature bank built with it and a run's trainable copy of it (all-layer) are the same network."""
    if init_seed is None:
        return model_class(config)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(init_seed))
        return model_class(config)


def _input_size(image_size) -> int:
    return int(image_size if isinstance(image_size, int) else image_size[0])


def _square_processor(image_size) -> object:
    from transformers import VideoMAEImageProcessor

    size = _input_size(image_size)
    return VideoMAEImageProcessor(size={"shortest_edge": size}, crop_size={"height": size, "width": size})


def xclip_video_encoder(name_or_path: str | None = None, device: str = "cpu", batch_size: int = 8,
                        config=None, tokenizer=None, init_seed: int | None = None) -> HFVideoEncoder:
    """name_or_path: a hub id (microsoft/xclip-base-patch32, ...) or a local folder with model, image
    processor and tokenizer. `config` (an XCLIPConfig) builds a random model instead; its text tower then
    needs `tokenizer`.
    `init_seed`: the random model's weights from that seed (see _random_model).
    The text tower is X-CLIP's plain text embedding (`get_text_features`): the full model also shifts text
    by a video-conditioned prompt, which has no place in a bank of texts encoded once."""
    from transformers import AutoImageProcessor, AutoTokenizer, XCLIPModel

    weights = _hf_weights(name_or_path, config, init_seed)
    if config is not None:
        model = _random_model(XCLIPModel, config, init_seed)
        processor = _square_processor(config.vision_config.image_size)
    else:
        model = XCLIPModel.from_pretrained(name_or_path)
        processor = AutoImageProcessor.from_pretrained(name_or_path)
        tokenizer = tokenizer or AutoTokenizer.from_pretrained(name_or_path)
    dev = resolve_device(device)
    max_length = model.config.text_config.max_position_embeddings

    def text_tower() -> TowerTextEncoder:
        if tokenizer is None:
            raise ValueError("this X-CLIP was built from a config without a tokenizer: pass tokenizer=")

        def embed(texts: list[str]) -> torch.Tensor:
            batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                              return_tensors="pt").to(dev)
            return _features(model.get_text_features(input_ids=batch["input_ids"],
                                                     attention_mask=batch["attention_mask"]))

        return TowerTextEncoder(_identity("XClipTextEncoder", model="XCLIPModel", weights=weights,
                                          dim=model.config.projection_dim, max_length=max_length),
                                model.config.projection_dim, TEXT_BATCH_SIZE, embed)

    def video_tower() -> XClipVideoTower:
        # a copy of the video side only: the text side (a third of X-CLIP base) would be dead weight, so the
        # deep copy maps it to None (a PreTrainedModel still, for transformers' activation checkpointing)
        text_side = [model.text_model, model.text_projection, model.prompts_generator, model.prompts_visual_layernorm,
                     model.prompts_visual_projection, model.logit_scale]
        return XClipVideoTower(copy.deepcopy(model, {id(m): None for m in text_side}), model.config.projection_dim)

    return HFVideoEncoder("XClipVideoEncoder", model, processor,
                          lambda pixels: _features(model.get_video_features(pixel_values=pixels)),
                          weights, dev, batch_size, model.config.vision_config.num_frames,
                          model.config.projection_dim, "xclip_mit", text_tower, video_tower,
                          _input_size(model.config.vision_config.image_size))


def videomae_video_encoder(name_or_path: str | None = None, device: str = "cpu", batch_size: int = 8,
                           config=None, init_seed: int | None = None) -> HFVideoEncoder:
    """name_or_path: a hub id (MCG-NJU/videomae-base, ...) or a local folder with model and image processor.
    The embedding is the mean of the last hidden state over all tokens (VideoMAEModel has no pooler).
    `config` (a VideoMAEConfig) builds a random model instead (from `init_seed` when given). Video only: no
    text tower."""
    from transformers import AutoImageProcessor, VideoMAEModel

    weights = _hf_weights(name_or_path, config, init_seed)
    if config is not None:
        model, processor = _random_model(VideoMAEModel, config, init_seed), _square_processor(config.image_size)
    else:
        model = VideoMAEModel.from_pretrained(name_or_path)
        processor = AutoImageProcessor.from_pretrained(name_or_path)

    return HFVideoEncoder("VideoMAEVideoEncoder", model, processor, lambda pixels: _videomae_features(model, pixels),
                          weights, resolve_device(device), batch_size, model.config.num_frames,
                          model.config.hidden_size, "mean_tokens",
                          video_tower=lambda: VideoMAETower(copy.deepcopy(model), model.config.hidden_size),
                          input_size=_input_size(model.config.image_size))
