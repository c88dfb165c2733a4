"""The synthetic Spacewalk-18: a small dataset in the official layout, generated from a seed.

It is the project's default dataset, so every command runs on a fresh machine before any download.
It is a miniature of the real release (docs/spacewalk18.md): each recording opens with a
not-annotated margin holding an animated preview of its planned steps, then performs the steps (with
Irrelevant shots, repeats, interruptions and not-annotated gaps), then closes with another margin.
Steps come from a fixed vocabulary of concepts; each concept has a visual signature (colour x moving
pattern, two camera views) and a narration (actor + action + object + location, spoken the way ASR
writes it). Both modalities are informative and both are noisy, in different ways: generic shots
and camera views hide the video cue, chatter and mentions of other steps blur the text cue.

    python -m spacewalk.benchmarks.spacewalk18.synthetic --root data/synthetic_spacewalk18 [--seed N] [--overwrite]

The parts, one idea each (as HiREST's generator): `options` (Options), `vocabulary` (the concepts, their words
and looks), `plan` (one recording's pieces of time and its segments), `narration` (its transcript and the
steps' texts), `render` (pictures and the mp4 writer), `task_files` (retrieval samples and QA questions),
`generate` (the files in the official layout, checked with the one reader; `ensure_dataset` writes them on first
use).
"""
