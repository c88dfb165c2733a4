"""Heads: map a step-recognition batch to one embedding per sample in step-feature space [B, D].

The batch layout is the DataModule's (datamodules/step_recognition.py): `clip` [B, D], `cells` [B, M, D]
with `cell_mask` [B, M] (True = real cell, left-aligned), `query_pos` [B] (the sample's cell). The
module scores the embedding against the recording's step features, so every head ends in the
paper's G_theta: a linear map into the D-dimensional step space.

Each head class says whether it reads the window's cells (`reads_cells`). The cells are by far the
largest part of a batch ([B, M, D]: 160 MB at B = 2048, w = 5 min, D = 768), so the DataModule builds
them only for heads that read them (spacewalk/training/step_recognition.py asks `reads_cells` of the
configured head class before anything is built).

Choices the paper leaves open:
- G_theta starts as the identity on the block that is already in step space (the clip for the
  last layer, the mean for LFB Avg, the query cell for LFB Cat / NL / TF) and zero elsewhere, so
  training starts from the zero-shot solution instead of a random projection (`identity_init`).
- Positions are signed offsets from the query cell (j - query_pos), not indices in the window:
  windows clipped at a recording's ends are shorter and the query is not in their middle, and the
  offset is what "history" and "future" mean. The encodings are learned (one D-vector per offset in
  -max_offset..max_offset, N(0, 0.02^2), further offsets share the last one): features are
  L2-normalised per modality (entries ~0.04), and a fixed sinusoid (entries ~1) would swamp them.
- Padding cells are zeroed before anything reads them and excluded from every mean, attention and
  key set, so whatever the loader puts there cannot change an output.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from models.lean_transformer import encode_at
from spacewalk.core.errors import ConfigError

Batch = dict[str, torch.Tensor]


def _g(in_features: int, dim: int, identity_block: int | Sequence[int] | None, identity_init: bool) -> nn.Linear:
    """G_theta; with identity_init, input block(s) `identity_block` (of width dim) map through unchanged
    (several blocks: G starts as their sum) and the rest starts at zero."""
    g = nn.Linear(in_features, dim)
    if identity_init and identity_block is not None:
        blocks = [identity_block] if isinstance(identity_block, int) else list(identity_block)
        with torch.no_grad():
            g.weight.zero_()
            g.bias.zero_()
            for block in blocks:
                start = block * dim
                g.weight[:, start:start + dim] = torch.eye(dim)
    return g


def head_reads_cells(head: nn.Module | type) -> bool:
    """Whether a head (instance or class) reads `cells`, `cell_mask` and `query_pos`; a head that does not
    say is assumed to, so that an unknown head never meets a batch without them."""
    return bool(getattr(head, "reads_cells", True))


def real_cells(batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    mask = batch["cell_mask"]
    return batch["cells"].masked_fill(~mask[..., None], 0.0), mask


def query_cell(cells: torch.Tensor, query_pos: torch.Tensor) -> torch.Tensor:
    return cells[torch.arange(len(cells), device=cells.device), query_pos]


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over dim 1 of the entries where mask is True; zeros where there are none."""
    count = mask.sum(dim=1, keepdim=True).clamp_min(1).to(x.dtype)
    return (x * mask[..., None].to(x.dtype)).sum(dim=1) / count


class OffsetEncoding(nn.Module):
    """Learned encoding of each cell's signed offset from the query cell, [B, M, D]."""

    def __init__(self, dim: int, max_offset: int = 256):
        super().__init__()
        self.max_offset = max_offset
        self.table = nn.Embedding(2 * max_offset + 1, dim)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, query_pos: torch.Tensor, num_cells: int) -> torch.Tensor:
        offset = torch.arange(num_cells, device=query_pos.device)[None, :] - query_pos[:, None]
        return self.table(offset.clamp(-self.max_offset, self.max_offset) + self.max_offset)


class ZeroShot(nn.Module):
    """The clip feature itself: the paper's zero-shot contrastive model has nothing to train."""

    reads_cells = False

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, batch: Batch) -> torch.Tensor:
        return batch["clip"]


