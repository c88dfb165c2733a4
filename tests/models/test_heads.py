"""Heads: shapes, padding never matters, the paper's structure at initialisation."""

from __future__ import annotations

import pytest
import torch

from models.heads import LFBAvg, LFBCat, LFBNonLocal, LFBTransformer, LinearHead, ZeroShot, head_reads_cells, query_cell

D = 24


def make_batch(lengths, query_pos, m=None, d=D, seed=0, pad_value=0.0):
    """A batch in the DataModule's layout: cells left-aligned, padding filled with `pad_value`."""
    g = torch.Generator().manual_seed(seed)
    b = len(lengths)
    m = m or max(lengths)
    cells = torch.randn(b, m, d, generator=g)
    mask = torch.arange(m)[None, :] < torch.tensor(lengths)[:, None]
    cells[~mask] = pad_value
    return {
        "video_index": torch.zeros(b, dtype=torch.long), "sample_id": torch.arange(b),
        "label": torch.ones(b, dtype=torch.long),
        "clip": torch.randn(b, d, generator=g), "cells": cells, "cell_mask": mask,
        "query_pos": torch.tensor(query_pos), "steps": torch.randn(1, 4, d, generator=g),
        "step_mask": torch.ones(1, 4, dtype=torch.bool), "step_row": torch.zeros(b, dtype=torch.long),
    }


HEADS = {
    "zero_shot": lambda: ZeroShot(D),
    "linear": lambda: LinearHead(D),
    "avg": lambda: LFBAvg(D),
    "cat": lambda: LFBCat(D),
    "nl": lambda: LFBNonLocal(D, width=32),
    "tf": lambda: LFBTransformer(D, nhead=4, dim_feedforward=32),
}


