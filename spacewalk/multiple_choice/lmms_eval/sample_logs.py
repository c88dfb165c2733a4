"""lmms-eval's logs of an exported task turned into a run directory of the harness, so the results tools read runs
made by lmms-eval as they read `python evaluate.py`'s (`python -m spacewalk.compare`, `python -m spacewalk.report`,
spacewalk.results.rescore).

lmms-eval, run with `--log_samples --output_path OUT`, writes per model folder `OUT/<model>/<date>_results.json`
(every task's config, our spec in its `metadata.spacewalk`, and the command's model settings) and one
`<date>_samples_<task>.jsonl` per task: a line per document with the reply (`filtered_resps`) and what our
`process_results` returned for it (the item id, the reply it parsed). `import` reads both and writes, per task,

    RUNS/<task>/<model>/<date>/
        records.jsonl, prompt_parts.jsonl   one record per item: the reply, the task's parse of it (again: the parse
                                            is the task's, whatever the log says), the prompt as the task makes it
        metrics.json                        the task's official metrics with their bootstrap intervals, and its
                                            official files (answers.json, predictions.json, ...): the runner's
                                            `finish`, as for evaluate.py's runs
        config.resolved.yaml                the data config that builds the task (what spacewalk.results.rescore reads),
                                            the model as lmms-eval names it
        .hydra/hydra.yaml                   the choices a report's `where` and `rows` read: `data` (the data config
                                            of the same task under evaluate.py), `model` (lmms_eval/<class>/<model>)
        provenance.json                     lmms-eval's command as its results file records it (`command`), the
                                            import command (`argv`), the commit of the scoring code

A run of the first N documents (`--limit N`) becomes the task limited to its first N items. A log with a failed
request, a document of other items or a reply that differs from the logged one is refused, naming it.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_dir, load_json, write_json
from spacewalk.multiple_choice.lmms_eval.hooks import answered_spec, records_of, task_of
from spacewalk.multiple_choice.lmms_eval.specs import TaskSpec
from spacewalk.multiple_choice.records import PARTS, RECORDS, PartWriter, record_to_json
from spacewalk.multiple_choice.runner import finish
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.layout import HYDRA, HYDRA_CONFIG, PROVENANCE, RUN_CONFIG
from spacewalk.results.provenance import code_commit

DEFAULT_BOOTSTRAP = BootstrapOptions()  # metrics.bootstrap's defaults (conf/metrics/default.yaml)


@dataclass(frozen=True)
class LoggedTask:
    """One exported task in one lmms-eval run: its spec (from the results file), the results file and the sample
    log, lmms-eval's model name and settings, the run's date id."""

    spec: TaskSpec
    results: Path
    samples: Path
    model: str
    model_args: str
    model_folder: str
    date: str
    settings: Mapping[str, Any]
    version: str | None


def logged_tasks(output: str | Path) -> list[LoggedTask]:
    """The exported tasks of every lmms-eval run under `output` (lmms-eval's --output_path, a model folder in it,
    or one results file), oldest first."""
    output = Path(output)
    if output.is_file():
        files = [output]
    elif output.is_dir():
        files = sorted(output.rglob("*_results.json"))
    else:
        raise DataError("no such file or folder", file=output)
    found = []
    for path in files:
        results = load_json(path)
        if not isinstance(results, dict) or not isinstance(results.get("configs"), dict):
            raise DataError("not an lmms-eval results file (no \"configs\")", file=path)
        date = path.name.removesuffix("_results.json")
        config = results.get("config") or {}
        for name, task_config in sorted(results["configs"].items()):
            raw = ((task_config or {}).get("metadata") or {}).get("spacewalk")
            if raw is None:
                continue  # one of lmms-eval's own tasks
            samples = path.with_name(f"{date}_samples_{name}.jsonl")
            if not samples.is_file():
                raise DataError(f"task {name} has no sample log: run lmms-eval with --log_samples", file=samples)
            found.append(LoggedTask(TaskSpec.from_json(raw, path), path, samples, str(config.get("model")),
                                    str(config.get("model_args") or ""), path.parent.name, date, config,
                                    results.get("lmms_eval_version")))
    if not found:
        raise DataError("no results file of a task exported by spacewalk (lmms-eval writes <date>_results.json into "
                        "--output_path/<model>/)", file=output)
    return found


def entries(logged: LoggedTask) -> list[dict[str, Any]]:
    """Per document, what `process_results` returned (item id, reply), checked against lmms-eval's own record of
    the reply."""
    metric = next(iter(logged.spec.metrics))
    out = []
    with open(logged.samples, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                sample = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"line {number} is not JSON ({e})", file=logged.samples) from None
            entry = sample.get(metric) if isinstance(sample, dict) else None
            if not isinstance(entry, dict) or "item_id" not in entry or not isinstance(entry.get("reply"), str):
                raise DataError(f"line {number} has no {metric!r} entry with the item id and the reply (a sample log "
                                "of a task exported by spacewalk has one)", file=logged.samples, field=metric)
            logged_reply = sample.get("filtered_resps")
            if isinstance(logged_reply, list) and len(logged_reply) == 1:
                logged_reply = logged_reply[0]
            if isinstance(logged_reply, str) and logged_reply != entry["reply"]:
                raise DataError(f"line {number}: the reply scored differs from the reply lmms-eval logged",
                                file=logged.samples, item=str(entry["item_id"]), field="filtered_resps")
            out.append({**entry, "doc_id": sample.get("doc_id"), "token_counts": sample.get("token_counts")})
    return out


def model_choice(logged: LoggedTask) -> str:
    """The run's `model` as a table reads it: lmms-eval's model class and the model it ran (its output folder's
    name, e.g. `lmms_eval/openai/Qwen__Qwen2.5-VL-7B-Instruct`)."""
    return f"lmms_eval/{logged.model}/{logged.model_folder}"


def hydra_record(logged: LoggedTask) -> dict[str, Any]:
    """What spacewalk/results/runs.py reads from an evaluate.py run's .hydra/hydra.yaml, for this run: the config
    groups' choices a report's `where` and `rows` name (`data`: the data config of the same task under evaluate.py,
    `model`: `model_choice`) and the job's name."""
    return {"hydra": {"job": {"name": "lmms_eval"},
                      "runtime": {"choices": {"data": logged.spec.data_config or logged.spec.name,
                                              "model": model_choice(logged)}}}}


