"""Spacewalk-18 recordings written by hand with step captions, annotated spans and a transcript: what the tests of
place knowledge (where steps happen, read off what is said) read."""

from __future__ import annotations

import csv
from pathlib import Path

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording, Segment, Step, frame_of


def spoken_recording(folder: Path, name: str, captions: list[str], spans: list[tuple[float, float, int]],
                     said: list[tuple[str, float, float]]) -> Recording:
    """A recording with the given step captions (step 1 onwards), annotated spans (start, end, label) and
    transcript sentences (text, start, end), its transcript written to `folder`."""
    steps = (Step(0, "Irrelevant", "", None, None),
             *(Step(i + 1, c, "", 0.0, 1.0) for i, c in enumerate(captions)))
    segments = tuple(Segment(a, b, frame_of(a), frame_of(b), label) for a, b, label in spans)
    path = folder / f"{name}.csv"
    with open(path, "w", newline="", encoding="cp1252") as f:
        writer = csv.writer(f)
        writer.writerow(["Sentence", "Global start", "Global end"])
        writer.writerows(said)
    return Recording(name, segments, steps, path, folder / f"{name}.mp4")
