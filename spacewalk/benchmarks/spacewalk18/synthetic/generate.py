"""The synthetic dataset written in the official layout, checked with the one reader before it is installed
(`generate`), and written on first use (`ensure_dataset`, what every data config's opener calls)."""

from __future__ import annotations

import dataclasses
import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import (
    ANNOTATION_FILE,
    QUESTION_FILE,
    RETRIEVAL_DIR,
    SPLIT_FILE,
    SPLITS,
    STEP_RECOGNITION_DIR,
    STEPS_FILE,
    TRANSCRIPT_DIR,
    TRANSCRIPT_ENCODING,
    VIDEO_DIR,
    Spacewalk18,
    samples_to_json,
)
from spacewalk.benchmarks.spacewalk18.data.step_sampler import step_samples
from spacewalk.benchmarks.spacewalk18.synthetic.narration import steps_json, transcript_csv, transcript_sentences
from spacewalk.benchmarks.spacewalk18.synthetic.options import Options
from spacewalk.benchmarks.spacewalk18.synthetic.plan import Plan, plan_pieces, segments_of
from spacewalk.benchmarks.spacewalk18.synthetic.render import shots_of, write_video
from spacewalk.benchmarks.spacewalk18.synthetic.task_files import RETRIEVAL_SEED, questions, retrieval_samples
from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_dir, load_json, write_json, write_text
from spacewalk.core.settings import from_mapping

# Written beside the official files so ensure_dataset can tell which generation a root holds.
RECORD_FILE = "synthetic.json"
GENERATOR_VERSION = 1


def _video_ids(seed: int, n: int) -> list[str]:
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0xDA7E]))
    first, days = date(2010, 1, 1), (date(2024, 12, 31) - date(2010, 1, 1)).days
    return [(first + timedelta(days=int(d))).strftime("%m%d%Y") for d in rng.choice(days, size=n, replace=False)]


def _plan(video_id: str, rng: np.random.Generator, text_rng: np.random.Generator, opts: Options) -> Plan:
    concepts, pieces, duration = plan_pieces(rng, opts)
    sentences = transcript_sentences(text_rng, concepts, pieces, duration)
    return Plan(video_id, concepts, pieces, duration, segments_of(pieces), sentences,
                steps_json(concepts, pieces, sentences))


def _record(seed: int, opts: Options) -> dict:
    # "spacewalk.synthetic": the record name since version 1 (existing folders keep it), not a module path
    return {"generator": "spacewalk.synthetic", "version": GENERATOR_VERSION, "seed": seed,
            "options": json.loads(json.dumps(dataclasses.asdict(opts)))}


def generate(root: str | Path, seed: int = 0, *, overwrite: bool = False, progress: bool = True,
             **options: Any) -> Path:
    """Write a synthetic dataset in the official layout to `root`; same seed and options, same dataset."""
    from tqdm import tqdm

    opts = from_mapping(Options, options, "data.synthetic")
    root = Path(root).absolute()
    if root.exists() and not overwrite:
        raise FileExistsError(f"{root} exists; pass overwrite=True (--overwrite) to replace it")
    # Built beside root and renamed at the end: an interrupted generation never leaves a half dataset.
    with atomic_dir(root, replace=overwrite) as work:
        sizes = {"train": opts.n_train, "val": opts.n_val, "test": opts.n_test}
        ids = _video_ids(seed, sum(sizes.values()))
        splits, i = {}, 0
        for split in SPLITS:
            splits[split] = sorted(ids[i:i + sizes[split]])
            i += sizes[split]
        (work / TRANSCRIPT_DIR).mkdir(parents=True)
        (work / VIDEO_DIR).mkdir(parents=True)
        plans: dict[str, Plan] = {}
        qa_rngs: dict[str, np.random.Generator] = {}
        for index, video_id in enumerate(tqdm(ids, desc="synthetic Spacewalk-18", unit="recording",
                                              disable=not progress)):
            # separate streams, so e.g. a different video option leaves annotations and transcripts as they are
            plan_rng, text_rng, video_rng, qa_rng = (
                np.random.default_rng(s) for s in np.random.SeedSequence([seed, index]).spawn(4))
            plan = plans[video_id] = _plan(video_id, plan_rng, text_rng, opts)
            qa_rngs[video_id] = qa_rng
            write_text(work / TRANSCRIPT_DIR / f"{video_id}.csv", transcript_csv(plan.sentences),
                       encoding=TRANSCRIPT_ENCODING)
            write_video(work / VIDEO_DIR / f"{video_id}.mp4", shots_of(video_rng, plan.pieces), plan.duration,
                         opts, video_rng)

        write_json(work / ANNOTATION_FILE, {v: [
            {"video_start": s.start, "video_end": s.end, "frame_start": s.frame_start, "frame_end": s.frame_end,
             "label": s.label} for s in plans[v].segments] for v in ids}, indent=4)
        write_json(work / STEPS_FILE, {v: plans[v].steps for v in ids}, indent=4)
        write_json(work / SPLIT_FILE, splits, indent=4)
        for split in SPLITS:
            write_json(work / STEP_RECOGNITION_DIR / f"{split}.json", samples_to_json({
                v: step_samples(plans[v].segments, len(plans[v].steps), opts.samples_per_video)
                for v in splits[split]}), indent=4)
            write_json(work / RETRIEVAL_DIR / f"{split}.json", {
                v: retrieval_samples(plans[v].segments, opts.retrieval_samples_per_video,
                                     np.random.default_rng([RETRIEVAL_SEED, seed, ids.index(v)]))
                for v in splits[split]}, indent=4)
        qa = [q for v in splits["test"]
              for q in questions(plans[v], opts.questions_per_video, opts.qa_window_seconds, qa_rngs[v])]
        for i, q in enumerate(qa):
            q["question_id"] = i
        keys = ("video_id", "question_id", "question", "options", "answer", "video_start", "video_end", "type")
        write_json(work / QUESTION_FILE, [{k: q[k] for k in keys} for q in qa], indent=4)
        write_json(work / RECORD_FILE, _record(seed, opts), indent=4)

        _check(work)
    return root


def _check(root: Path) -> None:
    # Validate with the one reader before installing: a generator bug never becomes a dataset.
    data = Spacewalk18(root)
    for split in SPLITS:
        data.step_samples(split)
        data.retrieval_samples(split)
        for rec in data.split(split):
            rec.transcript  # noqa: B018  (parses and validates the CSV)
    data.questions()


def ensure_dataset(root: str | Path, seed: int = 0, **options: Any) -> Path:
    """The synthetic dataset at `root`, written on first use; an existing root is used as it is."""
    root = Path(root).absolute()
    if not root.exists():
        try:
            return generate(root, seed, **options)
        except FileExistsError:
            if not root.exists():
                raise
            # another process (e.g. a second DDP rank) finished first: the same seed gives the same data
    record = root / RECORD_FILE
    if record.is_file():
        content = {k: v for k, v in options.items() if k != "progress"}  # progress does not change the data
        wanted = _record(seed, from_mapping(Options, content, "data.synthetic"))
        if load_json(record) != wanted:
            raise DataError(f"holds a synthetic dataset made with other settings ({record}); "
                            "delete it, pick another root, or call generate(..., overwrite=True)", file=root)
    return root
