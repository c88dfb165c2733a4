"""spacewalk: the domain library, usable without Lightning and Hydra (docs/architecture.md).

- `core`: errors, validated fields, files written whole, durations, modalities
- `media`: video decoding, decoding ahead of an encoder, the k-second cell grid
- `algorithms`: plan-decoding chains (hmm), TW-FINCH clustering
- `encoders`: frozen text and video encoders and the trainable towers copied from them
- `benchmarks`: Spacewalk-18, HiREST, EgoSchema, EgoCross, and the registry that finds them
- `multiple_choice`: the harness for video LLMs, API models and contrastive scoring
- `results`: the run directory's layout, the run finder, re-scoring, seed groups, the statistics (tests, intervals,
  power), compare and the report
- `training`: the run sequence behind train.py and evaluate.py, the one place that knows Lightning and Hydra
- commands: `python -m spacewalk.score`, `.download`, `.report`, `.compare`, `.power`
"""

__version__ = "0.1.0"
