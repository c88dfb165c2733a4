"""Bad input to the results tools (python -m spacewalk.report, compare, power, the sweep summary), as a new user gives
it: each case ends in one `error:` line naming the file, the run or the key, exit code 2, no traceback, and a
document is never changed unless every block to write is found whole; nothing is counted twice; a NaN is flagged,
never averaged away."""

from __future__ import annotations

import json
import math

import pytest

from spacewalk.results import compare, power
from spacewalk.results.report import command as report

from helpers.run_dir_fakes import cell, step_metrics, write_run

SPEC = """
- title: Main
  metrics: [Accuracy, mAP, IoU]
  rows: [model]
  columns: [context]
"""


def refused(main, args, capsys, *fragments: str) -> str:
    """Run a command's main: it must end with exit code 2 and one `error:` line holding every fragment."""
    with pytest.raises(SystemExit) as ended:
        main([str(a) for a in args])
    err = capsys.readouterr().err.strip()
    assert ended.value.code == 2, err
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


@pytest.fixture
def sweep(tmp_path):
    """lfb_avg and lfb_cat at 5 min, seeds 0 and 1 each."""
    root = tmp_path / "sweep"
    for job, (model, seed) in enumerate((("lfb_avg", 0), ("lfb_avg", 1), ("lfb_cat", 0), ("lfb_cat", 1))):
        write_run(root / str(job), [f"model={model}", "context=5min", f"seed={seed}"],
                  step_metrics(10.0 + job, 20.0, 5.0))
    return root


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


# ---- documents -----------------------------------------------------------------------------------------------------

def test_a_block_that_lost_its_end_marker_changes_nothing(sweep, spec, tmp_path, capsys):
    doc = tmp_path / "results.md"
    text = ('# Results\n\n<!-- spacewalk.report table="Main" -->\nold table\n\n## A heading\n\nProse the author '
            'wrote.\n\n<!-- spacewalk.report table="Other" -->\nx\n<!-- /spacewalk.report -->\n')
    doc.write_text(text)
    refused(report.main, [sweep, "--spec", spec, "--update", doc], capsys, str(doc), "line 3",
            "the block 'Main' has no end marker", "(line 10)", "nothing was written")
    assert doc.read_text() == text
    doc.write_text(text := "# Results\n\nprose\n<!-- /spacewalk.report -->\n")  # an end without its start
    refused(report.main, [sweep, "--spec", spec, "--update", doc], capsys, "line 4: an end marker")
    assert doc.read_text() == text
    doc.write_text(text := '<!-- spacewalk.report table="Main" -->\nlast block, no end\n')  # at the end of the file
    refused(report.main, [sweep, "--spec", spec, "--update", doc], capsys, "before the end of the file")
    assert doc.read_text() == text


def test_a_document_repeating_a_block_is_refused_by_verify_and_update(sweep, spec, tmp_path, capsys):
    doc = tmp_path / "results.md"
    doc.write_text('<!-- spacewalk.report table="Main" -->\n<!-- /spacewalk.report -->\n')
    assert report.main([str(sweep), "--spec", str(spec), "--update", str(doc)]) == 0
    made = doc.read_text()
    stale = made.replace("| lfb_avg |", "| lfb_avg (typed) |")  # a stale copy of the block further down
    doc.write_text(made + "\nMore text.\n\n" + stale)
    refused(report.main, [sweep, "--spec", spec, "--verify", doc], capsys, "the block 'Main' appears twice")
    refused(report.main, [sweep, "--spec", spec, "--update", doc], capsys, "appears twice")


def test_markdown_never_overwrites_a_document(sweep, tmp_path, capsys):
    doc = tmp_path / "results.md"
    doc.write_text("# Results written by hand\n")
    refused(report.main, [sweep, "--markdown", doc], capsys, str(doc), "was not written by the report",
            "--update")
    assert doc.read_text() == "# Results written by hand\n"
    out = tmp_path / "t.md"  # a file the report made may be made again
    assert report.main([str(sweep), "--markdown", str(out)]) == 0 and report.main([str(sweep), "--markdown",
                                                                                   str(out)]) == 0


