"""EgoSchema and EgoCross answered by tiny transformers video LLMs (spacewalk/multiple_choice/tiny_models.py:
random weights, written to a folder like any checkpoint, no download): `python evaluate.py data=egoschema|
egocross model=mc_<family> model.model=<folder>` as a user runs it, its files checked against
`python -m spacewalk.score` on the same predictions, and EgoCross's extracted frame lists through both
families' processors. The tiny models' replies are noise; what is tested is the path, not the accuracy."""

from __future__ import annotations

import json

import numpy as np
import pytest
from omegaconf import OmegaConf
from PIL import Image

from spacewalk.benchmarks.egocross.task import PREDICTIONS_FILE, open_egocross
from spacewalk.benchmarks.egoschema.dataset import read_questions
from spacewalk.multiple_choice import runner, tiny_models
from spacewalk.multiple_choice.backends import transformers_vlm
from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend
from spacewalk.score import main as score_main

from helpers.commands import REPO, run_command
from helpers.synthetic_presets import EGOCROSS_TINY_VIDEOS, EGOSCHEMA_TINY_VIDEOS, overrides


@pytest.fixture(scope="module")
def checkpoints(tiny_vlm_checkpoints):
    """Both tiny checkpoints, written by the command a user runs (the session's, tests/conftest.py)."""
    assert {p.name for p in tiny_vlm_checkpoints.iterdir()} == set(tiny_models.FAMILIES)  # no partial folder
    return tiny_vlm_checkpoints


def evaluate(*overrides: str) -> None:
    run_command("evaluate.py", *overrides, "multiple_choice.progress=false", env={"OMP_NUM_THREADS": "1"})


def scored(capsys, *argv: str) -> dict:
    capsys.readouterr()
    assert score_main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_evaluate_egoschema_with_a_tiny_qwen2_5_vl(checkpoints, tmp_path, capsys, synthetic_egoschema):
    out, data = tmp_path / "run", synthetic_egoschema(EGOSCHEMA_TINY_VIDEOS)
    evaluate("data=egoschema", f"data.synthetic_root={data}", "data.split=full",
             *overrides(EGOSCHEMA_TINY_VIDEOS),
             "model=mc_qwen2_5_vl", f"model.model={checkpoints / 'qwen2_5_vl'}", "model.num_frames=4",
             "model.max_new_tokens=6", "model.device=cpu", f"hydra.run.dir={out}")
    questions = read_questions(data / "questions.json")
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert [r["item_id"] for r in records] == [q.q_uid for q in questions]  # split=full: every question
    prompts = {r.item_id: r.prompt for r in runner.read_run(out)}  # the compact records, prompts read back
    assert all(isinstance(r["reply"], str) and prompts[r["item_id"]].endswith("given choices directly.")
               for r in records)
    # what the model saw, per item, and the run's frame rule and visual budget (spacewalk/multiple_choice/budget.py):
    # the config's (qwen-vl-utils' video defaults), whose min_pixels (128 tokens) enlarges the 32x32 frames to 336x336
    assert all(r["meta"]["visuals"] == [{"kind": "clip", "frames": 4, "size": [336, 336]}] for r in records)
    run = json.loads((out / "run.json").read_text())
    config = OmegaConf.load(REPO / "conf/model/mc_qwen2_5_vl.yaml")
    budget = {k: config[k] for k in ("max_pixels", "min_pixels", "max_total_pixels")}
    assert budget == {"max_pixels": 602112, "min_pixels": 100352, "max_total_pixels": 180633600}
    assert run["visual"] == {"frames": {"num_frames": 4, "fps": None, "max_frames": None}, **budget,
                             "rule": "spacewalk/multiple_choice/budget.py"}
    assert {k: run["model"][k] for k in budget} == budget  # the model config's settings, as given

    # both submission files: every question in questions.json order, the parsed choice or -1 (unparsable)
    expected = {r["item_id"]: -1 if r["choice"] is None else r["choice"] for r in records}
    assert json.loads((out / "submission.json").read_text()) == expected
    csv = (out / "submission.csv").read_text().splitlines()
    assert csv[0] == "q_uid,answer" and csv[1:] == [f"{k},{v}" for k, v in expected.items()]

    # metrics.json (the answered subset) is what the score command gives on either file, and on the raw replies
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["total"], metrics["items"]) == (EGOSCHEMA_TINY_VIDEOS["n_answered"],
                                                    EGOSCHEMA_TINY_VIDEOS["n_questions"])
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps({r["item_id"]: r["reply"] for r in records}))
    for predictions in (out / "submission.json", out / "submission.csv", replies):
        result = scored(capsys, "egoschema", "--root", str(data), "--predictions", str(predictions))
        assert result == {k: metrics[k] for k in result} and {"accuracy", "total", "unparsable"} <= set(result)


