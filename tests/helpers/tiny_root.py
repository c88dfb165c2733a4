"""A hand-made three-recording Spacewalk-18 root in the official layout, small enough to reason about (the
`tiny_root` fixture writes one per test)."""

from __future__ import annotations

from pathlib import Path


def write_tiny_root(root: Path, n_samples: int = 30) -> Path:
    """A hand-made three-recording dataset in the official layout, small enough to reason about."""
    import csv

    from spacewalk.benchmarks.spacewalk18.data.dataset import IRRELEVANT_DESCRIPTION, Segment, frame_of, samples_to_json
    from spacewalk.benchmarks.spacewalk18.data.step_sampler import step_samples
    from spacewalk.core.io import write_json

    bounds = [(0, 10, -1), (10, 40, 1), (40, 50, 0), (50, 80, 2), (80, 90, -1), (90, 100, 1), (100, 120, -1)]
    segments = [Segment(float(s), float(e), frame_of(s), frame_of(e), label) for s, e, label in bounds]
    steps = [{"index": 0, "caption": "Irrelevant", "transcript": IRRELEVANT_DESCRIPTION},
             {"index": 1, "caption": "open the hatch", "transcript": "first we open the hatch",
              "animation_start": 2.0, "animation_end": 5.0},
             {"index": 2, "caption": "install the battery", "transcript": "",
              "animation_start": 5.0, "animation_end": 8.0}]
    ids = {"train": ["01012020"], "val": ["02022020"], "test": ["03032020"]}
    seg_json = [{"video_start": s.start, "video_end": s.end, "frame_start": s.frame_start,
                 "frame_end": s.frame_end, "label": s.label} for s in segments]
    all_ids = [v for vs in ids.values() for v in vs]
    write_json(root / "data/annotation.json", {v: seg_json for v in all_ids})
    write_json(root / "data/steps.json", {v: steps for v in all_ids})
    write_json(root / "tasks/split.json", ids)
    for v in all_ids:
        (root / "data/transcripts").mkdir(parents=True, exist_ok=True)
        with open(root / f"data/transcripts/{v}.csv", "w", encoding="cp1252", newline="") as f:
            w = csv.writer(f)
            w.writerow(["Sentence", "Global start", "Global end"])
            w.writerows([["first we open the hatch", 2.0, 5.0], ["hatch is open, caf\u00e9 time", 12.0, 20.0],
                         ["now the battery", 50.0, 60.0], ["wrapping up", 95.0, 110.0]])
    for split, vs in ids.items():
        write_json(root / f"tasks/step_recognition/{split}.json",
                   samples_to_json({v: step_samples(segments, len(steps), n_samples) for v in vs}))
    return root
