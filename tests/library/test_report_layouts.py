"""python -m spacewalk.report's multiple-choice layout (one column per number, `columns: [metric]`) and its tables of
paired comparisons (spacewalk/results/report/comparisons.py). The runs are written in-process by the project's own
writers (the multiple-choice runner, evaluate_step_recognition) beside the .hydra/ files the tables read, so --check and
the comparisons re-score real recorded predictions; no end-to-end command runs here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from spacewalk.core.errors import ConfigError
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.report.command import build_report, main
from spacewalk.results.report.spec import load_specs
from spacewalk.results.runs import find_runs

from helpers.run_dir_fakes import Noisy, write_run

OPTIONS = BootstrapOptions(n_resamples=200, seed=0)


def resolved(run_dir: Path, task: str, data: dict, **top) -> None:
    """config.resolved.yaml, what the re-scoring reads (the task, the data config)."""
    (run_dir / "config.resolved.yaml").write_text(yaml.safe_dump({"task": {"name": task}, "data": data, **top}))


# ---- multiple choice: one column per number --------------------------------------------------------------------

@pytest.fixture(scope="module")
def qa_runs(synthetic_spacewalk18, tmp_path_factory):
    """Spacewalk-18 QA runs as evaluate.py leaves them (<data>/<model>/<hash>/): `random`, `mc_plan` with
    model.steps options and recording (random backends of other seeds: the table reads only config keys and
    metrics.json), and one on generated questions (data.questions set)."""
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task
    from spacewalk.multiple_choice import runner
    from spacewalk.multiple_choice.backends.baselines import RandomBackend

    root = synthetic_spacewalk18()
    task = question_answering_task(root)
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.questions.question_answering.question_answering_task",
            "root": str(root)}
    base = tmp_path_factory.mktemp("qa") / "multiple_choice" / "spacewalk18_qa"
    runs = {}
    for name, model, steps, questions, seed in (
            ("random", "random", None, None, 0), ("options", "mc_plan", "options", None, 1),
            ("recording", "mc_plan", "recording", None, 2), ("val", "mc_plan", "options", "/q/val_qa.json", 3)):
        overrides = ["data=spacewalk18_qa", f"model={model}"] + (["model.steps=recording"] if steps == "recording"
                                                                 else []) \
            + ([f"data.questions={questions}"] if questions else [])
        run = write_run(base / model / f"hash{seed}", overrides, None, entry="evaluate", model=model,
                        data="spacewalk18_qa", task="multiple_choice",
                        config={"model": {"_target_": "x", "steps": steps}, "data": {"questions": questions}})
        resolved(run, "multiple_choice", data)
        runner.run(task, RandomBackend(seed=seed), run, progress=False, bootstrap=OPTIONS)
        runs[name] = run
    return base.parent, runs


def qa_spec(tmp_path: Path, kind: str) -> Path:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
- title: QA test
  metrics: [Accuracy, "per_type/{kind}"]
  rows: [model, model.steps]
  columns: [metric]
  where: {{data: spacewalk18_qa, data.questions: null}}
  row_order: [random, "mc_plan, options", "mc_plan, recording"]
  row_labels: {{"mc_plan, options": options only}}
  column_labels: {{Accuracy: overall, "per_type/{kind}": "{kind} ({{n}})"}}
  quoted:
    - {{label: random (paper), before: random, cells: {{Accuracy: "25.00"}}}}
    - {{label: GPT-4o (paper), after: "mc_plan, options", cells: {{Accuracy: "32.45"}}}}
- title: QA val
  metrics: [Accuracy]
  rows: [model, model.steps]
  columns: [metric]
  where: {{data.questions: "*.json"}}
""")
    return spec


def cell(metrics: dict, *path: str) -> str:
    node = metrics["intervals"]
    for key in path:
        node = node[key]
    return f"{node['estimate']:.2f} [{node['low']:.2f}, {node['high']:.2f}]"


