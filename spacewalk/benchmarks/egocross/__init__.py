"""EgoCross (docs/egoschema_egocross.md, EgoCross): `dataset` (the testbed JSON, the separately released answers merged
by id, frame folders), `closeqa` and `openqa` (the authors' prompts and their reply parsing / LLM-judge scoring),
`scoring` (accuracy overall, per domain, per category, per question type), `task` (CloseQA as a multiple-choice task of
the harness), `synthetic` (a miniature in the official layout)."""
