"""The harness's tasks as lmms-eval tasks (spacewalk/multiple_choice/lmms_eval/, docs/lmms_eval.md).

Without lmms-eval: the exported folders read as lmms-eval reads them (the YAML, utils.py loaded from its file), and
their hooks ask the task's prompt, parse with the task's parser and aggregate to the task's own metrics, equal to a
runner's run on the same replies; --limit N is the task's first N items, anything else is refused; a sample log in
lmms-eval's format imports into a run directory that rescore and compare read.

End to end (slow): lmms-eval 0.7.3 in its own environment (built once, cached under data/lmms_eval_env/) runs
Spacewalk-18 QA, the step questions at 1, 3 and 5 min and EgoCross CloseQA against a stub chat-completions server
on 127.0.0.1, and `python evaluate.py model=mc_openai` runs the same items against the same server, which replies
by the prompt's text (right, wrong, unparsable, and replies where lmms-eval's habits and the official rules read
different answers): the prompts reach the server as the task writes them, and lmms-eval's numbers, evaluate.py's
metrics.json and the imported run's are equal.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from spacewalk.core.errors import DataError
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.baselines import ScriptedBackend
from spacewalk.multiple_choice.lmms_eval.hooks import REQUEST_FAILED, task_of
from spacewalk.multiple_choice.lmms_eval.sample_logs import import_output
from spacewalk.multiple_choice.lmms_eval.specs import data_settings, for_export, read_spec, registered
from spacewalk.multiple_choice.lmms_eval.task_folder import DOCS_FILE, export
from spacewalk.multiple_choice.parsing import letter
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.compare import compare
from spacewalk.results.rescore import recorded_metrics, rescore_run, scored_run

from helpers.commands import REPO, run_command
from helpers.openai_stub import Stub
from helpers.synthetic_presets import QA_TWO_TESTS

QA, STEP, EGOCROSS = "spacewalk18_qa", "spacewalk18_step_questions_1min", "egocross_closeqa"
STEPS = ("spacewalk18_step_questions_1min", "spacewalk18_step_questions_3min", "spacewalk18_step_questions_5min")
# a few items of each task, what both harnesses ask: 7 questions; per window 7 samples, 4 of the first test recording
# and 3 of the second (unequal, so the mean over recordings and the mean over documents differ); 7 EgoCross questions
SMALL = ["spacewalk18.limit=7", "spacewalk18.samples_per_video=4", "egocross.limit=7"]
N_ITEMS = 7


@pytest.fixture(scope="module")
def roots(synthetic_spacewalk18, synthetic_egocross_root):
    return synthetic_spacewalk18(**QA_TWO_TESTS), synthetic_egocross_root


def settings_for(roots) -> list[str]:
    sw18, egocross = roots
    return [f"spacewalk18.root={sw18}", f"egocross.root={egocross}", f"egocross.answers={egocross / 'answers.json'}",
            *SMALL]


def export_tasks(out: Path, roots, names=(QA, *STEPS, EGOCROSS)) -> dict[str, Path]:
    specs = registered()
    chosen = [specs[name] for name in names]
    scopes = {spec.benchmark for spec in chosen} | set(names)
    values = data_settings([v for v in settings_for(roots) if v.split(".")[0] in scopes], chosen)
    export([for_export(spec, values[spec.name], out / "data") for spec in chosen], out / "tasks",
           progress=lambda text: None)
    return {name: out / "tasks" / name for name in names}


class FunctionTag(yaml.SafeLoader):
    """Reads lmms-eval's `!function utils.<name>` as the text `utils.<name>`."""


FunctionTag.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def utils_of(folder: Path):
    """The folder's utils.py loaded from its file, as lmms-eval loads it (not imported by name)."""
    spec = importlib.util.spec_from_file_location("utils", folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def docs_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / DOCS_FILE).read_text().splitlines()]


def designed_reply(task, item, index: int) -> str:
    """Right, wrong and unparsable replies in turn, with the forms where lmms-eval's habits (the first option letter
    or number in the reply, a random guess when none) and the official rules read different things."""
    if task.name == "egocross_closeqa":
        letters = item.meta["letters"]
        right, wrong = letters[item.answer], letters[(item.answer + 1) % len(letters)]
        return [f'{{"prediction": "{right}", "reason": "seen"}}',
                f'Sure. {{"prediction": "{right.lower()}", "reason": "seen"}}',  # the authors lower-case both sides
                f'{{"prediction": "{wrong}", "reason": "seen"}}',
                right,  # a bare letter: not the authors' JSON, wrong
                f'{{"prediction": "{right}: {item.options[item.answer][:10]}"}}',  # not a letter: wrong
                f'```json\n{{"prediction": "{right}"}}\n```'][index % 6]  # the first {...} block: right
    if task.name.startswith("spacewalk18_step"):
        right, wrong, n = item.answer, (item.answer + 1) % len(item.options), len(item.options)
        return [str(right), f"Step {right} fits best.", str(wrong), "None of these.", f"({right}) looks right",
                str(n + 5)][index % 6]  # the last: outside 0..K, unparsable
    right, wrong = letter(item.answer), letter((item.answer + 1) % len(item.options))
    # "A careful look ... (C)": one bracketed choice, C; the first capital letter would be A
    return [right, f"The answer is ({right}).", wrong, "I cannot tell from this video.",
            f"A careful look suggests ({right})", "E"][index % 6]


