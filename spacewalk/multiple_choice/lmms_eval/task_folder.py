"""Writing the task folders that lmms-eval's `--include_path` reads: one folder per task, each with

    <task>.yaml            lmms-eval's task config: the documents (docs.jsonl, through `datasets`' json builder),
                           the hooks (`!function utils.<name>`), the reply limit, the metrics and their aggregation,
                           and in `metadata.spacewalk` the task's spec (lmms-eval copies it into its results file,
                           where `import` finds it)
    utils.py               binds the hooks (spacewalk/multiple_choice/lmms_eval/hooks.py) to spacewalk_task.json
    spacewalk_task.json    the spec: the data config that builds the task (specs.py)
    docs.jsonl             one row per item, in the task's order (hooks.document)
    README.md              what the task asks and how its scoring differs from lmms-eval's habits

and a group config per group of tasks exported (a benchmark's `LmmsEvalTask.group`: Spacewalk-18's step questions
at the three windows), which runs them by one name.
Each folder is written whole, then moved into place (an interrupted export leaves no half folder).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_dir, write_text
from spacewalk.multiple_choice.lmms_eval.hooks import document
from spacewalk.multiple_choice.lmms_eval.specs import SETTINGS_FILE, TaskSpec, build_task

DOCS_FILE = "docs.jsonl"
# the version lmms-eval records for the task (its results file's "versions"); raised when what a task asks changes
TASK_VERSION = 1

UTILS = '''"""lmms-eval's hooks for the task in this folder, written by
`python -m spacewalk.multiple_choice.lmms_eval export`: the prompt, the reply parsing and the scoring are the
spacewalk harness's own (spacewalk/multiple_choice/lmms_eval/hooks.py), for the task spacewalk_task.json describes."""

from pathlib import Path

from spacewalk.multiple_choice.lmms_eval.hooks import hooks_for

_hooks = hooks_for(Path(__file__).resolve().with_name("spacewalk_task.json"))

