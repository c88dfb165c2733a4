"""EgoSchema (docs/egoschema_egocross.md, EgoSchema): `dataset` (questions.json, subset_answers.json, uid_to_ego4d.json
and the videos read into validated questions), `prompts` (lmms-eval's video-LLM prompt and its reply parser, the paper's
contrastive "Question: ...? Is it ..." texts), `scoring` (local accuracy on the 500-question subset, the server's JSON
and Kaggle's CSV submission files), `task` (the multiple-choice task the harness runs), `synthetic` (a miniature in the
official layout)."""