def replies_by_prompt(task) -> dict[str, str]:
    """The reply to each prompt text (two items with the same prompt get the first one's)."""
    table: dict[str, str] = {}
    for index, item in enumerate(task.items()):
        table.setdefault(task.prompt(item).text, designed_reply(task, item, index))
    return table


def harness_run(task, table: dict[str, str], run_dir: Path, data: dict | None = None) -> dict:
    """The runner on the same replies (the scripted backend answers each prompt from the table); with `data`, the
    run's config.resolved.yaml as evaluate.py writes it (what rescore reads)."""
    backend = ScriptedBackend(script=lambda item, prompt: table[prompt.text])
    metrics = runner.run(task, backend, run_dir, progress=False, bootstrap=BootstrapOptions(n_resamples=200))
    if data is not None:
        config = {"data": data, "task": {"name": "multiple_choice"}, "model": {"_target_": "scripted"}}
        (run_dir / "config.resolved.yaml").write_text(yaml.safe_dump(config))
    return metrics


def test_the_task_folders_ask_parse_and_score_as_the_harness(tmp_path, roots):
    folders = export_tasks(tmp_path, roots)
    assert (tmp_path / "tasks" / "spacewalk18_step_questions.yaml").is_file()  # the group of the three windows
    group = yaml.safe_load((tmp_path / "tasks" / "spacewalk18_step_questions.yaml").read_text())
    assert group == {"group": "spacewalk18_step_questions", "task": list(STEPS)}
    for name, folder in folders.items():
        config = yaml.load((folder / f"{name}.yaml").read_text(), Loader=FunctionTag)
        spec = read_spec(folder / "spacewalk_task.json")
        assert config["task"] == name and config["metadata"]["spacewalk"] == spec.as_json()
        assert config["doc_to_messages"] == "utils.doc_to_messages" and config["dataset_path"] == "json"
        assert [m["metric"] for m in config["metric_list"]] == list(spec.metrics)
        task = task_of(spec)
        items = task.items()
        assert config["generation_kwargs"]["max_new_tokens"] == task.answer_limits.local
        docs = docs_of(folder)
        assert [d["item_id"] for d in docs] == [item.id for item in items] and len(docs) == N_ITEMS
        utils = utils_of(folder)
        for doc, item in zip(docs, items):
            prompt = task.prompt(item)
            content = utils.doc_to_messages(doc)[0]["content"]
            assert [c["text"] for c in content if c["type"] == "text"] == [prompt.text]  # one text, as written
            if name == EGOCROSS:  # the release's frames, all of them, in order, before the text
                assert content[:-1] == [{"type": "image", "url": str(p)} for p in item.visual.frames]
                assert len(utils.doc_to_visual(doc, {"num_frames": 2})) == len(item.visual.frames)
            else:  # the clip: the recording's slice, which lmms-eval's model samples by its own rule
                assert content[0] == {"type": "video", "url": str(item.visual.video),
                                      "start_time": item.visual.start, "end_time": item.visual.end}
                frames = utils.doc_to_visual(doc, {"num_frames": 3})  # a simple model's images
                assert len(frames) == 3 and frames[0].size[0] > 0
            assert utils.doc_to_text(doc) == prompt.text and utils.doc_to_target(doc) == str(item.answer)
        # the same replies through the hooks and through the runner: the same numbers
        table = replies_by_prompt(task)
        entries = [utils.process_results(doc, [table[task.prompt(item).text]]) for doc, item in zip(docs, items)]
        for item, entry in zip(items, entries):
            logged = entry[next(iter(spec.metrics))]
            assert logged["choice"] == task.parse(item, logged["reply"]) and logged["item_id"] == item.id
        metrics = harness_run(task, table, tmp_path / "runs" / name)
        for metric in spec.metrics:
            value = getattr(utils, f"aggregate_{metric}")([e[metric] for e in entries])
            assert value == metrics[metric], (name, metric)
        accuracy = metrics.get("Accuracy", metrics.get("accuracy"))
        assert 0 < accuracy < 100 and metrics["unparsable"] > 0  # the designed mix, not a trivial run
        per_document = 100 * sum(e[next(iter(spec.metrics))]["score"] for e in entries) / len(entries)
        if name in STEPS:  # the official number is per recording, then the mean: not lmms-eval's mean over documents
            assert len(metrics["per_video"]) == 2 and not math.isclose(accuracy, per_document)
        else:
            assert math.isclose(accuracy, per_document)


