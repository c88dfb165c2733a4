"""HiREST end to end through train.py / evaluate.py on a tiny synthetic HiREST (real MiniLM, offline)."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from helpers.commands import compose_train, run_command

pytestmark = pytest.mark.slow

TINY_DATA = ["+data.synthetic.n_train=6", "+data.synthetic.n_val=3", "+data.synthetic.n_test=3",
             "+data.synthetic.n_distractors=3", "data.synthetic.seconds=[20,30]"]
TINY_MODEL = ["hirest_scale.embed_dim=32", "hirest_scale.hidden_dim=32", "hirest_scale.num_heads=2",
              "hirest_scale.ffn_dim=64", "hirest_scale.max_epochs=2", "model.beam_size=1", "logger=csv"]


def run(script: str, tmp_path, *overrides: str) -> subprocess.CompletedProcess:
    data = [f"data.synthetic_root={tmp_path / 'synthetic_hirest'}", *TINY_DATA] if "ckpt_path" not in str(overrides) \
        else []
    return run_command(script, "data=hirest", *data, *overrides)


def metrics(run_dir):
    return json.loads((run_dir / "metrics.json").read_text())


def official_scores(task: str, root, split: str, predictions) -> dict:
    """What `python -m spacewalk.score hirest` (the authors' evaluate.py) prints for a prediction file."""
    result = run_command("-m", "spacewalk.score", "hirest", "--task", task, "--root", root, "--split", split,
                         "--predictions", predictions)
    return json.loads(result.stdout)


# the joint model of TINY_MODEL, seed 0, on the tiny synthetic HiREST: what a correct run gives. Float32
# kernels differ between CPUs: the best val/loss is compared to 1e-3 (relative); val moment retrieval (5
# queries) and segmentation recall (3 videos) move in steps of 20 and about 5 points, so they are compared to
# one such step.
PINNED_JOINT = {"best_val_loss": 10.674514770507812, "R@0.5": 60.0, "recall@0.5": 16.666666666666664}


def test_heuristic_segmentation_scores_officially(tmp_path):
    run_dir = tmp_path / "eval"
    run("evaluate.py", tmp_path, "model=hirest_heuristics", "split=val", "model.video_retrieval=null",
        "model.moment_retrieval=null", f"hydra.run.dir={run_dir}")
    m = metrics(run_dir)
    seg = m["moment_segmentation"]["all"]
    assert m["split"] == "val" and 0 <= seg["recall"]["0.5"] <= 100 and 0 <= seg["precision"]["0.7"] <= 100
    predictions = json.loads((run_dir / "predictions_moment_segmentation.json").read_text())
    assert all(set(v) == {"bounds"} and all(len(b) == 2 for b in v["bounds"]) for v in predictions.values())
    # the run re-scores to its metrics.json from its prediction file and resolved config (spacewalk/results/rescore.py)
    from spacewalk.results.rescore import recorded_metrics, rescore_run

    assert rescore_run(run_dir) == recorded_metrics(run_dir) and "val/moment_segmentation/recall/0.5" in \
        rescore_run(run_dir)
    intervals = m["moment_segmentation"]["intervals"]  # each overall number's, over the videos (the queries)
    assert set(intervals) == {"recall/0.5", "recall/0.7", "precision/0.5", "precision/0.7"}
    for path, interval in intervals.items():
        metric, threshold = path.split("/")
        assert interval["estimate"] == seg[metric][threshold] and interval["unit"].startswith("videos")
        assert interval["low"] <= interval["estimate"] <= interval["high"] and interval["n"] == len(predictions)


def test_similarity_baselines_refuse_a_video_only_encoder(tmp_path):
    result = run_command("evaluate.py", "data=hirest", f"data.synthetic_root={tmp_path / 's'}", *TINY_DATA,
                         "model=hirest_heuristics", "split=val", f"hydra.run.dir={tmp_path / 'r'}", check=False)
    assert result.returncode != 0 and "image-text model" in result.stderr


def test_joint_model_trains_predicts_scores_and_evaluate_reproduces(tmp_path):
    run_dir = tmp_path / "run"
    run("train.py", tmp_path, "model=hirest_joint", f"hydra.run.dir={run_dir}", *TINY_MODEL)
    m = metrics(run_dir)
    assert m["best_val_loss"] is not None
    assert set(m["val"]) == {"moment_retrieval", "moment_segmentation", "step_captioning"}
    assert set(m["test"]) == {"moment_segmentation", "step_captioning"}  # the test split hides its moments
    for split in ("val", "test"):
        for task in ("moment_retrieval", "moment_segmentation", "step_captioning"):
            assert (run_dir / split / f"predictions_{task}.json").is_file()
        for task in m[split]:  # the official numbers, and beside them the intervals (metrics.bootstrap)
            official = official_scores(task, tmp_path / "synthetic_hirest", split,
                                       run_dir / split / f"predictions_{task}.json")
            assert {k: v for k, v in m[split][task].items() if k != "intervals"} == official, (split, task)
    retrieval = m["val"]["moment_retrieval"]
    assert set(retrieval["intervals"]) == {"R@0.5", "R@0.7"} and retrieval["intervals"]["R@0.5"]["unit"].startswith(
        "queries") and retrieval["intervals"]["R@0.5"]["estimate"] == retrieval["all"]["R@0.5"]
    assert "intervals" not in m["val"]["step_captioning"]  # corpus-level metrics: no per-query unit
    got = {"R@0.5": m["val"]["moment_retrieval"]["all"]["R@0.5"],
           "recall@0.5": m["val"]["moment_segmentation"]["all"]["recall"]["0.5"]}
    assert m["best_val_loss"] == pytest.approx(PINNED_JOINT["best_val_loss"], rel=1e-3)
    assert got["R@0.5"] == pytest.approx(PINNED_JOINT["R@0.5"], abs=20.0)
    assert got["recall@0.5"] == pytest.approx(PINNED_JOINT["recall@0.5"], abs=6.0)
    caps = json.loads((run_dir / "val/predictions_step_captioning.json").read_text())
    assert all(isinstance(c["sentence"], str) for v in caps.values() for c in v["captions"])

    best = next((run_dir / "checkpoints").glob("epoch*.ckpt"))
    again = tmp_path / "again"
    run("evaluate.py", tmp_path, f"ckpt_path={best}", f"hydra.run.dir={again}")
    m2 = metrics(again)
    assert m2["val"] == m["val"] and m2["test"] == m["test"]


def test_joint_model_trains_on_released_features_without_video(tmp_path):
    """Files in the authors' released layout (fabricated here) are all a run needs: the videos are gone."""
    from spacewalk.benchmarks.hirest.features import ASR_FEATURES_DIR
    from spacewalk.benchmarks.hirest.open import open_hirest
    from spacewalk.benchmarks.hirest.subtitles import read_srt

    root = tmp_path / "synthetic_hirest"
    # the options train.py will ask for (the config's with the test's overrides), or it would regenerate the root
    opts = OmegaConf.to_container(compose_train("data=hirest", *TINY_DATA).data.synthetic)
    dataset = open_hirest(synthetic_root=root, synthetic=opts)
    data = root / "data"
    rng = np.random.default_rng(0)
    (data / "eva_clip_features").mkdir()
    (data / ASR_FEATURES_DIR).mkdir()
    for video in dataset.videos():
        torch.save(torch.from_numpy(rng.standard_normal((25, 1024)).astype(np.float32)),
                   data / "eva_clip_features" / f"{video}.pt")
    for srt in (data / "ASR").glob("*.srt"):
        torch.save(torch.from_numpy(rng.standard_normal((len(read_srt(srt)), 384)).astype(np.float32)),
                   data / ASR_FEATURES_DIR / f"{srt.stem}.pt")
    queries = [q for s in ("train", "val", "test") for q in dataset.split(s)]
    torch.save({q: torch.from_numpy(rng.standard_normal(1024).astype(np.float32)) for q in queries},
               tmp_path / "queries.pt")
    shutil.rmtree(data / "videos")
    run_dir = tmp_path / "run"
    run("train.py", tmp_path, "model=hirest_joint", "features.source=released",
        f"features.query_features={tmp_path / 'queries.pt'}", f"hydra.run.dir={run_dir}", *TINY_MODEL)
    m = metrics(run_dir)
    assert set(m["val"]) == {"moment_retrieval", "moment_segmentation", "step_captioning"}
    hparams = torch.load(next((run_dir / "checkpoints").glob("epoch*.ckpt")), weights_only=True)["hyper_parameters"]
    assert (hparams["video_dim"], hparams["query_dim"], hparams["asr_dim"]) == (1024, 1024, 384)