def test_multiple_choice_runs_make_one_column_per_number(qa_runs, tmp_path):
    folder, runs = qa_runs
    metrics = {name: json.loads((run / "metrics.json").read_text()) for name, run in runs.items()}
    kind = next(iter(metrics["random"]["per_type"]))
    test, val = build_report([folder], load_specs(qa_spec(tmp_path, kind)))
    assert test.column_keys == ["Accuracy", f"per_type/{kind}"]
    assert [test.column_label(c) for c in test.column_keys] == [
        "overall", f"{kind} ({metrics['random']['per_type_count'][kind]})"]
    rows = {label: cells for label, cells, _ in test.layout()}
    # model.steps tells mc_plan's two readings apart; the generated questions' run is another table's
    assert list(rows) == ["random (paper)", "random", "options only", "GPT-4o (paper)", "mc_plan, recording"]
    for label, name in (("random", "random"), ("options only", "options"), ("mc_plan, recording", "recording")):
        assert rows[label] == [cell(metrics[name], "Accuracy"), cell(metrics[name], "per_type", kind)]
    assert rows["random (paper)"] == ["25.00", "-"]
    assert [label for label, _, _ in val.layout()] == ["mc_plan, options"]

    from spacewalk.results.report.render import table_markdown

    text = table_markdown(test)
    assert f"| random (paper) (quoted) | 25.00 | - |\n| random | {rows['random'][0]} | {rows['random'][1]} |" in text
    # one block, one command per row (not per cell); the two rows that differ in the model are one multirun
    block = text.split("```bash\n")[1].split("```")[0].splitlines()
    assert block == ["# random; options only (seed 0; commit not recorded)",
                     "python evaluate.py -m data=spacewalk18_qa model=random,mc_plan",
                     "# mc_plan, recording (seed 0; commit not recorded)",
                     "python evaluate.py data=spacewalk18_qa model=mc_plan model.steps=recording"]


def test_a_drifted_multiple_choice_number_is_named_by_verify_and_check(qa_runs, tmp_path, capsys):
    import shutil

    folder, runs = qa_runs
    copy = tmp_path / "runs"
    shutil.copytree(folder, copy)
    kind = next(iter(json.loads((runs["random"] / "metrics.json").read_text())["per_type"]))
    spec = qa_spec(tmp_path, kind)
    doc = tmp_path / "results.md"
    doc.write_text('<!-- spacewalk.report table="QA test" -->\n<!-- /spacewalk.report -->\n\n'
                   '<!-- spacewalk.report table="QA val" -->\n<!-- /spacewalk.report -->\n')
    assert main([str(copy), "--spec", str(spec), "--update", str(doc)]) == 0
    assert main([str(copy), "--spec", str(spec), "--verify", str(doc), "--check"]) == 0  # re-scored: the same
    capsys.readouterr()
    # a number typed over in the document
    made = doc.read_text()
    line = next(x for x in made.splitlines() if x.startswith("| options only |"))
    typed = line.replace(line.split(" | ")[1], "99.99 [98.00, 100.00]")
    doc.write_text(made.replace(line, typed))
    assert main([str(copy), "--spec", str(spec), "--verify", str(doc)]) == 1
    out = capsys.readouterr().out
    assert f"table 'QA test': the document has\n    {typed}\n  its runs give\n    {line}" in out
    # a run whose metrics.json no longer follows from its recorded answers: only that cell is flagged
    doc.write_text(made)
    run = copy / "spacewalk18_qa" / "mc_plan" / "hash1"
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["per_type"][kind] += 10
    metrics["intervals"]["per_type"][kind]["estimate"] += 10
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert main([str(copy), "--spec", str(spec), "--check"]) == 1
    out = capsys.readouterr().out
    flagged = next(x for x in out.splitlines() if x.startswith("| options only |"))
    assert flagged.endswith(" (!) |") and flagged.count("(!)") == 1
    assert f"- {run}: per_type/{kind} is {metrics['per_type'][kind]!r} in metrics.json, re-scored" in out


def test_find_runs_takes_a_folder_of_runs_at_any_depth(tmp_path):
    a = write_run(tmp_path / "mc" / "qa" / "random" / "h1", [], None)
    b = write_run(tmp_path / "mc" / "qa" / "mc_plan" / "h2", [], None)
    write_run(b / "inner", [], None)  # a run's own folders are not searched
    assert find_runs([tmp_path / "mc"]) == [b, a]


@pytest.mark.parametrize("values, message", [
    ({"columns": ["metric", "context"]}, "`metric` stands alone"),
    ({"rows": ["metric"]}, "`metric` stands alone"),
    ({"where": {"model": {"a": 1}}}, "where: a value must be text, a number, null or a list"),
    ({"quoted": [{"label": "x", "after": "a", "before": "b"}]}, "optionally after or before"),
])
def test_a_bad_layout_is_refused_naming_the_key(values, message):
    from spacewalk.results.report.spec import TableSpec

    with pytest.raises(ConfigError, match=message):
        TableSpec.from_mapping(values, "spec.yaml: table 0")