def test_a_limit_is_the_first_items_and_anything_else_is_not_scored(tmp_path, roots, caplog):
    folders = export_tasks(tmp_path, roots, names=(QA, STEP))
    for name, folder in folders.items():
        spec = read_spec(folder / "spacewalk_task.json")
        task = task_of(spec)
        utils, docs, items = utils_of(folder), docs_of(folder), task.items()
        table = replies_by_prompt(task)
        entries = [utils.process_results(doc, [table[task.prompt(item).text]])["Accuracy"]
                   for doc, item in zip(docs, items)]
        # lmms-eval's --limit 2: the task limited to its first 2 items
        limited = task_of(spec.limited(2))
        assert [i.id for i in limited.items()] == [i.id for i in items[:2]]
        expected = harness_run(limited, table, tmp_path / "limited" / name)
        assert utils.aggregate_Accuracy(entries[:2]) == expected["Accuracy"]
        # --offset 1: not the first items; a failed request: not the model's reply
        assert math.isnan(utils.aggregate_Accuracy(entries[1:3]))
        failed = [*entries[:-1], {**entries[-1], "reply": f"{REQUEST_FAILED} after 5 retries] Connection refused"}]
        assert math.isnan(utils.aggregate_Accuracy(failed))
    assert "not the task's first 2" in caplog.text and "requests failed" in caplog.text
    # a document that no longer matches its item (data changed after the export) stops before any request
    utils, doc = utils_of(folders[QA]), docs_of(folders[QA])[0]
    with pytest.raises(DataError, match="changed since the task folder was exported"):
        utils.doc_to_messages({**doc, "item_digest": "0" * 16})


def lmms_eval_output(folder: Path, out: Path, table: dict[str, str], model: str = "stub") -> Path:
    """A results file and sample log in lmms-eval 0.7's format, from the task folder's hooks, as lmms-eval writes
    them with --log_samples (the hooks' entries under the metric names, the reply as filtered_resps)."""
    spec = read_spec(folder / "spacewalk_task.json")
    task, utils = task_of(spec), utils_of(folder)
    config = yaml.load((folder / f"{spec.name}.yaml").read_text(), Loader=FunctionTag)
    model_dir = out / model
    model_dir.mkdir(parents=True, exist_ok=True)
    lines = []
    for doc_id, (doc, item) in enumerate(zip(docs_of(folder), task.items())):
        reply = table[task.prompt(item).text]
        lines.append({"doc_id": doc_id, "target": str(item.answer), "filtered_resps": reply,
                      "token_counts": [{"input_tokens": 9, "output_tokens": 2, "reasoning_tokens": 0}],
                      **utils.process_results(doc, [reply]), "input": utils.doc_to_text(doc)})
    (model_dir / f"20260101_120000_samples_{spec.name}.jsonl").write_text(
        "".join(json.dumps(line) + "\n" for line in lines))
    results_file = model_dir / "20260101_120000_results.json"  # one per run, every task's config in it
    results = json.loads(results_file.read_text()) if results_file.is_file() else {
        "results": {}, "configs": {}, "config": {"model": "openai", "model_args": "model_version=stub", "limit": None},
        "lmms_eval_version": "0.7.3"}
    results["results"][spec.name] = {"alias": spec.name}
    results["configs"][spec.name] = config
    results_file.write_text(json.dumps(results))
    return out