@pytest.mark.parametrize("flag", ["--update", "--verify", "--markdown", "--csv", "--spec"])
def test_a_folder_where_a_file_is_expected_is_named(sweep, tmp_path, capsys, flag):
    folder = tmp_path / "folder"
    folder.mkdir()
    refused(report.main, [sweep, flag, folder], capsys, str(folder), "a folder, where")


def test_two_tables_with_one_title_are_refused(sweep, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC + SPEC)
    refused(report.main, [sweep, "--spec", spec], capsys, str(spec), "tables 0 and 1 have one title, 'Main'")


# ---- nothing counted twice -----------------------------------------------------------------------------------------

def test_a_sweep_given_with_one_of_its_runs_counts_nothing_twice(sweep, tmp_path, capsys):
    refused(report.main, [sweep, sweep / "1"], capsys, f"{sweep / '1'}: this run is given itself and inside")
    refused(compare.main, ["--a", sweep, sweep / "0", "--b", sweep / "2"], capsys, "given itself and inside")
    refused(power.main, [sweep / "0", sweep / "0"], capsys, "this run is given twice")


# ---- NaN: flagged, never averaged away ---------------------------------------------------------------------------

def test_an_undefined_number_is_flagged_in_its_cell(sweep, capsys):
    metrics = json.loads((sweep / "1" / "metrics.json").read_text())
    metrics["mAP"] = metrics["intervals"]["mAP"]["estimate"] = math.nan
    (sweep / "1" / "metrics.json").write_text(json.dumps(metrics))  # Python's json writes NaN
    assert report.main([str(sweep), "--rows", "model"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| lfb_avg |"))
    assert "undefined in 1 of 2 runs" in row and row.endswith(" (!) |")  # not seed 0's 20.00
    assert f"- mAP is undefined (NaN) in {sweep / '1'}" in out


def test_a_number_missing_from_some_seeds_is_flagged(sweep, capsys):
    metrics = json.loads((sweep / "3" / "metrics.json").read_text())
    del metrics["intervals"]["IoU"], metrics["IoU"]
    (sweep / "3" / "metrics.json").write_text(json.dumps(metrics))
    assert report.main([str(sweep), "--rows", "model"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| lfb_cat |"))
    assert f"{cell([[4.0, 5.0, 6.0]])} (1 of 2 runs) (!) |" in row
    assert f"IoU is missing from {sweep / '3'}: the cell is over the other 1 run" in out


# ---- misspelt keys and numbers --------------------------------------------------------------------------------------

def test_a_misspelt_metric_or_key_is_refused_naming_it(sweep, tmp_path, capsys):
    refused(report.main, [sweep, "--metrics", "Acuracy"], capsys, "no run has the number 'Acuracy'",
            "they have Accuracy, mAP, IoU")
    refused(report.main, [sweep, "--rows", "modle"], capsys, "rows/columns: no run has the config key 'modle'")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("  columns: [context]", "  columns: [context]\n  where: {decodng: none}"))
    refused(report.main, [sweep, "--spec", spec], capsys, "table 'Main': where: no run has the config key 'decodng'")
    spec.write_text("- {title: C, compare: [{label: x, a: {modle: lfb_avg}, b: {model: lfb_cat}}]}\n")
    refused(report.main, [sweep, "--spec", spec], capsys, "its sides' keys: no run has the config key 'modle'")
    refused(compare.main, ["--a", sweep, "--a-where", "modle=lfb_avg", "--b", sweep / "2"], capsys,
            "--a-where: no run has the config key 'modle'")
    refused(compare.main, ["--a", sweep, "--a-where", "model", "--b", sweep / "2"], capsys,
            "--a-where model: expected KEY=VALUE")


def test_a_side_of_two_settings_is_refused(sweep, capsys):
    refused(compare.main, ["--a", sweep, "--b", sweep / "2"], capsys, "side A: the runs hold 2 settings, not one",
            "--a-where KEY=VALUE")


# ---- runs that a table cannot place -----------------------------------------------------------------------------

def test_a_run_without_hydras_record_is_not_labelled_with_a_dict(tmp_path, capsys):
    run = tmp_path / "bare"
    run.mkdir()
    (run / "config.resolved.yaml").write_text("model: {_target_: models.Fake, temperature: 0.1}\ncontext: 5min\n"
                                              "data: {_target_: spacewalk.benchmarks.spacewalk18.open.open_spacewalk18}"
                                              "\ntask: {name: step_recognition}\n")
    (run / "metrics.json").write_text(json.dumps(step_metrics(1.0, 2.0, 3.0)))
    refused(report.main, [run], capsys, f"{run}: model is a config section here, not a value")
    assert report.main([str(run), "--rows", "model.temperature"]) == 0  # a value of it can name the run


def test_a_multiple_choice_run_never_lands_in_a_step_recognition_table(sweep, capsys):
    qa = write_run(sweep.parent / "qa" / "0", ["data=spacewalk18_qa", "model=random"],
                   {"Accuracy": 25.0, "intervals": {"Accuracy": {"estimate": 25.0, "low": 20.0, "high": 30.0,
                                                                 "level": 0.95, "unit": "questions", "n": 376}}},
                   entry="evaluate", task="multiple_choice", data="spacewalk18_qa",
                   config={"data": {"_target_": "spacewalk.benchmarks.spacewalk18.question_answering."
                                                "question_answering_task"}})
    refused(report.main, [sweep, qa.parent, "--metrics", "Accuracy"], capsys, "its runs are of 2 tasks",
            "spacewalk18 step_recognition", "spacewalk18 question_answering", "add a `where`")
    assert report.main([str(qa.parent), "--metrics", "Accuracy", "--columns", "data"]) == 0  # on its own: a table


# ---- torn files and bad arguments ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, content, fragment", [
    ("provenance.json", '{"command": "python tr', "provenance.json: not valid JSON"),
    (".hydra/hydra.yaml", "hydra: [torn\n", "hydra.yaml: not valid YAML"),
    (".hydra/overrides.yaml", "{a: 1}\n", "overrides.yaml: expected a list of overrides"),
    ("metrics.json", "{", "metrics.json: not valid JSON"),
    ("metrics.json", '{"version": 7}', "metrics.json: field 'version'"),
])
def test_a_torn_run_file_is_named_by_every_tool(sweep, capsys, name, content, fragment):
    (sweep / "1" / name).write_text(content)
    refused(report.main, [sweep], capsys, str(sweep / "1"), fragment)
    refused(compare.main, ["--a", sweep / "1", "--b", sweep / "2"], capsys, fragment)


@pytest.mark.parametrize("args, fragment", [
    (["--seed", "-1"], "--seed -1: a non-negative integer"),
    (["--resamples", "0"], "--resamples 0: a positive integer"),
    (["--level", "1.5"], "--level 1.5: a number between 0 and 1"),
])
def test_bad_numbers_for_compare_are_named(sweep, capsys, args, fragment):
    refused(compare.main, [sweep / "0", sweep / "2", *args], capsys, fragment)


def test_bad_arguments_for_power_and_the_report_are_named(sweep, tmp_path, capsys):
    refused(power.main, [sweep / "0", "--seed", "-3"], capsys, "--seed -3: a non-negative integer")
    refused(power.main, [sweep / "0", "--alpha", "2"], capsys, "--alpha 2.0: a number between 0 and 1")
    refused(report.main, [sweep, "--placeholder", "RUNS"], capsys, "--placeholder RUNS: expected NAME=/absolute")
    folder = tmp_path / "out.json"
    folder.mkdir()
    refused(compare.main, [sweep / "0", sweep / "2", "--json", folder], capsys, "a folder, where the JSON file")
