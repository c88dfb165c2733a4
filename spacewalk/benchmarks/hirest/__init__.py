"""HiREST (docs/hirest.md): `dataset` (the release layout read into typed, validated objects), `open` (what
`data=hirest` opens: the release at root, else the synthetic one written on first use), `features` (1 fps
features, released or extracted), `subtitles` (Whisper's SRT files: the one reader and writer),
`predictions` (the official prediction files, collected and written), `scoring` (the official scoring of
video retrieval, moment retrieval, moment segmentation and step captioning), `captioning_metrics` (BLEU,
METEOR, CIDEr, ... as the official scoring computes them), `joint_model_io` (what the joint model reads
and writes), `synthetic/` (a miniature in the official layout, one module per part of the generator),
`evaluation` (the task-specific baselines scored on a split)."""