def test_a_sample_log_imports_into_a_run_that_rescore_and_compare_read(tmp_path, roots, capsys):
    folders = export_tasks(tmp_path, roots, names=(QA, STEP, EGOCROSS))
    for name, folder in folders.items():
        spec = read_spec(folder / "spacewalk_task.json")
        task = task_of(spec)
        table = replies_by_prompt(task)
        lmms_eval_output(folder, tmp_path / "out", table)
        harness_run(task, table, tmp_path / "harness" / name, dict(spec.data))
    imported = dict(import_output(tmp_path / "out", tmp_path / "runs", progress=lambda text: None,
                                  bootstrap=BootstrapOptions(n_resamples=200)))
    assert sorted(p.parts[-3] for p in imported) == sorted(folders)
    for run_dir, metrics in imported.items():
        name = run_dir.parts[-3]
        assert run_dir == tmp_path / "runs" / name / "stub" / "20260101_120000"
        harness = json.loads((tmp_path / "harness" / name / "metrics.json").read_text())
        assert {k: v for k, v in metrics.items() if k != "intervals"} == \
            {k: v for k, v in harness.items() if k not in ("intervals", "version")}  # the file's version: layout.py
        assert rescore_run(run_dir) == recorded_metrics(run_dir) == rescore_run(tmp_path / "harness" / name)
        assert scored_run(run_dir).label == "lmms_eval:openai"
        differences, _ = compare([scored_run(tmp_path / "harness" / name)], [scored_run(run_dir)],
                                 BootstrapOptions(n_resamples=100))
        assert differences and all(d.difference == 0 for d in differences)
        provenance = json.loads((run_dir / "provenance.json").read_text())
        assert provenance["command"] == f"lmms-eval --model openai --model_args model_version=stub --tasks {name} " \
                                        "--log_samples"
    # the records read back with their prompts, as evaluate.py's do
    records = runner.read_run(tmp_path / "runs" / QA / "stub" / "20260101_120000")
    assert records[0].prompt.startswith("<visual>\nAnswer with a single letter from A to D")
    # a report's table picks the runs by their data config and lays them out by model, as evaluate.py's
    spec = tmp_path / "table.yaml"
    spec.write_text(yaml.safe_dump([{"title": "QA through lmms-eval", "metrics": ["Accuracy"], "rows": ["model"],
                                     "columns": ["metric"], "where": {"data": "spacewalk18_qa"}}]))
    run_command("-m", "spacewalk.report", tmp_path / "runs", "--spec", spec, "--markdown", tmp_path / "table.md")
    accuracy = imported[tmp_path / "runs" / QA / "stub" / "20260101_120000"]["Accuracy"]
    row = next(line for line in (tmp_path / "table.md").read_text().splitlines() if "lmms_eval/openai/stub" in line)
    assert f"{accuracy:.2f} [" in row


