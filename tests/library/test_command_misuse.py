"""Every `python -m spacewalk.*` command given what a new user gets wrong: a folder where a file is expected or the
reverse, a negative count, a missing folder, another kind of run. Each ends with exit code 2 and one `error:` line
naming the argument or the path, before any work, and writes nothing. The commands run in this process (their
`main`), so each case takes well under a second; tests/training/test_user_errors.py runs a few as subprocesses."""

from __future__ import annotations

import json

import pytest

from spacewalk import download, score
from spacewalk.benchmarks.egocross import synthetic as egocross_synthetic
from spacewalk.benchmarks.egoschema import synthetic as egoschema_synthetic
from spacewalk.benchmarks.hirest.synthetic import __main__ as hirest_synthetic
from spacewalk.benchmarks.spacewalk18.data import samples
from spacewalk.benchmarks.spacewalk18.questions import plan_reading, question_generator
from spacewalk.benchmarks.spacewalk18.synthetic import __main__ as spacewalk18_synthetic
from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_dir, load_json, write_json
from spacewalk.multiple_choice import records, tiny_models


def refused(main, argv, capsys) -> str:
    """Run `main(argv)`: it must exit with code 2 (some mains return it) and end stderr with one `error:` line;
    returns that line."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exit_:
        code = exit_.code
    assert code == 2, (main.__module__, argv, capsys.readouterr())
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: ") or ": error: argument " in last, err
    assert sum("error:" in line for line in err.splitlines()) == 1, err
    return last


@pytest.fixture
def places(tmp_path):
    """A folder, a file, and a path under the file (so a folder that cannot be made)."""
    folder = tmp_path / "folder"
    folder.mkdir()
    file = tmp_path / "file.json"
    file.write_text("{}")
    return folder, file, file / "below"


def cases(root, folder, file, below):
    """(command, argv, what the error line must name), for every command and each kind of wrong argument."""
    return [
        # a folder where a file is written
        (question_generator.main, ["--root", root, "--split", "val", "--out", folder], ["--out", str(folder),
                                                                                        "is a folder"]),
        (samples.main, ["--root", root, "--split", "val", "--out", folder], ["--out", "is a folder"]),
        (plan_reading.main, ["--root", root, "--questions", file, "--out", folder], ["--out", "is a folder"]),
        (score.main, ["--root", root, "--split", "val", "--predictions", file, "--output", folder],
         ["--output", "is a folder"]),
        # a file where a folder is read or written
        (download.main, ["spacewalk18", "--root", file], ["--root", str(file), "is a file"]),
        (tiny_models.main, ["--out", file], ["--out", "is a file"]),
        (spacewalk18_synthetic.main, ["--root", file], ["--root", "is a file"]),
        (egoschema_synthetic.main, ["--root", file], ["--root", "is a file"]),
        (egocross_synthetic.main, ["--root", file], ["--root", "is a file"]),
        (hirest_synthetic.main, ["--root", file], ["--root", "is a file"]),
        (samples.main, ["--root", file, "--split", "val", "--out", folder / "s.json"], [str(file), "is a file"]),
        (question_generator.main, ["--root", root, "--split", "val", "--out", below], ["--out", str(file),
                                                                                      "is a file"]),
        (tiny_models.main, ["--out", below], ["--out", str(file), "is a file"]),
        # a folder where a file is read
        (plan_reading.main, ["--root", root, "--questions", folder], ["--questions", "is a folder"]),
        (score.main, ["--root", root, "--split", "val", "--predictions", folder], [str(folder), "is a folder"]),
        # missing folders
        (samples.main, ["--root", folder / "missing", "--split", "val", "--out", folder / "s.json"],
         [str(folder / "missing"), "dataset root not found"]),
        (records.main, [folder / "missing"], ["run_dir", "folder not found"]),
        # counts
        (samples.main, ["--root", root, "--split", "val", "--out", folder / "s.json", "--per-video", "-5"],
         ["--per-video", "-5"]),
        (samples.main, ["--root", root, "--split", "val", "--out", folder / "s.json", "--per-video", "0",
                        "--task", "intra_video_retrieval"], ["--per-video", "0"]),
        (question_generator.main, ["--root", root, "--split", "val", "--out", folder / "q.json", "--when", "-3"],
         ["--when", "negative"]),
        (question_generator.main, ["--root", root, "--split", "val", "--out", folder / "q.json", "--order", "x"],
         ["--order", "not a whole number"]),
        # seeds numpy cannot take (a negative one failed inside, named as an annotation's fault)
        (spacewalk18_synthetic.main, ["--root", folder / "sw18", "--seed", "-1"], ["--seed", "-1: a seed is"]),
        (egoschema_synthetic.main, ["--root", folder / "es", "--seed", "-1"], ["--seed", "-1: a seed is"]),
        (egocross_synthetic.main, ["--root", folder / "ec", "--seed", "-1"], ["--seed", "-1: a seed is"]),
        (hirest_synthetic.main, ["--root", folder / "hr", "--seed", "-1"], ["--seed", "-1: a seed is"]),
        (samples.main, ["--root", root, "--split", "val", "--out", folder / "s.json", "--task",
                        "intra_video_retrieval", "--seed", "-1"], ["--seed", "-1: a seed is"]),
        # a split the release does not have (it read as a missing file)
        (score.main, ["--root", root, "--split", "bogus", "--predictions", file], ["--split", "invalid choice"]),
    ]


def test_every_command_refuses_a_wrong_argument_before_any_work(tiny_root, places, capsys):
    folder, file, below = places
    before = sorted(p.name for p in folder.parent.rglob("*"))
    for main, argv, named in cases(tiny_root, folder, file, below):
        line = refused(main, argv, capsys)
        assert all(text in line for text in named), (main.__module__, argv, line)
    assert sorted(p.name for p in folder.parent.rglob("*")) == before  # nothing written, not even a folder


def test_a_generator_given_an_existing_root_exits_2(tmp_path, capsys):
    root = tmp_path / "taken"
    root.mkdir()
    (root / "mine.txt").write_text("the user's")
    for main in (spacewalk18_synthetic.main, egoschema_synthetic.main, egocross_synthetic.main,
                 hirest_synthetic.main):
        assert "--overwrite" in refused(main, ["--root", root], capsys)
    assert [p.name for p in root.iterdir()] == ["mine.txt"]


def test_records_command_says_what_a_folder_holds_instead(tmp_path, capsys):
    step_run = tmp_path / "step_run"  # a step-recognition run: no records.jsonl
    step_run.mkdir()
    (step_run / "predictions.json").write_text("{}")
    (step_run / "metrics.json").write_text("{}")
    assert "not a multiple-choice run" in refused(records.main, [step_run], capsys)
    assert "predictions.json" in refused(records.main, [step_run], capsys)
    unfinished = tmp_path / "unfinished"
    unfinished.mkdir()
    (unfinished / "records.rank0.jsonl").write_text("")
    assert "has not finished" in refused(records.main, [unfinished], capsys)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert f"{empty}: no records.jsonl" in refused(records.main, [empty], capsys)
    assert "is a file" in refused(records.main, [step_run / "metrics.json"], capsys)


def test_records_command_names_an_unknown_item(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    line = {"item_id": "q1", "prompt": "Which?", "reply": "A", "choice": 0, "correct": True, "scores": None,
            "meta": {}}
    (run / "records.jsonl").write_text(json.dumps(line) + "\n")
    records.main([str(run), "q1"])
    assert "=== q1" in capsys.readouterr().out
    assert "no record of items ['q9']" in refused(records.main, [run, "q9"], capsys)


def test_files_and_folders_in_the_wrong_place_are_named_by_every_writer_and_reader(tmp_path):
    folder, file = tmp_path / "folder", tmp_path / "file"
    folder.mkdir()
    file.write_text("x")
    with pytest.raises(DataError, match=f"{folder}: is a folder, where a file is to be written"):
        write_json(folder, {})
    with pytest.raises(DataError, match=f"{file}: is a file, where a folder is needed \\(to hold {file / 'a'}\\)"):
        write_json(file / "a" / "b.json", {})
    with pytest.raises(DataError, match=f"{file}: is a file, where a folder is to be written"):
        with atomic_dir(file):
            pass
    with pytest.raises(DataError, match=f"{folder}: is a folder, not a file"):
        load_json(folder)
    assert file.read_text() == "x" and list(folder.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder"]  # no temporary left
