"""HiREST (BENCHMARKS §2): `dataset` (the release layout read into typed, validated objects), `features`
(1 fps features, released or extracted), `scoring` (the official scoring of video retrieval, moment
retrieval, moment segmentation and step captioning), `captioning_scores` (BLEU, METEOR, CIDEr, ... as the
official scoring computes them), `joint_model_io` (what the joint model reads and writes), `synthetic`
(a miniature in the official layout), `evaluation` (the task-specific baselines scored on a split)."""
