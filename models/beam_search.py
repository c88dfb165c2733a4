"""Beam search over an autoregressive decoder (the joint model's captions; beam size 1 is greedy)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch


@torch.no_grad()
def beam_search(decoder: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor],
                memory: torch.Tensor, memory_mask: torch.Tensor | None, beam_size: int, bos_id: int,
                eos_id: int, pad_id: int, max_len: int) -> list[list[int]]:
    """Token ids per memory row (no [CLS], cut before [SEP]), best by summed log-probability.

    A hypothesis that emits [SEP] is finished and carried unchanged; decoding stops when every row's best
    hypothesis is finished (no live one can overtake it: log-probabilities only lower a score) or after
    `max_len` tokens. beam_size 1 is greedy decoding."""
    n, k = memory.shape[0], beam_size
    memory = memory.repeat_interleave(k, dim=0)
    memory_mask = None if memory_mask is None else memory_mask.repeat_interleave(k, dim=0)
    tokens = torch.full((n * k, 1), bos_id, dtype=torch.long, device=memory.device)
    scores = torch.zeros(n, k, device=memory.device)
    scores[:, 1:] = -math.inf  # all beams start identical: expand the first only
    finished = torch.zeros(n, k, dtype=torch.bool, device=memory.device)
    rows = torch.arange(n, device=memory.device)[:, None] * k
    for _ in range(max_len):
        logp = decoder(tokens, memory, memory_mask)[:, -1].float().log_softmax(-1)
        vocab = logp.shape[-1]
        logp = logp.view(n, k, vocab)
        carried = torch.full_like(logp, -math.inf)
        carried[..., pad_id] = 0.0
        logp = torch.where(finished[..., None], carried, logp)
        scores, flat = (scores[..., None] + logp).view(n, k * vocab).topk(k, dim=1)
        origin, token = flat // vocab, flat % vocab
        tokens = torch.cat([tokens[(rows + origin).view(-1)], token.view(-1, 1)], dim=1)
        finished = finished.gather(1, origin) | (token == eos_id)
        if bool(finished[:, 0].all()):
            break
    out = []
    for ids in tokens.view(n, k, -1)[:, 0, 1:].tolist():
        for stop in (eos_id, pad_id):
            if stop in ids:
                ids = ids[:ids.index(stop)]
        out.append(ids)
    return out