def test_export_and_import_refuse_bad_input_with_one_line(tmp_path):
    bad = run_command("-m", "spacewalk.multiple_choice.lmms_eval", "export", tmp_path / "t", "--tasks", QA,
                      "--data", "spacewalk18.context=5min", check=False)
    assert bad.returncode == 2 and bad.stderr.strip() == \
        "error: --data 'spacewalk18.context=5min': no exported task of spacewalk18 takes context"
    bad = run_command("-m", "spacewalk.multiple_choice.lmms_eval", "export", tmp_path / "t", "--tasks", "mmmu",
                      check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --tasks: no task mmmu; the tasks: ")
    (tmp_path / "out").mkdir()
    bad = run_command("-m", "spacewalk.multiple_choice.lmms_eval", "import", tmp_path / "out", tmp_path / "runs",
                      check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "no results file" in bad.stderr
    assert not (tmp_path / "t").exists() and not (tmp_path / "runs").exists()


def test_the_extra_and_the_separate_environment_pin_the_same_lmms_eval():
    import tomllib

    from spacewalk.multiple_choice.lmms_eval.environment import NO_DEPS

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert tuple(extras["lmms-eval"]) == NO_DEPS


# ---- end to end: lmms-eval against a local server ---------------------------------------------------------------

LMMS_MODEL, HARNESS_MODEL = "lmms-stub", "harness-stub"
NUM_FRAMES = 4


def texts_of(body: dict) -> str:
    return "\n".join(p["text"] for p in body["messages"][-1]["content"] if p["type"] == "text")


def images_of(body: dict) -> int:
    return sum(p["type"] == "image_url" for p in body["messages"][-1]["content"])


@pytest.fixture(scope="module")
def lmms_eval_python():
    from spacewalk.multiple_choice.lmms_eval.environment import ensure_environment

    return ensure_environment(REPO / "data" / "lmms_eval_env", progress=print)


def evaluate(*overrides: str, url: str, multirun: bool = False) -> None:
    run_command("evaluate.py", *(["-m"] if multirun else []), "model=mc_openai", f"model.model={HARNESS_MODEL}",
                f"model.num_frames={NUM_FRAMES}",
                "model.requests_per_minute=null", "model.concurrency=4", "multiple_choice.progress=false",
                "multiple_choice.wandb.enabled=false", *overrides,
                env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-test", "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_lmms_eval_runs_the_tasks_against_a_local_server_and_scores_as_evaluate_py(tmp_path, roots,
                                                                                    lmms_eval_python):
    sw18, egocross = roots
    folders = export_tasks(tmp_path, roots)
    tasks = {name: task_of(read_spec(folder / "spacewalk_task.json")) for name, folder in folders.items()}
    table = {text: reply for task in tasks.values() for text, reply in replies_by_prompt(task).items()}
    unknown = []

    def respond(body):
        if texts_of(body) not in table:
            unknown.append(texts_of(body))
            return 400, "not a prompt of the exported tasks", 0
        return 200, table[texts_of(body)], 0

    stub = Stub()
    stub.respond = respond
    try:
        result = subprocess.run(
            [str(lmms_eval_python), "-m", "lmms_eval", "--model", "openai", "--model_args",
             f"model_version={LMMS_MODEL},base_url={stub.url},api_key=sk-test,max_frames_num={NUM_FRAMES},"
             "num_concurrent=4,max_retries=1", "--include_path", str(tmp_path / "tasks"),
             "--tasks", f"{QA},spacewalk18_step_questions,{EGOCROSS}", "--log_samples",
             "--output_path", str(tmp_path / "out"), "--verbosity", "WARNING"],
            cwd=tmp_path, capture_output=True, text=True, timeout=900,
            env=os.environ | {"PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_OFFLINE": "1",
                              "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"})
        assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
        # the same items, asked by evaluate.py's OpenAI-compatible backend
        evaluate("data=spacewalk18_qa", f"data.root={sw18}", f"data.limit={N_ITEMS}",
                 f"hydra.run.dir={tmp_path / 'qa'}", url=stub.url)
        evaluate("data=spacewalk18_step_questions", f"data.root={sw18}", "data.samples_per_video=4",
                 f"data.limit={N_ITEMS}", "context=1min,3min,5min", f"hydra.sweep.dir={tmp_path / 'steps'}",
                 url=stub.url, multirun=True)
        evaluate("data=egocross", f"data.root={egocross}", f"data.answers={egocross / 'answers.json'}",
                 f"data.limit={N_ITEMS}", f"hydra.run.dir={tmp_path / 'egocross'}", url=stub.url)
    finally:
        stub.close()
    assert unknown == []
    harness_dirs = {QA: tmp_path / "qa", EGOCROSS: tmp_path / "egocross",
                    **{name: tmp_path / "steps" / str(i) for i, name in enumerate(STEPS)}}

    # every item was asked once by lmms-eval, in the task's words, with the clip's frames or the item's frames
    asked = [r["body"] for r in stub.requests if r["body"]["model"] == LMMS_MODEL]
    by_text = {texts_of(body): body for body in asked}
    for name, task in tasks.items():
        for item in task.items():
            body = by_text[task.prompt(item).text]
            frames = len(item.visual.frames) if name == EGOCROSS else NUM_FRAMES
            assert images_of(body) == frames, (name, item.id)
            assert body["max_tokens"] == task.answer_limits.local and body["temperature"] == 0
    assert len(asked) == sum(len(task.items()) for task in tasks.values())

    results_file, = (tmp_path / "out").glob("*/*_results.json")
    results = json.loads(results_file.read_text())["results"]
    imported = dict(import_output(tmp_path / "out", tmp_path / "runs", progress=lambda text: None))
    for run_dir, metrics in imported.items():
        name = run_dir.parts[-3]
        task, spec = tasks[name], read_spec(folders[name] / "spacewalk_task.json")
        # lmms-eval's sample log: the reply the server gave, the task's parse of it
        samples = [json.loads(line) for line in next(results_file.parent.glob(f"*_samples_{name}.jsonl")).open()]
        by_id = {s[next(iter(spec.metrics))]["item_id"]: s for s in samples}
        for item in task.items():
            entry = by_id[item.id][next(iter(spec.metrics))]
            assert entry["reply"] == by_id[item.id]["filtered_resps"] == table[task.prompt(item).text]
            assert entry["choice"] == task.parse(item, entry["reply"])
        # one number three ways: lmms-eval's table, evaluate.py's metrics.json, the imported run
        harness = json.loads((harness_dirs[name] / "metrics.json").read_text())
        for metric in spec.metrics:
            assert results[name][f"{metric},none"] == harness[metric] == metrics[metric], (name, metric)
        assert harness["unparsable"] > 0
        print(name, {metric: results[name][f"{metric},none"] for metric in spec.metrics})  # shown with -s
        differences, _ = compare([scored_run(harness_dirs[name])], [scored_run(run_dir)],
                                 BootstrapOptions(n_resamples=100))
        assert differences and all(d.difference == 0 for d in differences)
    assert sorted(p.parts[-3] for p in imported) == sorted(folders)
