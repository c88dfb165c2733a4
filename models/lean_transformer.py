"""A stack of `nn.TransformerEncoderLayer`s read at one position per sample, computed in a fraction of the
memory and time of `nn.TransformerEncoder`, with the same numbers.

LFB TF reads the encoder's output at the query cell only. So:

- the last layer is computed at the query rows alone: its keys and values from every cell, its query,
  attention row, feed-forward and norms for one row per sample (about a fifth of a full layer);
- the layers before it run in chunks of samples under activation checkpointing: the forward pass keeps
  each chunk's input, and the backward pass recomputes one chunk's activations at a time (at w = 20 min,
  512 samples x 101 cells, a full layer keeps about 3.5 GB for its backward pass);
- dropout draws the same masks as `nn.TransformerEncoder` would, in the same order, before anything is
  computed: [B, H, M, M] for the attention weights, [M, B, D] after the attention (that layer's output
  is laid out length-first), [B, M, F] in the feed-forward block, [B, M, D] after it, layer by layer. So
  a training step gives the outputs and gradients of the plain stack, up to float rounding
  (tests/models/test_lean_transformer.py), and a run its numbers. The masks are kept as booleans (a
  quarter of the float masks the plain stack keeps); drawing them as booleans takes the same random
  numbers as PyTorch's float dropout masks (checked by the same tests).

The layers' own modules and parameters are used, so checkpoints of either path load in the other.
Only post-norm and pre-norm layers with batch_first=True and self-attention are handled (what LFB TF
builds); attention is computed as PyTorch's math kernel does, since its fused CPU kernels take no dropout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint


@dataclass
class LayerMasks:
    """One layer's dropout masks (True = kept), in the shapes the plain layer draws them."""

    attention: torch.Tensor  # [B, H, M, M]
    after_attention: torch.Tensor  # [B, M, D], a view of a [M, B, D] draw
    feed_forward: torch.Tensor  # [B, M, F]
    after_feed_forward: torch.Tensor  # [B, M, D]

    def rows(self, index: torch.Tensor, query_pos: torch.Tensor) -> LayerMasks:
        """The masks of samples `index` at cells `query_pos`, as one-row sequences (the attention's row of that
        query: [B, H, 1, M])."""
        return LayerMasks(self.attention[index, :, query_pos][:, :, None],
                          self.after_attention[index, query_pos][:, None], self.feed_forward[index, query_pos][:, None],
                          self.after_feed_forward[index, query_pos][:, None])

    def samples(self, start: int, stop: int) -> LayerMasks:
        return LayerMasks(self.attention[start:stop], self.after_attention[start:stop],
                          self.feed_forward[start:stop], self.after_feed_forward[start:stop])


def draw_masks(layer: nn.TransformerEncoderLayer, batch: int, cells: int, device: torch.device) -> LayerMasks:
    """The dropout masks the plain layer draws in training, in its order (see the module's docstring)."""
    keep = 1.0 - layer.dropout.p
    heads, dim = layer.self_attn.num_heads, layer.self_attn.embed_dim
    width = layer.linear1.out_features

    def draw(*shape):
        return torch.empty(shape, dtype=torch.bool, device=device).bernoulli_(keep)

    attention = draw(batch, heads, cells, cells)
    after_attention = draw(cells, batch, dim).transpose(0, 1)
    return LayerMasks(attention, after_attention, draw(batch, cells, width), draw(batch, cells, dim))


def _dropout(x: torch.Tensor, keep: torch.Tensor | None, p: float) -> torch.Tensor:
    # x * (mask / (1 - p)), as PyTorch's CPU dropout computes it
    return x if keep is None else x * keep.to(x.dtype).div_(1.0 - p)


def _attention(layer: nn.TransformerEncoderLayer, query: torch.Tensor, memory: torch.Tensor, padding: torch.Tensor,
               keep: torch.Tensor | None) -> torch.Tensor:
    """Self-attention of `query` rows [B, L, D] over `memory` [B, M, D] (L = M: every row; L = 1: the query
    row), keys at `padding` [B, M] (True = padding) left out; the out-projection applied."""
    attn = layer.self_attn
    heads, dim = attn.num_heads, attn.embed_dim
    head_dim = dim // heads
    w, b = attn.in_proj_weight, attn.in_proj_bias
    if query is memory:
        q, k, v = F.linear(memory, w, b).chunk(3, dim=-1)
    else:
        q = F.linear(query, w[:dim], b[:dim])
        k, v = F.linear(memory, w[dim:], b[dim:]).chunk(2, dim=-1)
    batch, rows, cells = query.shape[0], query.shape[1], memory.shape[1]
    q = q.reshape(batch, rows, heads, head_dim).transpose(1, 2)
    k = k.reshape(batch, cells, heads, head_dim).transpose(1, 2)
    v = v.reshape(batch, cells, heads, head_dim).transpose(1, 2)
    # the scale on q alone (the math kernel puts its square root on q and k): a copy of q, not of the keys
    scores = (q * (1.0 / math.sqrt(head_dim))) @ k.transpose(-2, -1)
    scores = scores.masked_fill(padding[:, None, None, :], float("-inf"))
    weights = _dropout(torch.softmax(scores, dim=-1), keep, attn.dropout)
    out = (weights @ v).transpose(1, 2).reshape(batch, rows, dim)
    return attn.out_proj(out)


