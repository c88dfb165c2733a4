"""The whole synthetic HiREST, planned from the options alone: queries per split, their videos, the
distractors (no file is written)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from spacewalk.benchmarks.hirest.dataset import SPLITS
from spacewalk.benchmarks.hirest.synthetic.narration import plan_sentences
from spacewalk.benchmarks.hirest.synthetic.options import HiRESTOptions, as_options
from spacewalk.benchmarks.hirest.synthetic.video_plan import VideoPlan, plan_shots, plan_video
from spacewalk.benchmarks.hirest.synthetic.vocabulary import TASKS, Task, make_task

_ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def _video_names(seed: int, n: int) -> list[str]:
    """n distinct YouTube-like ids (11 characters of [A-Za-z0-9_-]) as "<id>.mp4"."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x1D5]))
    names: dict[str, None] = {}
    while len(names) < n:
        names.setdefault("".join(_ID_ALPHABET[i] for i in rng.integers(0, 64, 11)) + ".mp4")
    return list(names)


@dataclass
class HiRESTPlan:
    splits: dict[str, dict[str, dict[str, VideoPlan]]]  # split -> query -> video -> plan, in file order
    distractors: list[VideoPlan]

    def videos(self) -> list[VideoPlan]:
        return [p for s in SPLITS for q in self.splits[s].values() for p in q.values()] + self.distractors


def _kinds(n: int, rng: np.random.Generator, opts: HiRESTOptions) -> list[str]:
    p = [opts.p_whole, opts.p_clip_without_steps, 1 - opts.p_whole - opts.p_clip_without_steps]
    kinds = [str(k) for k in rng.choice(["whole", "clip", "steps"], size=n, p=p)]
    # every split has videos with steps (its step GT), and shows every kind the options allow where it can
    for k in [k for k, pk in zip(["steps", "whole", "clip"], [p[2], p[0], p[1]]) if pk > 0 or k == "steps"]:
        if k not in kinds:
            spare = [j for j in range(n) if kinds.count(kinds[j]) > 1]
            if spare or k == "steps":
                kinds[spare[-1] if spare else 0] = k
    return kinds


def plan_hirest(options: HiRESTOptions | Mapping[str, Any] | None = None) -> HiRESTPlan:
    """Everything the dataset holds, decided from the options alone (no file is written)."""
    opts = as_options(options)
    seed = opts.seed
    order = np.random.default_rng(np.random.SeedSequence([seed, 0])).permutation(len(TASKS))
    sizes = {"train": opts.n_train, "val": opts.n_val, "test": opts.n_test}
    n_queries = sum(sizes.values())
    # distractors show tasks that no query asks for (and, once those run out, training tasks)
    spare = [int(i) for i in order[n_queries:]] or [int(i) for i in order[:opts.n_train]]
    tasks = {int(i): make_task(int(i), seed) for i in [*order[:n_queries], *spare]}

    count_rng = np.random.default_rng(np.random.SeedSequence([seed, 2]))
    lo, hi = opts.videos_per_query
    counts = {split: [int(count_rng.integers(lo, hi + 1)) for _ in range(sizes[split])] for split in SPLITS}
    kinds = {split: _kinds(sum(counts[split]), count_rng, opts) for split in SPLITS}
    names = iter(_video_names(seed, sum(sum(c) for c in counts.values()) + opts.n_distractors))

    index = 0

    def make(task: Task, kind: str) -> VideoPlan:
        nonlocal index
        # the 4th stream (editing options) leaves the first three, and so version-1 videos, unchanged
        plan_rng, shot_rng, text_rng, edit_rng = (np.random.default_rng(s)
                                                  for s in np.random.SeedSequence([seed, 3, index]).spawn(4))
        index += 1
        plan = plan_video(next(names), task, kind, plan_rng, opts)
        plan_shots(plan, shot_rng, opts, edit_rng)
        plan_sentences(plan, text_rng)
        return plan

    splits: dict[str, dict[str, dict[str, VideoPlan]]] = {}
    start = 0
    for split in SPLITS:
        splits[split] = {}
        k = iter(kinds[split])
        for q, n in zip(order[start:start + sizes[split]], counts[split]):
            task = tasks[int(q)]
            videos = [make(task, next(k)) for _ in range(n)]
            splits[split][task.query] = {p.video: p for p in videos}
        start += sizes[split]
    distractor_kinds = count_rng.choice(["whole", "clip"], size=opts.n_distractors, p=[0.4, 0.6])
    distractors = [make(tasks[spare[i % len(spare)]], str(kind)) for i, kind in enumerate(distractor_kinds)]
    return HiRESTPlan(splits, distractors)
