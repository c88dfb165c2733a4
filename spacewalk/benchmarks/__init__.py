"""The benchmarks, one subpackage each (`spacewalk18`, `hirest`, `egoschema`, `egocross`): formats and validation,
samplers and windows, official scoring, synthetic generators. Each declares itself in its `benchmark.py`, and
`registry` finds them (the score and download commands read it: no list of benchmarks anywhere else);
`release_or_synthetic` is the rule every data config follows (the release at a root, else the synthetic set)."""