# ---- paired comparisons --------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def step_sweep(synthetic_spacewalk18, tmp_path_factory):
    """A sweep of step-recognition runs on the synthetic test split: lfb_avg (weak) and lfb_cat (strong) at 5 min
    with seeds 0, 1, 2; lfb_avg at 1 min seed 0; lfb_cat at 1 min failed (no metrics.json)."""
    from spacewalk.benchmarks.spacewalk18.evaluation import evaluate_step_recognition
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18

    root = synthetic_spacewalk18()
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.open.open_spacewalk18", "root": str(root),
            "synthetic_root": None, "seed": 0, "synthetic": {}}
    dataset = open_spacewalk18(root)
    sweep = tmp_path_factory.mktemp("steps") / "sweep"
    jobs = [("lfb_avg", "5min", s, 0.5) for s in range(3)] + [("lfb_cat", "5min", s, 1.5) for s in range(3)] + \
        [("lfb_avg", "1min", 0, 0.5), ("lfb_cat", "1min", 0, None)]
    for job, (model, context, seed, skill) in enumerate(jobs):
        run = write_run(sweep / str(job), [f"model={model}", f"context={context}", f"seed={seed}"], None,
                        provenance={"command": f"python train.py model={model} context={context} seed={seed}",
                                    "commit": "0123456789abcdef", "dirty": False})
        if skill is not None:
            resolved(run, "step_recognition", data, split="test", seed=seed)
            evaluate_step_recognition(dataset, Noisy(skill + 0.1 * seed, seed), "test", run, plots=False,
                                      bootstrap=OPTIONS)
    return sweep


COMPARISONS = """
- title: cat against avg
  where: {decoding: none}
  label_header: w
  a_header: "`lfb_avg`"
  b_header: "`lfb_cat`"
  resamples: 200
  compare:
    - {label: 5 min, a: {model: lfb_avg, context: 5min}, b: {model: lfb_cat, context: 5min}}
    - {label: 1 min, a: {model: lfb_avg, context: 1min}, b: {model: lfb_cat, context: 1min}}
    - {label: 3 min, a: {model: lfb_avg, context: 3min}, b: {model: lfb_cat, context: 3min}}
"""


def test_a_comparison_table_gives_compares_numbers_and_names_what_it_left_out(step_sweep, tmp_path):
    from spacewalk.results import compare
    from spacewalk.results.report.render import comparison_markdown
    from spacewalk.results.rescore import scored_run

    spec = tmp_path / "c.yaml"
    spec.write_text(COMPARISONS)
    [table] = build_report([step_sweep], load_specs(spec))
    assert table.header() == ["w", "metric", "`lfb_avg`", "`lfb_cat`", "`lfb_cat` - `lfb_avg`", "95 % interval", "p",
                              "detects", "claim"]
    # the same numbers as python -m spacewalk.compare --a (the three lfb_avg seeds) --b (the three lfb_cat seeds):
    # the recipes' claim (three seeds a side), whose p two recordings cannot give
    differences, _ = compare.compare([scored_run(step_sweep / str(j)) for j in (0, 1, 2)],
                                     [scored_run(step_sweep / str(j)) for j in (3, 4, 5)], OPTIONS)
    want = [["5 min", d.name, f"{d.a:.2f}", f"{d.b:.2f}", f"{d.difference:+.2f}",
             f"[{c.low:+.2f}, {c.high:+.2f}]", "none (2 recordings)", "-", "recipes"]
            for d in differences for c in [d.claims[compare.RECIPES]]]
    assert table.rows() == want and [r[1] for r in want] == ["Accuracy", "mAP", "IoU"]
    assert float(want[0][4]) > 0  # the stronger scores are found stronger
    assert (compare.p_text(1 / 1001), compare.p_text(0.0123), compare.p_text(1 / 10001)) == (
        "0.001", "0.012", "1.0e-04")
    text = comparison_markdown(table)
    sides = [" ".join(str(step_sweep / str(j)) for j in js) for js in ((0, 1, 2), (3, 4, 5))]
    assert ("# 5 min: A seeds 0, 1, 2, B seeds 0, 1, 2 (commit 0123456789ab; commit 0123456789ab)\n"
            f"python -m spacewalk.compare --a {sides[0]} --b {sides[1]} --resamples 200\n") in text
    # a comparison whose runs are not there (or not finished) is named, never a crash
    assert ("Left out, no runs yet: 1 min: no finished run for B (model=lfb_cat, context=1min); 3 min: no finished "
            "run for A (model=lfb_avg, context=3min) nor B (model=lfb_cat, context=3min)") in text
    assert f"Left out, no metrics.json (failed, or still running): {step_sweep / '7'}" in text