def randomised(head):
    """Random weights everywhere, so a zero- or identity-initialised part cannot hide a masking bug."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in head.parameters():
            p.normal_(0, 0.3)
    return head.eval()


@pytest.mark.parametrize("name", HEADS)
def test_output_shape(name):
    batch = make_batch([5, 1, 3, 5], [2, 0, 1, 4])
    out = HEADS[name]()(batch)
    assert out.shape == (4, D) and torch.isfinite(out).all()


@pytest.mark.parametrize("name", HEADS)
def test_padding_never_changes_the_output(name):
    head = randomised(HEADS[name]())
    lengths, query = [5, 1, 3, 2], [2, 0, 2, 0]
    full = make_batch(lengths, query, m=7)
    with torch.no_grad():
        base = head(full)
        # whatever the loader leaves in padded cells
        perturbed = head(make_batch(lengths, query, m=7, pad_value=1e3))
        # the same samples one at a time, each cut to its own length: no padding at all
        alone = []
        for i, n in enumerate(lengths):
            one = {k: v[i:i + 1] for k, v in full.items()}
            one["cells"], one["cell_mask"] = one["cells"][:, :n], one["cell_mask"][:, :n]
            alone.append(head(one))
        alone = torch.cat(alone)
    torch.testing.assert_close(perturbed, base, rtol=0, atol=0)
    torch.testing.assert_close(alone, base, rtol=1e-5, atol=1e-5)


def test_identity_init_starts_at_the_zero_shot_map():
    batch = make_batch([5, 3], [2, 1])
    torch.testing.assert_close(LinearHead(D)(batch), batch["clip"])
    torch.testing.assert_close(LFBCat(D)(batch), query_cell(batch["cells"], batch["query_pos"]))
    mean = batch["cells"].sum(1) / batch["cell_mask"].sum(1, keepdim=True)
    torch.testing.assert_close(LFBAvg(D)(batch), mean)


def test_cat_means_history_and_future_with_zeros_at_the_edges():
    batch = make_batch([4, 3], [0, 2], m=4)
    f = LFBCat(D).aggregate(batch)
    c = batch["cells"]
    torch.testing.assert_close(f[0, :D], torch.zeros(D))  # no history
    torch.testing.assert_close(f[0, D:2 * D], c[0, 0])
    torch.testing.assert_close(f[0, 2 * D:], c[0, 1:4].mean(0))
    torch.testing.assert_close(f[1, :D], c[1, :2].mean(0))
    torch.testing.assert_close(f[1, 2 * D:], torch.zeros(D))  # no future (cell 3 is padding)


def test_cat_identity_on_all_blocks_starts_at_the_sum_of_the_blocks():
    batch = make_batch([5, 3, 1], [2, 0, 0])
    head = LFBCat(D, identity_on="all")
    f = head.aggregate(batch)
    torch.testing.assert_close(head(batch), f[:, :D] + f[:, D:2 * D] + f[:, 2 * D:])
    with pytest.raises(ValueError, match="identity_on"):
        LFBCat(D, identity_on="history")


def test_cat_normalize_blocks_gives_unit_blocks_and_keeps_empty_ones_zero():
    batch = make_batch([4, 3], [0, 2], m=4)
    f = LFBCat(D, normalize_blocks=True).aggregate(batch)
    norms = f.reshape(2, 3, D).norm(dim=-1)
    torch.testing.assert_close(norms, torch.tensor([[0.0, 1.0, 1.0], [1.0, 1.0, 0.0]]))
    raw = LFBCat(D).aggregate(batch)
    torch.testing.assert_close(f[1, :D], raw[1, :D] / raw[1, :D].norm())


def test_non_local_blocks_start_as_the_identity_on_the_query_path():
    head = LFBNonLocal(D, width=32).train()  # dropout on: the zero-initialised output makes it moot
    batch = make_batch([5, 3, 1], [2, 0, 0])
    q = query_cell(batch["cells"], batch["query_pos"])
    p = query_cell(head.position(batch["query_pos"], 5), batch["query_pos"])
    expected = head.project(q + p)  # L(f'_m + P_m)
    torch.testing.assert_close(head.non_local(batch), expected)
    f = head.aggregate(batch)
    assert f.shape == (3, D + 32)
    torch.testing.assert_close(f[:, :D], q)
    torch.testing.assert_close(head(batch), q)  # and G = [I, 0]


def test_non_local_attends_only_to_history_and_future():
    head = randomised(LFBNonLocal(D, width=32))
    batch = make_batch([1, 4], [0, 1])
    with torch.no_grad():
        out = head.non_local(batch)
        # a lone query has no context: the blocks leave it alone (no NaN from an empty softmax)
        lone = head.project(batch["cells"][0, 0] + head.position(batch["query_pos"][:1], 1)[0, 0])
        torch.testing.assert_close(out[0], lone)
        assert torch.isfinite(out).all()

        # sample 1 (4 cells, the query is cell 1): the same blocks on a context packed by hand
        x = head.project(batch["cells"][1] + head.position(batch["query_pos"][1:], 4)[0])

        def attend(rows):
            query, context = x[1:2], x[rows][None]
            for block in head.blocks:
                query = block(query, context, torch.ones(1, len(rows), dtype=torch.bool))
            return query[0]

        torch.testing.assert_close(out[1], attend([0, 2, 3]))  # history and future only
        assert not torch.allclose(out[1], attend([0, 1, 2, 3]), atol=1e-4)  # its own key would change it


def test_transformer_uses_the_key_padding_mask():
    head = randomised(LFBTransformer(D, nhead=4, dim_feedforward=32))
    batch = make_batch([2], [1], m=6)
    with torch.no_grad():
        masked = head(batch)
        unmasked = head(batch | {"cell_mask": torch.ones(1, 6, dtype=torch.bool)})
    # zero cells as keys would change the attention: the mask is what keeps them out
    assert not torch.allclose(masked, unmasked)


def test_transformer_needs_a_head_count_that_divides_the_width():
    with pytest.raises(ValueError, match="must divide"):
        LFBTransformer(D, nhead=5)


def test_zero_shot_has_no_parameters():
    assert list(ZeroShot(D).parameters()) == []


@pytest.mark.parametrize("name", HEADS)
def test_reads_cells_says_whether_the_head_reads_the_window_cells(name):
    # the DataModule leaves the cells out for heads that say they do not read them: the declaration must hold
    head = HEADS[name]()
    batch = make_batch([3, 1], [1, 0])
    without = {k: v for k, v in batch.items() if k not in ("cells", "cell_mask", "query_pos")}
    assert head_reads_cells(head) == head_reads_cells(type(head)) == (name not in ("zero_shot", "linear"))
    if head_reads_cells(head):
        with pytest.raises(KeyError):
            head(without)
    else:
        torch.testing.assert_close(head(without), head(batch))


def test_a_head_that_does_not_say_is_assumed_to_read_cells():
    assert head_reads_cells(torch.nn.Identity())
