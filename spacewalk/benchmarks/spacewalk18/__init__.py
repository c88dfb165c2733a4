"""Spacewalk-18 (BENCHMARKS §1): `dataset` (the release layout read into typed, validated objects),
`sampler` (the official step-recognition sampler), `windows` (context windows), `scoring` (official Accuracy,
mAP, IoU, QA and retrieval accuracy), `step_recognition_metric` (the same as a torchmetrics Metric, for DDP),
`predictions` (the official prediction files), `synthetic` (a miniature in the official layout),
`evaluation` (non-learned models scored on a split)."""