class LinearHead(nn.Module):
    """Last-layer fine-tuning: G_theta(f^s)."""

    reads_cells = False

    def __init__(self, dim: int, identity_init: bool = True):
        super().__init__()
        self.g = _g(dim, dim, 0, identity_init)

    def aggregate(self, batch: Batch) -> torch.Tensor:
        return batch["clip"]

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.g(self.aggregate(batch))


class LFBAvg(nn.Module):
    """LFB Avg: G(mean of the window's real cells)."""

    reads_cells = True

    def __init__(self, dim: int, identity_init: bool = True):
        super().__init__()
        self.g = _g(dim, dim, 0, identity_init)

    def aggregate(self, batch: Batch) -> torch.Tensor:
        cells, mask = real_cells(batch)
        return masked_mean(cells, mask)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.g(self.aggregate(batch))


CAT_IDENTITY = {"query": (1,), "all": (0, 1, 2)}


class LFBCat(nn.Module):
    """LFB Cat: G([mean(history), query cell, mean(future)]).

    A query at a window's edge (a recording's first or last seconds, or w shorter than 3 cells) has no
    history or no future: that mean is zeros.

    With identity_init, `identity_on` says where G starts: "query" (the query cell alone, zero on the
    means: LFB Cat starts as zero-shot on one k-second cell) or "all" (identity on every block: G starts
    as mean(history) + query cell + mean(future), a summary of the whole window like LFB Avg's).
    `normalize_blocks` L2-normalises each of the three blocks before G (a mean over many cells is
    shorter than one cell; a zero block stays zero).
    """

    reads_cells = True

    def __init__(self, dim: int, identity_init: bool = True, identity_on: str = "query",
                 normalize_blocks: bool = False):
        super().__init__()
        if identity_on not in CAT_IDENTITY:
            raise ConfigError(f"identity_on must be one of {tuple(CAT_IDENTITY)}, got {identity_on!r}")
        self.g = _g(3 * dim, dim, CAT_IDENTITY[identity_on], identity_init)
        self.normalize_blocks = normalize_blocks

    def aggregate(self, batch: Batch) -> torch.Tensor:
        cells, mask = real_cells(batch)
        query_pos = batch["query_pos"]
        position = torch.arange(cells.shape[1], device=cells.device)[None, :]
        history = mask & (position < query_pos[:, None])
        future = mask & (position > query_pos[:, None])
        blocks = [masked_mean(cells, history), query_cell(cells, query_pos), masked_mean(cells, future)]
        if self.normalize_blocks:
            blocks = [F.normalize(b, dim=-1) for b in blocks]
        return torch.cat(blocks, -1)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.g(self.aggregate(batch))


class NonLocalBlock(nn.Module):
    """The non-local block of Wu et al. (LFB, CVPR 2019): the query attends to a fixed context.

    A query with no context (a window of one cell) gets a zero update, so the block is the identity.
    """

    def __init__(self, width: int = 512, hidden: int = 512, dropout: float = 0.2):
        super().__init__()
        self.theta = nn.Linear(width, hidden)
        self.phi = nn.Linear(width, hidden)
        self.g = nn.Linear(width, hidden)
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False)
        self.out = nn.Linear(hidden, width)
        # zero-initialised so that the block starts as the identity (Wu et al.)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)
        self.dropout = nn.Dropout(dropout)
        self.scale = hidden ** -0.5

    def forward(self, query: torch.Tensor, context: torch.Tensor, context_mask: torch.Tensor) -> torch.Tensor:
        # query [B, W], context [B, N, W], context_mask [B, N]
        logits = torch.einsum("bh,bnh->bn", self.theta(query), self.phi(context)) * self.scale
        # the most negative finite value, not -inf: a row with no context gives no NaN, then weight 0
        logits = logits.masked_fill(~context_mask, torch.finfo(logits.dtype).min)
        attention = torch.softmax(logits, dim=-1) * context_mask.to(logits.dtype)
        update = torch.einsum("bn,bnh->bh", attention, self.g(context))
        # without context the update would be out's bias alone: leave such a query unchanged
        has_context = context_mask.any(dim=1, keepdim=True).to(query.dtype)
        return query + self.dropout(self.out(torch.relu(self.norm(update)))) * has_context


