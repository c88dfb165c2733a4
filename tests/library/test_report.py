"""python -m spacewalk.report: tables from run directories, laid out by a spec, with intervals and commands."""

from __future__ import annotations

import csv
import io
import json
import sys
import types

import numpy as np
import pytest

from spacewalk.core.errors import ConfigError
from spacewalk.results.report.command import build_report, main
from spacewalk.results.report.spec import TableSpec, load_specs
from spacewalk.results.statistics import seeds_estimate

from helpers.run_dir_fakes import cell, step_metrics, write_run

SPEC = """
- title: Main
  metrics: [Accuracy, mAP, IoU]
  rows: [model, experiment]
  columns: [context]
  where: {decoding: none}
  row_header: recipe
  row_labels: {lfb_avg: "`lfb_avg`, ours"}
  column_labels: {1min: w = 1 min}
  column_label: "w = {}"
  row_order: [lfb_cat, lfb_nl, lfb_avg]
  quoted:
    - {label: Paper LFB Avg, after: lfb_avg, cells: {5min: 12.37 / 17.25 / 3.73}}
    - {label: Paper LFB NL, after: lfb_nl, cells: {5min: 10.70 / 17.28 / 3.01}}
    - {label: GPT-4o, cells: {1min: 15.47 / - / 6.36}}
"""


def sweep(tmp_path):
    """lfb_avg at 1 and 5 min with seeds 0, 1, 2; lfb_cat at 5 min seed 0; the paper variant; a decoded run and
    a failed job that the table leaves out or names."""
    root = tmp_path / "sweep"
    job = 0
    for context, seeds in (("1min", (0, 1, 2)), ("5min", (0, 1, 2))):
        for seed in seeds:
            write_run(root / str(job), ["model=lfb_avg", f"context={context}", f"seed={seed}"],
                      step_metrics(10.0 + seed + (5 if context == "5min" else 0), 20.0, 5.0),
                      provenance={"command": f"python train.py model=lfb_avg context={context} seed={seed}",
                                  "commit": "0123456789abcdef", "dirty": False})
            job += 1
    write_run(root / str(job), ["model=lfb_cat", "context=5min"], step_metrics(19.13, 18.85, 6.8))
    write_run(root / str(job + 1), ["experiment=paper_lfb_cat", "context=5min"], step_metrics(8.62, 10.0, 3.11),
              model="lfb_cat", experiment="paper_lfb_cat")
    write_run(root / str(job + 2), ["model=lfb_cat", "context=1min", "decoding=within_window"],
              step_metrics(1, 2, 3))
    write_run(root / str(job + 3), ["model=lfb_cat", "context=1min"], None)  # failed
    return root


def seeds(*numbers: float) -> list[list[float]]:
    """Each seed's per-recording values of a fake step-recognition run (run_dir_fakes.step_metrics)."""
    return [[x - 1, x, x + 1] for x in numbers]


LFB_AVG_1MIN = " / ".join([cell(seeds(10, 11, 12)), cell(seeds(20, 20, 20)), cell(seeds(5, 5, 5))])
LFB_AVG_5MIN = " / ".join([cell(seeds(15, 16, 17)), cell(seeds(20, 20, 20)), cell(seeds(5, 5, 5))])