def lmms_eval_command(logged: LoggedTask) -> str:
    """lmms-eval's command as its results file records it (the task folder's path is not recorded)."""
    words = ["lmms-eval", "--model", logged.model]
    if logged.model_args:
        words += ["--model_args", logged.model_args]
    words += ["--tasks", logged.spec.name, "--log_samples"]
    for key in ("limit", "offset"):
        if logged.settings.get(key):
            words += [f"--{key}", str(logged.settings[key])]
    return shlex.join(words)


def import_task(logged: LoggedTask, run_dir: str | Path, bootstrap: BootstrapOptions | None = DEFAULT_BOOTSTRAP,
                argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Write `logged`'s run directory at `run_dir` (module docstring), whole or not at all; returns its metrics."""
    logs = entries(logged)
    spec = answered_spec(logged.spec, [str(e["item_id"]) for e in logs])
    task = task_of(spec)
    items, records = records_of(task, logs)
    by_id = {str(e["item_id"]): e for e in logs}
    with atomic_dir(run_dir) as work:
        writer = PartWriter(work, work / PARTS)
        with open(work / PARTS, "a", encoding="utf-8") as parts, open(work / RECORDS, "w", encoding="utf-8") as out:
            for item, record in zip(items, records):
                logged_entry = by_id[item.id]
                meta = {"lmms_eval": {"doc_id": logged_entry["doc_id"], "token_counts": logged_entry["token_counts"]}}
                ids = writer.ids(task.prompt(item).audit_parts(), parts)
                out.write(json.dumps(record_to_json(replace(record, meta=meta, prompt_parts=ids)), ensure_ascii=False)
                          + "\n")
        config = {"data": dict(spec.data), "task": {"name": "multiple_choice", "lmms_eval_task": spec.name},
                  "model": {"_target_": f"lmms_eval:{logged.model}", "model_args": logged.model_args},
                  "split": spec.data.get("split", "test"),
                  **({"context": spec.data["context"]} if "context" in spec.data else {}),
                  "metrics": {"bootstrap": asdict(bootstrap or BootstrapOptions(n_resamples=0))}}
        (work / RUN_CONFIG).write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
        (work / HYDRA).mkdir()
        (work / HYDRA / HYDRA_CONFIG).write_text(yaml.safe_dump(hydra_record(logged), sort_keys=False),
                                                    encoding="utf-8")
        write_json(work / PROVENANCE, {
            "command": lmms_eval_command(logged),
            "argv": shlex.join(["python", "-m", "spacewalk.multiple_choice.lmms_eval",
                                *(sys.argv[1:] if argv is None else argv)]),
            **code_commit(),
            "python": sys.version.split()[0],
            "lmms_eval": {"version": logged.version, "date": logged.date, "results": str(logged.results),
                          "samples": str(logged.samples), "model": logged.model, "model_args": logged.model_args}})
        metrics = finish(task, work, items, bootstrap=bootstrap)
    return metrics


def run_dir_of(logged: LoggedTask, runs: str | Path) -> Path:
    return Path(runs) / logged.spec.name / logged.model_folder / logged.date


def import_output(output: str | Path, runs: str | Path, tasks: Sequence[str] | None = None,
                  bootstrap: BootstrapOptions | None = DEFAULT_BOOTSTRAP, progress=print,
                  argv: Sequence[str] | None = None) -> list[tuple[Path, dict[str, Any]]]:
    """Every exported task of every lmms-eval run under `output` (or those named in `tasks`) as a run directory
    under `runs`; (run directory, metrics) each."""
    found = logged_tasks(output)
    if tasks:
        unknown = sorted(set(tasks) - {t.spec.name for t in found})
        if unknown:
            raise DataError(f"no sample log of {', '.join(unknown)} (found: "
                            f"{', '.join(sorted({t.spec.name for t in found}))})", file=output)
        found = [t for t in found if t.spec.name in set(tasks)]
    done = []
    for logged in found:
        run_dir = run_dir_of(logged, runs)
        metrics = import_task(logged, run_dir, bootstrap, argv)
        headline = {name: metrics.get(name) for name in logged.spec.metrics}
        progress(f"{logged.spec.name} ({logged.model}, {logged.date}): {json.dumps(headline)} -> {run_dir}")
        done.append((run_dir, metrics))
    return done
