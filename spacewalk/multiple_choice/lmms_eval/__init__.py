"""The harness's multiple-choice tasks as lmms-eval tasks (docs/lmms_eval.md): `export` writes task folders for
lmms-eval's --include_path whose prompts, reply parsing and scoring are the tasks' own (task_folder.py, hooks.py);
`import` turns lmms-eval's sample logs into run directories that the results tools read (sample_logs.py);
`environment` builds a separate Python environment with lmms-eval (environment.py). lmms-eval itself is never
imported here: it imports us, through the task folders' utils.py."""