def test_the_spec_lays_out_rows_columns_seeds_intervals_and_commands(tmp_path):
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(SPEC)
    [table] = build_report([sweep(tmp_path)], load_specs(spec_file))
    assert table.row_keys == ["lfb_cat", "lfb_avg", "lfb_cat, paper_lfb_cat"]
    assert table.column_keys == ["1min", "5min"]  # durations by length
    rows = {label: cells for label, cells, _ in table.layout()}
    # a quoted row follows its row, or that row's place in row_order when no run fills it (lfb_nl)
    assert list(rows) == ["lfb_cat", "Paper LFB NL", "`lfb_avg`, ours", "Paper LFB Avg", "lfb_cat, paper_lfb_cat",
                          "GPT-4o"]
    # three seeds: mean ± std [the interval over recordings and seeds]; one run: value [its t interval]
    assert rows["`lfb_avg`, ours"] == [LFB_AVG_1MIN, LFB_AVG_5MIN]
    assert rows["`lfb_avg`, ours"][0].startswith("11.00 ± 1.00 [")
    assert rows["lfb_cat"] == ["-", " / ".join([cell(seeds(19.13)), cell(seeds(18.85)), cell(seeds(6.8))])]
    assert rows["Paper LFB Avg"] == ["-", "12.37 / 17.25 / 3.73"]

    from spacewalk.results.report.render import report_markdown, table_markdown

    text = table_markdown(table)
    assert "| recipe | w = 1 min | w = 5min |" in text
    assert "| Paper LFB Avg (quoted) | - | 12.37 / 17.25 / 3.73 |" in text
    # one block of commands: the two lfb_avg cells are one multirun over both windows
    assert ("```bash\n# lfb_cat: w = 5min (seed 0; commit not recorded)\npython train.py model=lfb_cat context=5min\n"
            "# `lfb_avg`, ours: w = 1 min, w = 5min (seeds 0, 1, 2; commit 0123456789ab)\n"
            "python train.py -m model=lfb_avg context=1min,5min seed=0,1,2\n") in text
    assert f"Left out, no metrics.json (failed, or still running): {tmp_path / 'sweep' / '9'}" in text
    assert report_markdown([table], "python -m spacewalk.report X").startswith(
        "<!-- made by `python -m spacewalk.report X`")


def test_placeholders_stand_for_the_machines_folders(tmp_path):
    from spacewalk.results.report.render import Placeholders, table_markdown

    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(SPEC)
    [table] = build_report([sweep(tmp_path)], load_specs(spec_file))
    text = table_markdown(table, Placeholders.parse([f"RUNS={tmp_path}"]))
    assert str(tmp_path) not in text and "Left out, no metrics.json (failed, or still running): RUNS/sweep/9" in text
    # a folder that only begins like it is left alone
    assert Placeholders.parse(["R=/data/sw18"])("root=/data/sw18 a=/data/sw18/x b=/data/sw180") == \
        "root=R a=R/x b=/data/sw180"
    with pytest.raises(ConfigError, match="expected NAME=/absolute/folder"):
        Placeholders.parse(["RUNS=relative/path"])


def test_two_settings_in_one_cell_are_refused_naming_them(tmp_path):
    root = sweep(tmp_path)
    spec = TableSpec.from_mapping({"rows": ["model"], "columns": ["context"]}, "test")  # no `where`
    with pytest.raises(ConfigError, match=r"test: two settings in the cell \(lfb_cat, 5min\): "
                                          r"model=lfb_cat context=5min \(.*/6\) and experiment=paper_lfb_cat "
                                          r"context=5min \(.*/7\); add a key"):
        build_report([root], [spec])


@pytest.mark.parametrize("values, message", [
    ({"rows": ["model"], "colour": "red"}, r"unknown keys \['colour'\]"),
    ({"metrics": []}, "metrics must be a non-empty list"),
    ({"rows": ["seed"]}, "seed cannot be a row or column key"),
    ({"quoted": [{"cells": {}}]}, r"quoted\[0\] must be a mapping with label"),
    ({"digits": -1}, "digits must be a non-negative integer"),
    (["model"], "a table spec must be a mapping"),
])
def test_a_bad_spec_is_refused_naming_the_key(values, message):
    with pytest.raises(ConfigError, match=message):
        TableSpec.from_mapping(values, "spec.yaml: table 0")