class LFBNonLocal(nn.Module):
    """LFB NL: G([f'_m, NL(L(f'_m + P_m), L([f'_H + P_H, f'_F + P_F]))]), two stacked non-local blocks.

    The context (history and future) is the window's real cells other than the query, kept in place
    with the query masked out, so no re-packing is needed; each block updates the query only.
    """

    reads_cells = True

    def __init__(self, dim: int, width: int = 512, num_blocks: int = 2, dropout: float = 0.2,
                 max_offset: int = 256, identity_init: bool = True):
        super().__init__()
        self.position = OffsetEncoding(dim, max_offset)
        self.project = nn.Linear(dim, width)  # L
        self.blocks = nn.ModuleList(NonLocalBlock(width, width, dropout) for _ in range(num_blocks))
        self.g = _g(dim + width, dim, 0, identity_init)

    def non_local(self, batch: Batch) -> torch.Tensor:
        cells, mask = real_cells(batch)
        query_pos = batch["query_pos"]
        x = self.project(cells + self.position(query_pos, cells.shape[1]))
        position = torch.arange(cells.shape[1], device=cells.device)[None, :]
        context_mask = mask & (position != query_pos[:, None])
        query = query_cell(x, query_pos)
        for block in self.blocks:
            query = block(query, x, context_mask)
        return query

    def aggregate(self, batch: Batch) -> torch.Tensor:
        cells, _ = real_cells(batch)
        return torch.cat([query_cell(cells, batch["query_pos"]), self.non_local(batch)], dim=-1)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.g(self.aggregate(batch))


class LFBTransformer(nn.Module):
    """LFB TF: G(Transformer([f'_H, f'_m, f'_F] + P) at the query), two encoder layers of width D.

    The window's cells are already in temporal order with the query at query_pos, so [H, m, F] is the
    cell sequence itself; padding is a key padding mask. `dim_feedforward` 2048 and dropout 0.1 are
    PyTorch's defaults (the paper gives only the width); `nhead` must divide D.

    `lean` (the default) computes the same encoder as `nn.TransformerEncoder` read at the query, with its
    dropout masks, in a fraction of the memory and time (models/lean_transformer.py): the last layer at the
    query rows only, the others in checkpointed chunks of `chunk` samples. `lean: false` runs
    `nn.TransformerEncoder` itself; the two share their parameters (a checkpoint of one loads in the other).
    """

    reads_cells = True

    def __init__(self, dim: int, nhead: int = 8, num_layers: int = 2, dim_feedforward: int = 2048,
                 dropout: float = 0.1, norm_first: bool = False, max_offset: int = 256,
                 identity_init: bool = True, lean: bool = True, chunk: int = 32):
        super().__init__()
        if dim % nhead:
            raise ConfigError(f"nhead={nhead} must divide the feature dim {dim}")
        if chunk < 1:
            raise ConfigError(f"chunk must be a positive number of samples, got {chunk}")
        self.position = OffsetEncoding(dim, max_offset)
        layer = nn.TransformerEncoderLayer(dim, nhead, dim_feedforward, dropout, batch_first=True,
                                           norm_first=norm_first)
        # nested tensors only speed up inference and drop padded outputs; keep one code path
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.g = _g(dim, dim, 0, identity_init)
        self.lean, self.chunk = lean, int(chunk)

    def aggregate(self, batch: Batch) -> torch.Tensor:
        cells, mask = real_cells(batch)
        query_pos = batch["query_pos"]
        x = cells + self.position(query_pos, cells.shape[1])
        if self.lean:
            return encode_at(self.encoder, x, ~mask, query_pos, self.chunk)
        return query_cell(self.encoder(x, src_key_padding_mask=~mask), query_pos)

    def forward(self, batch: Batch) -> torch.Tensor:
        return self.g(self.aggregate(batch))
