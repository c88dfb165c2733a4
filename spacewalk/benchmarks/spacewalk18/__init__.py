"""Spacewalk-18 (docs/spacewalk18.md): step recognition in spacewalk recordings, video question answering and
intra-video retrieval, with the authors' data rules and scoring. One subpackage per idea:

- `data`: the release layout read into typed, validated objects, context windows, the official
  step-recognition sampler and the intra-video retrieval sampler (`python -m ...spacewalk18.data.samples`);
- `features`: the feature bank (encoders run once per recording; build, freshness, load);
- `scoring`: the official metrics, the same as a torchmetrics Metric for DDP, the official prediction files;
- `decoding`: the plan prior and the decoder that follows a recording's plan, with its emissions;
- `questions`: the benchmark as multiple-choice questions (video QA, step recognition as a question, Table 4's
  summaries, QA questions for any recordings, mc_plan's reading of a decoded timeline);
- `pictures`: timelines of a run's predictions, the retrieval test's missed samples;
- `synthetic`: a miniature in the official layout, the default dataset.

Beside them: `benchmark` (its registration: release, validation, `score` subcommands), `open` (the release at a
root, else the synthetic set), `evaluation` (non-learned models scored on a split), and the results tools'
`intervals` and `run_scores` (bootstrap units, a finished run re-scored).
"""