def test_the_command_writes_markdown_and_csv(tmp_path, capsys):
    root = sweep(tmp_path)
    assert main([str(root), "--csv", str(tmp_path / "t.csv"), "--markdown", str(tmp_path / "t.md"),
                 "--metrics", "Accuracy,best_val_loss", "--title", "T", "--rows", "model,experiment,decoding"]) == 0
    text = (tmp_path / "t.md").read_text()
    assert text.startswith(f"<!-- made by `python -m spacewalk.report {root} --csv") and "### T" in text
    rows = list(csv.DictReader(io.StringIO((tmp_path / "t.csv").read_text())))
    row = next(r for r in rows if r["row"] == "lfb_avg, none" and r["column"] == "5min"
               and r["metric"] == "Accuracy")
    made = seeds_estimate(np.array(seeds(15, 16, 17)), 0.95, bounds=(0.0, 100.0))
    assert (row["n_seeds"], row["value"], row["std"], row["low"], row["high"], row["seeds"], row["claim"]) == (
        "3", "16.0", "1.0", str(made.low), str(made.high), "0 1 2", "over recordings and seeds")
    assert row["command"] == "python train.py -m model=lfb_avg context=5min seed=0,1,2"
    assert row["commits"] == "0123456789abcdef" and row["values"] == "15.0 16.0 17.0"
    assert row["runs"] == " ".join(str(root / str(j)) for j in (3, 4, 5))
    loss = next(r for r in rows if r["metric"] == "best_val_loss" and r["row"] == "lfb_avg, none")
    assert (loss["n_seeds"], loss["value"], loss["low"]) == ("3", "2.5", "")  # a number without an interval


def test_a_user_error_ends_the_command_with_its_message(tmp_path, capsys):
    with pytest.raises(SystemExit) as ended:
        main([str(tmp_path / "nowhere")])
    assert ended.value.code == 2 and "nowhere: no such directory" in capsys.readouterr().err


def test_check_flags_a_cell_whose_run_no_longer_rescores(tmp_path, monkeypatch, capsys):
    root = sweep(tmp_path)
    stale = root / "4"  # lfb_avg, 5min, seed 1: its metrics.json says 16.0

    def rescore_run(run_dir):
        return {"Accuracy": 99.0 if run_dir == stale else json.loads((run_dir / "metrics.json").read_text())[
            "Accuracy"], "mAP": {"estimate": 20.0}, "IoU": 5.0}

    # the hook: spacewalk.results.rescore.rescore_run, imported only under --check
    monkeypatch.setitem(sys.modules, "spacewalk.results.rescore", types.SimpleNamespace(rescore_run=rescore_run))
    code = main([str(root), "--check", "--rows", "model,experiment,decoding", "--columns", "context"])
    out = capsys.readouterr().out
    assert code == 1
    assert f"| lfb_avg, none | {LFB_AVG_1MIN} | {LFB_AVG_5MIN} (!) |" in out
    assert f"- {stale}: Accuracy is 16.0 in metrics.json, re-scored 99.0" in out
    monkeypatch.setitem(sys.modules, "spacewalk.results.rescore", types.SimpleNamespace(
        rescore_run=lambda run_dir: json.loads((run_dir / "metrics.json").read_text())))
    assert main([str(root), "--check", "--rows", "model,experiment,decoding"]) == 0


def test_check_rescores_the_decoded_numbers_from_the_decoded_predictions(tmp_path, monkeypatch, capsys):
    run = write_run(tmp_path / "run", ["model=lfb_cat", "context=5min", "decoding=within_window"],
                    step_metrics(19.0, 18.0, 6.0, decoded={"decoding": "within_window", "Accuracy": 19.5,
                                                           "mAP": 25.0, "IoU": 6.5}))
    (run / "decoded" / "within_window").mkdir(parents=True)
    decoded = {"Accuracy": 19.5, "mAP": 25.0, "IoU": 6.5}

    def rescore_run(run_dir):
        return decoded if run_dir.name == "within_window" else {"Accuracy": 19.0, "mAP": 18.0, "IoU": 6.0}

    monkeypatch.setitem(sys.modules, "spacewalk.results.rescore", types.SimpleNamespace(rescore_run=rescore_run))
    flags = ["--metrics", "decoded/Accuracy,decoded/mAP,decoded/IoU", "--check"]
    assert main([str(run), *flags]) == 0
    decoded["mAP"] = 24.0  # the decoded predictions no longer give the recorded mAP
    assert main([str(run), *flags]) == 1
    assert f"{run}: decoded/mAP is 25.0 in metrics.json, re-scored 24.0" in capsys.readouterr().out