def test_a_comparison_side_of_two_settings_is_refused_naming_them(step_sweep, tmp_path):
    spec = tmp_path / "c.yaml"
    spec.write_text("- {title: T, compare: [{label: all, a: {model: lfb_avg}, b: {model: lfb_cat}}]}\n")
    with pytest.raises(ConfigError, match=r"table 'T', comparison 'all': side A matches 2 settings, not one: "
                                          r"model=lfb_avg context=5min \(.*/0\); model=lfb_avg context=1min"):
        build_report([step_sweep], load_specs(spec))


def test_verify_and_check_name_a_drifted_comparison(step_sweep, tmp_path, capsys):
    import shutil

    sweep = tmp_path / "sweep"
    shutil.copytree(step_sweep, sweep)
    spec = tmp_path / "c.yaml"
    spec.write_text(COMPARISONS)
    doc = tmp_path / "results.md"
    doc.write_text('Text.\n\n<!-- spacewalk.report table="cat against avg" -->\n<!-- /spacewalk.report -->\n')
    assert main([str(sweep), "--spec", str(spec), "--update", str(doc)]) == 0
    made = doc.read_text()
    assert ("| w | metric | `lfb_avg` | `lfb_cat` | `lfb_cat` - `lfb_avg` | 95 % interval | p | detects | claim |"
            in made)
    assert main([str(sweep), "--spec", str(spec), "--verify", str(doc), "--check"]) == 0
    capsys.readouterr()
    line = next(x for x in made.splitlines() if x.startswith("| 5 min | mAP |"))
    typed = line.replace(line.split(" | ")[4], "+9.99")
    doc.write_text(made.replace(line, typed))
    assert main([str(sweep), "--spec", str(spec), "--verify", str(doc)]) == 1
    assert f"table 'cat against avg': the document has\n    {typed}\n  its runs give\n    {line}" in \
        capsys.readouterr().out
    # a run whose metrics.json no longer follows from its predictions: its comparison's rows are flagged
    metrics = json.loads((sweep / "4" / "metrics.json").read_text())
    metrics["Accuracy"] += 1
    metrics["intervals"]["Accuracy"]["estimate"] += 1
    (sweep / "4" / "metrics.json").write_text(json.dumps(metrics))
    assert main([str(sweep), "--spec", str(spec), "--check"]) == 1
    out = capsys.readouterr().out
    assert all(" (!) |" in x for x in out.splitlines() if x.startswith("| 5 min |"))
    assert f"- {sweep / '4'}: Accuracy is {metrics['Accuracy']!r} in metrics.json, re-scored" in out


