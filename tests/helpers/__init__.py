"""What several test areas share, imported as `helpers.<module>` (tests/ is on sys.path through its conftest, and
`run_command` puts it on a command's PYTHONPATH so a config can name `helpers.multiple_choice_fakes...` by
`_target_`); tests/conftest.py holds the fixtures only.

- commands: the repository's paths, composing configs, `run_command` (the one way a test runs a command)
- shared_data: the real annotations under SPACEWALK_SHARED_DATA, and `unavailable` (skip, or fail under CI)
- synthetic_presets: the named option sets of the synthetic data sets, defined once
- tiny_encoders: randomly initialised open_clip, X-CLIP and VideoMAE video encoders
- tiny_root: a hand-made three-recording Spacewalk-18 root
- fakes, hirest_fakes, lossless_videos, window_decoding: stand-in encoders and features, small HiREST roots,
  lossless videos and whole-window decoding
- openai_stub, multiple_choice_fakes, wandb_offline: a chat-completions server on 127.0.0.1, backends for
  end-to-end runs, and a reader of offline W&B runs
- run_dir_fakes: run directories as train.py and evaluate.py leave them
"""
