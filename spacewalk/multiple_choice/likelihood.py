"""Multiple choice scored by likelihood: the log-probability a language model gives each option as the
continuation of the item's prompt, at the cost of one prompt.

The prompt (its text and visuals, as the model's processor encodes them) is run through the model once, keeping its
key/value cache and the next-token distribution at its end; the options' continuations (each option's text and its
label, the letter or number the prompt names it by) then run in batches of rows of similar lengths on copies of that
cache, right padded. A continuation's tokens are scored in context: the first by the prompt's last distribution,
each next one by the distribution after the tokens before it. The continuation is tokenized on its own and appended
to the prompt's tokens (no merge across the boundary: the cache is of the prompt's tokens as they stand), which is
what the direct reference in the tests does too.

Per option and per continuation, `sum` (the log-probability of the whole continuation) and `mean` (per token:
comparable between options of different lengths) are kept; which of the four decides is the backend's
`choose_by`. The best option is the answer, so a reply is never unparsable.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from spacewalk.core.errors import ConfigError

CONTINUATIONS = ("text", "label")
# a continuation joins a batch when it has at least this share of the batch's longest one's tokens
SIMILAR_LENGTH = 0.8
CHOOSE_BY = tuple(f"{kind}_{how}" for kind in CONTINUATIONS for how in ("sum", "mean"))


def check_choose_by(value: str) -> str:
    if value not in CHOOSE_BY:
        raise ConfigError(f"choose_by={value!r}: choose from {list(CHOOSE_BY)} (the option's text or its label, "
                          "log-probability summed over its tokens or their mean)")
    return value


@dataclass(frozen=True)
class Scored:
    """One continuation's per-token log-probabilities."""

    logprobs: tuple[float, ...]

    @property
    def sum(self) -> float:
        return float(sum(self.logprobs))

    @property
    def mean(self) -> float:
        return self.sum / len(self.logprobs)


def _on_device(inputs: Mapping[str, Any], model) -> dict[str, Any]:
    device, dtype = model.device, model.dtype
    return {k: (v.to(device, dtype) if v.is_floating_point() else v.to(device)) if torch.is_tensor(v) else v
            for k, v in inputs.items()}


@torch.inference_mode()
def continuation_logprobs(model, prompt_inputs: Mapping[str, Any], continuations: Sequence[Sequence[int]],
                          batch_size: int = 16) -> list[Scored]:
    """Each continuation's per-token log-probabilities after the prompt: `prompt_inputs` is one row of model
    inputs (input_ids, attention_mask and whatever visual tensors the processor made), encoded once; the
    continuations (token ids, at least one each) are scored at most `batch_size` at a time on copies of its cache."""
    if any(len(c) == 0 for c in continuations):
        raise ValueError("a continuation needs at least one token")
    inputs = _on_device(prompt_inputs, model)
    if inputs["input_ids"].shape[0] != 1:
        raise ValueError("continuation_logprobs scores the continuations of one prompt")
    # transformers 5 names the cache `cache`, earlier releases `past_key_values`
    cache_key = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    out = model(**inputs, use_cache=True, logits_to_keep=1)
    first = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
    cache = out[cache_key]
    scored: list[Scored] = [None] * len(continuations)  # type: ignore[list-item]
    # one-token continuations need nothing past the prompt's own distribution; the others go longest first, in
    # batches of rows of similar lengths (options of 20 to 100 tokens are common)
    longer = sorted((i for i, c in enumerate(continuations) if len(c) > 1), key=lambda i: -len(continuations[i]))
    for i, c in enumerate(continuations):
        if len(c) == 1:
            scored[i] = Scored((float(first[c[0]]),))
    for rows in _similar_lengths(longer, continuations, batch_size):
        width = len(continuations[rows[0]])
        ids = torch.zeros((len(rows), width), dtype=torch.long, device=model.device)
        for r, i in enumerate(rows):
            ids[r, :len(continuations[i])] = torch.tensor(continuations[i])
        rows_cache = copy.deepcopy(cache)
        rows_cache.batch_repeat_interleave(len(rows))
        # no attention mask: the prompt is one unpadded row and each continuation is right padded, so causal
        # attention alone keeps every scored token from seeing padding (and the model's positions continue the
        # prompt's, which a full-length mask would make some models recompute from the start)
        logits = model(input_ids=ids, use_cache=True, **{cache_key: rows_cache}).logits
        following = torch.log_softmax(logits.float(), dim=-1)
        for r, i in enumerate(rows):
            c = continuations[i]
            rest = following[r, torch.arange(len(c) - 1), torch.tensor(c[1:])]
            scored[i] = Scored((float(first[c[0]]), *(float(x) for x in rest)))
    return scored


def _similar_lengths(order: list[int], continuations: Sequence[Sequence[int]], batch_size: int) -> list[list[int]]:
    """`order` (longest first) cut into batches of at most `batch_size` rows, each row at least SIMILAR_LENGTH of its
    batch's longest: every padded token costs a full token's compute (attention over the whole prompt included), and
    with a fixed number of rows, a step question's 32 options of 20 to 105 tokens are about a third padding."""
    batches: list[list[int]] = []
    for i in order:
        if batches and len(batches[-1]) < batch_size and \
                len(continuations[i]) >= SIMILAR_LENGTH * len(continuations[batches[-1][0]]):
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


def option_scores(text: Sequence[Scored], label: Sequence[Scored]) -> list[dict[str, float]]:
    """The record's per-option numbers: text_sum, text_mean, text_tokens, label_sum, label_mean, label_tokens."""
    return [{"text_sum": t.sum, "text_mean": t.mean, "text_tokens": len(t.logprobs),
             "label_sum": lb.sum, "label_mean": lb.mean, "label_tokens": len(lb.logprobs)}
            for t, lb in zip(text, label)]