def _layer(layer: nn.TransformerEncoderLayer, x: torch.Tensor, padding: torch.Tensor, masks: LayerMasks | None,
           query_pos: torch.Tensor | None = None) -> torch.Tensor:
    """One layer as nn.TransformerEncoderLayer computes it in training: every row [B, M, D], or with
    `query_pos` the query rows alone [B, D] (then `masks` holds those rows)."""
    p = layer.dropout.p
    m = masks or LayerMasks(None, None, None, None)
    rows = torch.arange(len(x), device=x.device)

    def at_query(t: torch.Tensor) -> torch.Tensor:
        return t if query_pos is None else t[rows, query_pos][:, None]

    def feed_forward(h: torch.Tensor) -> torch.Tensor:
        inner = _dropout(layer.activation(layer.linear1(h)), m.feed_forward, p)
        return _dropout(layer.linear2(inner), m.after_feed_forward, p)

    if layer.norm_first:
        normed = layer.norm1(x)
        query = normed if query_pos is None else at_query(normed)
        h = at_query(x) + _dropout(_attention(layer, query, normed, padding, m.attention), m.after_attention, p)
        out = h + feed_forward(layer.norm2(h))
    else:
        query = x if query_pos is None else at_query(x)
        h = layer.norm1(query + _dropout(_attention(layer, query, x, padding, m.attention), m.after_attention, p))
        out = layer.norm2(h + feed_forward(h))
    return out if query_pos is None else out[:, 0]


def _check(layer: nn.Module) -> nn.TransformerEncoderLayer:
    if not isinstance(layer, nn.TransformerEncoderLayer) or not layer.self_attn.batch_first:
        raise TypeError(f"expected nn.TransformerEncoderLayer with batch_first=True, got {layer!r}")
    if len({layer.dropout.p, layer.dropout1.p, layer.dropout2.p, layer.self_attn.dropout}) > 1:
        raise ValueError("the layer's dropouts must share one probability (nn.TransformerEncoderLayer's own)")
    return layer


def _stack(layers: list[nn.TransformerEncoderLayer], x: torch.Tensor, padding: torch.Tensor, query_pos: torch.Tensor,
           masks: list[LayerMasks | None]) -> torch.Tensor:
    """The layers on samples x [b, M, D]: every row but in the last layer, there the query rows; [b, D]."""
    for layer, layer_masks in zip(layers[:-1], masks[:-1]):
        x = _layer(layer, x, padding, layer_masks)
    return _layer(layers[-1], x, padding, masks[-1], query_pos)


def encode_at(encoder: nn.TransformerEncoder, x: torch.Tensor, padding: torch.Tensor, query_pos: torch.Tensor,
              chunk: int = 32) -> torch.Tensor:
    """encoder(x, src_key_padding_mask=padding)[arange(B), query_pos], [B, D], as the module docstring says.
    The samples are independent (attention stays within a sample's cells), so the whole stack runs on chunks
    of `chunk` samples, each checkpointed when gradients are wanted: the forward pass keeps each chunk's input
    and the backward pass recomputes one chunk at a time."""
    layers = [_check(layer) for layer in encoder.layers]
    if encoder.norm is not None:
        raise ValueError("an encoder with a final norm is not handled")
    batch, cells = x.shape[:2]
    # every mask before anything is computed: the plain stack's order of random draws; of the last layer's,
    # the query rows are kept
    masks = [draw_masks(layer, batch, cells, x.device) if layer.training and layer.dropout.p > 0 else None
             for layer in layers]
    if masks[-1] is not None:
        masks[-1] = masks[-1].rows(torch.arange(batch, device=x.device), query_pos)
    outputs = []
    for start in range(0, batch, chunk):
        stop = min(start + chunk, batch)
        part = [m.samples(start, stop) if m is not None else None for m in masks]
        args = (layers, x[start:stop], padding[start:stop], query_pos[start:stop], part)
        if torch.is_grad_enabled():
            # nothing random inside: the masks are drawn, so the recomputation needs no saved RNG state
            outputs.append(checkpoint(_stack, *args, use_reentrant=False, preserve_rng_state=False))
        else:
            outputs.append(_stack(*args))
    return torch.cat(outputs)
