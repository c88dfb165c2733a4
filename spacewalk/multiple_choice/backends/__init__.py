"""Model backends of the multiple-choice harness: each knows a model and nothing of any benchmark (items and
their prompts in, one `Reply` per item out; spacewalk/multiple_choice/task.py). One module per kind:
`baselines` (scripted, random), `contrastive` (option scoring with our encoders, text or video),
`openai_chat` (an OpenAI-compatible chat-completions server), `transformers_vlm` (any
image-text-to-text family of transformers through its processor and chat template, the family's settings as data:
vlm_families.yaml), `caption_enhanced` (a captioner's text handed to a text model), `option_scores` (every option
scored by a reader handed in; a reader that needs a benchmark's knowledge lives with its benchmark: mc_plan's in
spacewalk/benchmarks/spacewalk18/questions/plan_reading.py). Each is a `model=mc_*` config (conf/model/);
docs/multiple_choice.md has a guide to writing a new one."""