@pytest.mark.slow
def test_evaluate_egocross_with_a_tiny_llava_onevision(checkpoints, tmp_path, capsys, synthetic_egocross):
    out, data = tmp_path / "run", synthetic_egocross(EGOCROSS_TINY_VIDEOS)
    # the family's default frames (32 uniformly): every frame of these 3-5 frame folders, none twice
    evaluate("data=egocross", f"data.synthetic_root={data}",
             *overrides(EGOCROSS_TINY_VIDEOS),
             "model=mc_llava_onevision", f"model.model={checkpoints / 'llava_onevision'}", "model.max_new_tokens=6",
             "model.device=cpu", f"hydra.run.dir={out}")
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    n = len(records)
    assert n == 5 * 4  # five source datasets, one question of each of the four categories
    # the family's default, 32 frames, shows every frame of each folder, at the processor's size (28x28 here)
    frames = {item.id: len(item.visual.frames)
              for item in open_egocross(root=data, answers=data / "answers.json").items()}
    assert all(r["meta"]["visuals"] == [{"kind": "clip", "frames": frames[r["item_id"]], "size": [28, 28]}]
               for r in records)
    assert json.loads((out / "run.json").read_text())["visual"]["frames"]["num_frames"] == 32
    replies = json.loads((out / PREDICTIONS_FILE).read_text())
    assert replies == {r["item_id"]: r["reply"] for r in records}
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["total"] == n and metrics["unparsable"] == sum(r["choice"] is None for r in records)
    testbed = data / "datasets/egocross_testbed_imgs.json"
    result = scored(capsys, "egocross", "--task", "closeqa", "--data", str(testbed),
                    "--answers", str(data / "answers.json"), "--predictions", str(out / PREDICTIONS_FILE))
    # the score command prints the official numbers; the run's file adds their bootstrap intervals
    assert result == {k: v for k, v in metrics.items() if k not in ("intervals", "version")}  # version: layout.py
    assert metrics["intervals"]["accuracy"]["estimate"] == metrics["accuracy"]


@pytest.mark.parametrize("family, num_frames", [("qwen2_5_vl", None), ("llava_onevision", None),
                                                ("qwen2_5_vl", 3), ("llava_onevision", 2)])
def test_egocross_frame_folders_reach_both_processors(family, num_frames, tmp_path, monkeypatch, synthetic_egocross):
    """The frames handed to the processor are the item's own files, in order: all of them under the family's
    default rule (Qwen2.5-VL's 2 fps / 768 cap; LLaVA-OneVision's 32, more than a folder holds), uniformly
    thinned by position under a smaller num_frames, never one twice. Folders of different lengths share a
    batch (LLaVA-OneVision's processor stacks a batch's videos: the backend batches equal lengths)."""
    root = synthetic_egocross(EGOCROSS_TINY_VIDEOS)
    task = open_egocross(root=root, answers=root / "answers.json", limit=4)
    items = task.items()
    assert len({len(item.visual.frames) for item in items}) > 1
    model, processor = tiny_models.build(family)
    backend = TransformersVLMBackend(family, model_object=model, processor=processor, num_frames=num_frames,
                                     dtype="float32", device="cpu", max_new_tokens=2)
    shown = []
    sample = transformers_vlm.sample_frames
    monkeypatch.setattr(transformers_vlm, "sample_frames", lambda v, r: shown.append(sample(v, r)) or shown[-1])
    metrics = runner.run(task, backend, tmp_path / "run", chunk_size=4, progress=False)
    assert metrics["total"] == 4 and len(shown) == 4
    for item, (frames, times) in zip(items, shown):
        n = len(item.visual.frames)
        picks = {None: list(range(n)), 3: [0, 2, 4] if n == 5 else [0, 1, 2] if n == 3 else [0, 2, 3],
                 2: [1, 3] if n in (4, 5) else [0, 2]}[num_frames]
        files = [item.visual.frames[i] for i in picks]
        assert np.array_equal(frames, np.stack([np.asarray(Image.open(f).convert("RGB")) for f in files]))
        assert list(times) == [item.visual.frame_times[i] for i in picks]
    # one item alone gets the reply it got in the mixed batch (greedy, left padding, equal-length groups): logits
    # about 1e-7 apart, each chosen token 2e-4 or more ahead of the next (both measured), so rounding cannot flip it
    records = runner.read_records(tmp_path / "run" / runner.RECORDS)
    assert backend.answer(items[-1:], [task.prompt(items[-1])])[0].text == records[-1].reply