def test_a_comparison_side_of_decoded_predictions(synthetic_spacewalk18, tmp_path, capsys):
    """`predictions: decoded`: what the plan decoding adds to the same run (its raw predictions against those it
    decoded, <run>/decoded/<name>/), the decoded side held against metrics.json's decoded numbers under --check."""
    from spacewalk.benchmarks.spacewalk18.evaluation import evaluate_step_recognition
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18
    from spacewalk.results import compare
    from spacewalk.results.rescore import scored_run

    root = synthetic_spacewalk18()
    data = {"_target_": "spacewalk.benchmarks.spacewalk18.open.open_spacewalk18", "root": str(root),
            "synthetic_root": None, "seed": 0, "synthetic": {}}
    dataset = open_spacewalk18(root)
    run = write_run(tmp_path / "runs" / "0", ["model=lfb_cat", "context=5min", "decoding=within_window"], None)
    resolved(run, "step_recognition", data, split="test", seed=0)
    raw = evaluate_step_recognition(dataset, Noisy(0.5, 0), "test", run, plots=False, bootstrap=OPTIONS)
    decoded_dir = run / "decoded" / "within_window"  # a stand-in for the decoder: stronger scores
    decoded = evaluate_step_recognition(dataset, Noisy(1.5, 1), "test", decoded_dir, plots=False, bootstrap=OPTIONS)
    (decoded_dir / "config.resolved.yaml").unlink(missing_ok=True)  # decoded predictions take their run's config
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["decoded"] = {"decoding": "within_window", **{k: decoded[k] for k in ("Accuracy", "mAP", "IoU")}}
    (run / "metrics.json").write_text(json.dumps(metrics))
    spec = tmp_path / "c.yaml"
    spec.write_text("""
- title: decoded against raw
  resamples: 200
  compare:
    - {label: lfb_cat, a: {model: lfb_cat, decoding: within_window},
       b: {model: lfb_cat, decoding: within_window, predictions: decoded}}
""")
    [table] = build_report([tmp_path / "runs"], load_specs(spec))
    differences, _ = compare.compare([scored_run(run)], [scored_run(decoded_dir)], OPTIONS)
    # one run a side on 2 recordings: the widest claim with a p is these recordings' samples (IoU: new recordings)
    want = []
    for d in differences:
        c = d.claim((compare.THESE_RECORDINGS, compare.NEW_RECORDINGS))
        p = compare.p_text(c.p) if c.p is not None else "none (2 recordings)"
        detects = "-" if c.detectable is None else f">= {c.detectable:.2f}"
        claim = "these recordings" if c.name == compare.THESE_RECORDINGS else "new recordings"
        want.append(["lfb_cat", d.name, f"{d.a:.2f}", f"{d.b:.2f}", f"{d.difference:+.2f}",
                     f"[{c.low:+.2f}, {c.high:+.2f}]", p, detects, claim])
    assert [r[-1] for r in table.rows()] == ["new recordings"] * 3  # `widest` with one run a side
    spec.write_text(spec.read_text().replace("  resamples: 200", "  resamples: 200\n  claim: samples"))
    [samples] = build_report([tmp_path / "runs"], load_specs(spec))
    assert samples.rows()[:2] == want[:2] and samples.rows()[2][5:] == ["-", "-", "-", "-"]  # IoU has no samples
    spec.write_text(spec.read_text().replace("  claim: samples\n", ""))
    assert [float(r[2]) for r in table.rows()][0] == round(raw["Accuracy"], 2) and float(table.rows()[0][4]) > 0
    assert main([str(tmp_path / "runs"), "--spec", str(spec), "--check"]) == 0
    assert f"--b {decoded_dir} --resamples 200" in capsys.readouterr().out
    metrics["decoded"]["Accuracy"] += 1  # the decoded numbers recorded no longer follow from the decoded predictions
    (run / "metrics.json").write_text(json.dumps(metrics))
    assert main([str(tmp_path / "runs"), "--spec", str(spec), "--check"]) == 1
    drifted = f"{run}: Accuracy is {metrics['decoded']['Accuracy']!r} in metrics.json, re-scored"
    assert drifted in capsys.readouterr().out
    # a side of decoded predictions over runs that did not decode is refused, saying what to add
    plain = write_run(tmp_path / "plain" / "0", ["model=lfb_cat"], None)
    resolved(plain, "step_recognition", data, split="test", seed=0)
    evaluate_step_recognition(dataset, Noisy(0.5, 0), "test", plain, plots=False, bootstrap=OPTIONS)
    spec.write_text("- {title: T, compare: [{label: x, a: {model: lfb_cat}, b: {model: lfb_cat, predictions: "
                    "decoded}}]}\n")
    with pytest.raises(ConfigError, match="needs runs that decoded"):
        build_report([tmp_path / "plain"], load_specs(spec))


@pytest.mark.parametrize("values, message", [
    ({"compare": []}, "compare must be a non-empty list"),
    ({"compare": [{"label": "x", "a": {"model": "a"}}]}, r"compare\[0\] must be a mapping with label, a and b"),
    ({"compare": [{"label": "x", "a": {"m": 1}, "b": {"m": 2}}] * 2}, "two comparisons with one label"),
    ({"compare": [{"label": "x", "a": {"m": 1}, "b": {"m": 2}}], "resamples": 0}, "resamples 0: a positive integer"),
    ({"compare": [{"label": "x", "a": {"m": 1}, "b": {"m": 2}}], "seed": -1}, "seed -1: a non-negative integer"),
    ({"compare": [{"label": "x", "a": {"m": 1}, "b": {"m": 2}}], "claim": "all"}, "claim must be one of"),
    ({"compare": [{"label": "x", "a": {"m": 1}, "b": {"m": 2}}], "rows": ["model"]}, r"unknown keys \['rows'\]"),
    ({"compare": [{"label": "x", "a": {"m": 1}, "b": {"m": 1, "predictions": "raw"}}]},
     "predictions must be 'decoded'"),
])
def test_a_bad_comparison_spec_is_refused_naming_the_key(values, message):
    from spacewalk.results.report.spec import ComparisonSpec

    with pytest.raises(ConfigError, match=message):
        ComparisonSpec.from_mapping(values, "c.yaml: table 0")


SHIPPED_SPECS = Path(__file__).resolve().parents[2] / "docs" / "tables"


@pytest.mark.parametrize("name", sorted(p.name for p in SHIPPED_SPECS.glob("*.yaml")))
def test_the_shipped_specs_load(name):
    specs = load_specs(SHIPPED_SPECS / name)
    assert specs and all(s.title for s in specs)  # each has a block in docs/results.md by its title