doc_to_messages = _hooks.doc_to_messages
doc_to_text = _hooks.doc_to_text
doc_to_visual = _hooks.doc_to_visual
doc_to_target = _hooks.doc_to_target
process_results = _hooks.process_results
{aggregations}
'''


def task_yaml(spec: TaskSpec, max_new_tokens: int) -> str:
    """lmms-eval's task config. Values are written as JSON, which YAML reads as they are."""
    generation = {"max_new_tokens": max_new_tokens, "temperature": 0, "do_sample": False, "until": []}
    metrics = "\n".join(f"  - metric: {name}\n    aggregation: !function utils.aggregate_{name}\n"
                        f"    higher_is_better: {json.dumps(higher)}" for name, higher in spec.metrics.items())
    lines = [
        f"# {spec.name}: written by `python -m spacewalk.multiple_choice.lmms_eval export` (README.md beside it)",
        f"task: {spec.name}",
        "dataset_path: json",
        f"dataset_kwargs: {{data_files: {{test: {DOCS_FILE}}}}}",
        "test_split: test",
        "output_type: generate_until",
        "doc_to_messages: !function utils.doc_to_messages",
        "doc_to_text: !function utils.doc_to_text",
        "doc_to_visual: !function utils.doc_to_visual",
        "doc_to_target: !function utils.doc_to_target",
        "process_results: !function utils.process_results",
        "# greedy, as the paper and the authors' scripts decode; `until: []`: the reply ends where the model ends",
        "# it or at the task's limit (lmms-eval's default stops a reply at its first blank line)",
        f"generation_kwargs: {json.dumps(generation)}",
        "# lmms-eval's simple (non-chat) models get a clip as this many frames, uniformly over its slice",
        "lmms_eval_specific_kwargs: {default: {num_frames: 32}}",
        "metric_list:",
        metrics,
    ]
    if spec.cluster is not None:
        lines.append(f"cluster_key: {spec.cluster}")
    lines.append(f"metadata: {json.dumps({'version': TASK_VERSION, 'spacewalk': spec.as_json()}, ensure_ascii=False)}")
    return "\n".join(lines) + "\n"


def answer_limit(task) -> int:
    """The task's reply limit in new tokens: lmms-eval has one number for every model, so the one for models that
    generate on the evaluator's side (the task's `answer_limits.local`, spacewalk/multiple_choice/generation.py)."""
    limits = getattr(task, "answer_limits", None)
    if limits is None or limits.local is None:
        raise DataError(f"task {task.name} declares no reply limit (answer_limits)")
    return int(limits.local)


def readme(spec: TaskSpec, n_items: int, max_new_tokens: int) -> str:
    data = {k: v for k, v in spec.data.items() if k != "_target_"}
    metrics = ", ".join(f"`{name}` ({'higher' if higher else 'lower'} is better)"
                        for name, higher in spec.metrics.items())
    return f"""# {spec.name}

Written by `python -m spacewalk.multiple_choice.lmms_eval export` from the spacewalk task `{spec.data['_target_']}`
with {json.dumps(data, ensure_ascii=False)}: {n_items} documents (docs.jsonl, in the task's order).

{spec.notes}
## How lmms-eval runs it

- The prompt, the reply parsing and the scoring are the spacewalk task's own (utils.py calls
  spacewalk/multiple_choice/lmms_eval/hooks.py), so the same replies score the same through lmms-eval and
  `python evaluate.py`. lmms-eval reports {metrics}: the numbers of metrics.json of the same
  names (accuracies in percent, `unparsable` a count of replies).
- Reply limit: {max_new_tokens} new tokens (`generation_kwargs.max_new_tokens`), greedy decoding.
- `--limit N` scores the first N documents as the task limited to its first N items (`{spec.limit}=N`);
  `--offset` is not scored (NaN, with the reason in the log). A request that failed after lmms-eval's retries
  leaves lmms-eval's error text as the reply: such a run is not scored either (NaN); re-run it.
- lmms-eval's own standard errors beside the numbers (`_stderr_clt`) treat documents as independent;
  `python -m spacewalk.multiple_choice.lmms_eval import` turns the run's sample log (`--log_samples`) into a
  spacewalk run directory whose metrics.json has the benchmark's bootstrap intervals, which
  `python -m spacewalk.compare` and `python -m spacewalk.report` read.
- The documents carry each item's digest: a task folder exported from other data (or data that changed since)
  stops at the first document with an error, before any request.
"""


def export_task(spec: TaskSpec, folder: Path) -> Path:
    """Write `spec`'s task folder at `folder` (module docstring); returns it."""
    task = build_task(spec.data)
    items = list(task.items())
    unanswered = [item.id for item in items if item.answer is None]
    if unanswered:
        raise DataError(f"{len(unanswered)} items have no answer (lmms-eval reports an accuracy: give the answers, "
                        "e.g. EgoCross's data answers=A)", item=unanswered[0], field="answer")
    if not items:
        raise DataError(f"task {spec.name} has no items")
    limit = answer_limit(task)
    with atomic_dir(folder) as work:
        (work / DOCS_FILE).write_text("".join(json.dumps(document(item), ensure_ascii=False) + "\n" for item in items),
                                      encoding="utf-8")
        (work / SETTINGS_FILE).write_text(json.dumps(spec.as_json(), indent=2, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
        (work / f"{spec.name}.yaml").write_text(task_yaml(spec, limit), encoding="utf-8")
        aggregations = "\n".join(f"aggregate_{name} = _hooks.aggregation({name!r})" for name in spec.metrics)
        (work / "utils.py").write_text(UTILS.format(aggregations=aggregations), encoding="utf-8")
        (work / "README.md").write_text(readme(spec, len(items), limit), encoding="utf-8")
    return folder


def export(specs: Sequence[TaskSpec], out_dir: Path, progress=print) -> list[Path]:
    """Every spec's folder under `out_dir`, and the group configs whose tasks are all there."""
    out_dir = Path(out_dir)
    folders = []
    for spec in specs:
        folders.append(export_task(spec, out_dir / spec.name))
        progress(f"wrote {folders[-1]}")
    groups: dict[str, list[str]] = {}
    for spec in specs:
        if spec.group is not None:
            groups.setdefault(spec.group, []).append(spec.name)
    for group, members in groups.items():
        write_text(out_dir / f"{group}.yaml", group_yaml(group, members))
    return folders


def group_yaml(group: str, members: Sequence[str]) -> str:
    return (f"# {group}: the tasks it runs, each scored on its own (written by `python -m "
            f"spacewalk.multiple_choice.lmms_eval export`)\ngroup: {group}\ntask: {json.dumps(list(members))}\n")


def folder_specs(folder: Path) -> Mapping[str, Path]:
    """The task folders under an export folder, by task name."""
    return {path.parent.name: path.parent for path in sorted(Path(folder).glob(f"*/{SETTINGS_FILE}"))}