def test_check_without_the_rescoring_module_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "spacewalk.results.rescore", None)  # importing it raises ImportError
    with pytest.raises(SystemExit) as ended:
        main([str(sweep(tmp_path)), "--check", "--rows", "model,experiment,decoding"])
    assert ended.value.code == 2 and "--check needs spacewalk.results.rescore.rescore_run" in capsys.readouterr().err


def test_the_same_table_goes_to_wandb_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    root = sweep(tmp_path)
    assert main([str(root), "--rows", "model,experiment,decoding", "--wandb", "--wandb-dir", str(tmp_path / "w"),
                 "--markdown", str(tmp_path / "t.md")]) == 0
    [run] = list((tmp_path / "w" / "wandb").glob("offline-run-*"))
    [table_file] = list(run.glob("files/media/table/report/table_0_*.table.json"))
    logged = json.loads(table_file.read_text())
    assert logged["columns"] == ["model, experiment, decoding", "1min", "5min"]
    assert ["lfb_avg, none", LFB_AVG_1MIN, LFB_AVG_5MIN] in logged["data"]
    assert list(run.glob("files/media/table/report/cells_*.table.json"))


def test_update_replaces_each_tables_block_of_a_document(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    doc = tmp_path / "results.md"
    doc.write_text('# Results\n\n## Main\n\nText before.\n\n<!-- spacewalk.report table="Main" -->\nold | table\n'
                   "<!-- /spacewalk.report -->\n\nText after.\n")
    root = sweep(tmp_path)
    assert main([str(root), "--spec", str(spec), "--update", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Results\n\n## Main\n\nText before.\n\n<!-- spacewalk.report table=\"Main\" -->\n"
                           "<!-- made by `python -m spacewalk.report")
    assert "old | table" not in text and "### Main" not in text and text.endswith("<!-- /spacewalk.report -->\n\n"
                                                                                  "Text after.\n")
    assert f"| `lfb_avg`, ours | {LFB_AVG_1MIN} |" in text
    assert main([str(root), "--spec", str(spec), "--update", str(doc)]) == 0 and doc.read_text() == text  # again
    doc.write_text("# Results\n")
    with pytest.raises(SystemExit):
        main([str(root), "--spec", str(spec), "--update", str(doc)])
    assert f"{doc}: no block for the table 'Main': put the lines" in capsys.readouterr().err


def test_verify_names_each_row_of_a_document_that_its_runs_no_longer_give(tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    doc = tmp_path / "results.md"
    doc.write_text('# Results\n\n<!-- spacewalk.report table="Main" -->\n<!-- /spacewalk.report -->\n')
    root = sweep(tmp_path)
    assert main([str(root), "--spec", str(spec), "--update", str(doc)]) == 0
    made = doc.read_text()
    assert main([str(root), "--spec", str(spec), "--verify", str(doc)]) == 0
    assert "every table row matches its runs" in capsys.readouterr().err
    doc.write_text(made.replace("| `lfb_avg`, ours | 11.00 ± 1.00", "| `lfb_avg`, ours | 12.00 ± 1.00"))
    assert main([str(root), "--spec", str(spec), "--verify", str(doc)]) == 1
    out, err = capsys.readouterr()
    assert "table 'Main': the document has\n    | `lfb_avg`, ours | 12.00 ± 1.00" in out
    assert "its runs give\n    | `lfb_avg`, ours | 11.00 ± 1.00" in out and "1 table rows differ" in err
    assert doc.read_text() == made.replace("| `lfb_avg`, ours | 11.00", "| `lfb_avg`, ours | 12.00")  # untouched
