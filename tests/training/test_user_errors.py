"""Each kind of user error, run as the user runs the command: its message alone on stderr (naming the value, file,
item or field), exit code 2, no traceback. All are refused before any data is read or written, so each command
takes seconds."""

from __future__ import annotations

import json

import pytest

from conftest import run_command

TORN_RECORDS = [{"item_id": "0", "prompt": "Which step?", "reply": "A", "choice": 0, "correct": True, "scores": None,
                 "meta": {}}]


def hydra_dirs(tmp_path) -> list[str]:
    return [f"hydra.run.dir={tmp_path / 'run'}", f"paths.data_dir={tmp_path / 'data'}"]


def torn_run(tmp_path) -> str:
    """A multiple-choice run directory whose records.jsonl was cut inside its first line and appended to after."""
    run_dir = tmp_path / "mc_run"
    run_dir.mkdir()
    line = json.dumps(TORN_RECORDS[0])
    (run_dir / "records.jsonl").write_text(line[:30] + "\n" + line + "\n")
    return str(run_dir)


CASES = {
    # a config value that cannot be read, and one that reads as an empty window
    "bad_context": (lambda t: ["train.py", "context=7x", *hydra_dirs(t)],
                    ["context=7x", "cannot read a duration from '7x'"]),
    "empty_context": (lambda t: ["evaluate.py", "context=0s", *hydra_dirs(t)], ["context=0s", "longer than 0 s"]),
    # a value read by a config resolver (bank_folder), checked before anything resolves it
    "bad_modalities": (lambda t: ["train.py", "modalities=audio", *hydra_dirs(t)],
                       ["modalities must be one of", "'audio'"]),
    "refused_pair": (lambda t: ["train.py", "task=intra_video_retrieval", "model=lfb_cat", *hydra_dirs(t)],
                     ["model=lfb_cat does not fit task=intra_video_retrieval", "ivr_zero_shot"]),
    # raised inside Hydra's instantiate of the data config, which wraps it
    "missing_dataset_root": (lambda t: ["evaluate.py", f"data.root={t / 'missing'}", *hydra_dirs(t)],
                             ["missing: dataset root not found"]),
    "torn_records": (lambda t: ["-m", "spacewalk.multiple_choice.records", torn_run(t)],
                     ["records.jsonl: line 1 is not JSON"]),
    "score_missing_root": (lambda t: ["-m", "spacewalk.score", "--root", t / "missing", "--split", "test",
                                      "--predictions", t / "predictions.json"],
                           ["missing: dataset root not found"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_user_error_prints_its_message_alone(case, tmp_path):
    command, expected = CASES[case]
    result = run_command(*command(tmp_path), check=False, timeout=180)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and all(text in last for text in expected), last
    assert not (tmp_path / "data").exists()  # refused before anything was generated or read
