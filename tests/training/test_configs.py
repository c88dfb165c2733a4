"""Every shipped config composes, and the recipes carry the paper's hyper-parameters."""

from __future__ import annotations

import hydra
import pytest
import torch
from omegaconf import OmegaConf, open_dict

import spacewalk.training  # noqa: F401  (the config resolvers)
from spacewalk.core.errors import ConfigError
from spacewalk.training.tasks import models_serving, take_served_tasks

from helpers.commands import REPO, compose_evaluate, compose_train

CONF = str(REPO / "conf")
# the paper's context lengths (docs/spacewalk18.md, Context windows) and one that is not
CONTEXTS = ["5s", "10s", "20s", "30s", "1min", "2min", "3min", "5min", "10min", "15min", "20min", "1.5h"]


def model_target(name: str) -> str | None:
    """The _target_ of the model node that model=<name> composes (following its defaults lists)."""
    return compose_train(f"model={name}").model.get("_target_")


# the step-recognition recipes: the models of the task (conf/model also holds the other benchmarks' models) that are
# trained or fitted as StepRecognitionModule (the task's baselines are not)
RECIPES = [m for m in models_serving("step_recognition", REPO / "conf")
           if model_target(m) == "models.step_recognition.StepRecognitionModule"]


def test_the_recipes_are_found():
    assert {"zero_shot", "zero_shot_paper", "last_layer", "lfb_avg", "lfb_cat", "lfb_nl", "lfb_tf"} <= set(RECIPES)


@pytest.mark.parametrize("model", RECIPES)
def test_every_recipe_builds(model):
    cfg = compose_train(f"model={model}")
    assert take_served_tasks(cfg) == ["step_recognition"]  # the config's, not a constructor argument
    with open_dict(cfg.model):
        cfg.model.head.dim = 16
    module = hydra.utils.instantiate(cfg.model)
    assert type(module.head).__name__ == cfg.model.head._target_.rsplit(".", 1)[1]
    assert (module.hparams.temperature, module.hparams.irrelevant) == (cfg.model.temperature, cfg.model.irrelevant)


def test_paper_hyper_parameters():
    lfb_nl, lfb_cat, lfb_tf = (compose_train(f"model={m}") for m in ("lfb_nl", "lfb_cat", "lfb_tf"))
    # lr 1e-4 instead of the paper's 1e-3, chosen on val (conf/model/lfb_nl.yaml)
    assert (lfb_nl.model.optimizer.lr, lfb_nl.datamodule.batch_size, lfb_nl.model.temperature) == (1e-4, 512, 0.1)
    assert (lfb_cat.model.optimizer.lr, lfb_cat.datamodule.batch_size) == (1e-4, 2048)
    assert (lfb_tf.model.optimizer.lr, lfb_tf.datamodule.batch_size) == (1e-4, 512)
    assert compose_train().trainer.max_epochs == 20


def test_zero_shot_choices_reach_the_datamodule_and_the_paper_variant_keeps_the_paper():
    chosen, paper, trained = (compose_train(f"model={m}") for m in ("zero_shot", "zero_shot_paper", "lfb_avg"))
    assert (chosen.datamodule.text_pool, chosen.datamodule.empty_text, chosen.model.irrelevant) == \
        ("duration", "widen", "threshold")
    assert (paper.datamodule.text_pool, paper.datamodule.empty_text, paper.model.irrelevant) == \
        ("mean", "zero", "argmax")
    assert (paper.model.normalize, paper.model.temperature) == (False, 1.0)
    # recipes that say nothing keep the data config's defaults
    assert (trained.datamodule.text_pool, trained.datamodule.empty_text) == ("mean", "zero")


def test_lfb_cat_defaults_and_the_paper_settings_stay_reachable():
    cat = compose_train("model=lfb_cat").model
    assert (cat.head.identity_on, cat.head.normalize_blocks, cat.temperature) == ("all", True, 0.1)
    paper_cfg = compose_train("experiment=paper_lfb_cat")
    paper = paper_cfg.model
    assert paper == compose_train("model=lfb_cat", "model.head.identity_on=query", "model.head.normalize_blocks=false",
                                  "model.temperature=0.05").model
    take_served_tasks(paper_cfg)  # as the programs do before anything is built
    with open_dict(paper):
        paper.head.dim = 16
    module = hydra.utils.instantiate(paper)
    assert module.hparams.temperature == 0.05 and not module.head.normalize_blocks


def test_the_paper_lfb_nl_experiment_changes_only_lr_and_temperature():
    ours, paper = compose_train("model=lfb_nl"), compose_train("experiment=paper_lfb_nl")
    assert (paper.model.optimizer.lr, paper.model.temperature) == (1e-3, 0.05)
    with open_dict(ours):
        ours.model.optimizer.lr, ours.model.temperature = 1e-3, 0.05
    assert OmegaConf.to_container(ours.model) == OmegaConf.to_container(paper.model)
    assert ours.datamodule == paper.datamodule


@pytest.mark.parametrize("context", CONTEXTS)
def test_contexts(context):
    from spacewalk.core.durations import parse_duration

    cfg = compose_train(f"context={context}")
    assert cfg.datamodule.context_seconds == parse_duration(context)


def test_optuna_search_composes():
    cfg = compose_train("hparams_search=head_optuna")
    assert cfg.hydra.sweeper.direction == "minimize" and "model.optimizer.lr" in cfg.hydra.sweeper.params


def test_both_entry_points_carry_the_interval_settings():
    from spacewalk.results.bootstrap import BootstrapOptions
    from spacewalk.training.run_directory import bootstrap_options

    for compose in (compose_train, compose_evaluate):
        assert bootstrap_options(compose()) == BootstrapOptions(n_resamples=1000, level=0.95, seed=0)
        assert bootstrap_options(compose("metrics.bootstrap.n_resamples=0")) is None  # off
        assert bootstrap_options(compose("metrics.bootstrap.seed=3")).seed == 3
        with pytest.raises(ConfigError, match="metrics.bootstrap.level"):
            bootstrap_options(compose("metrics.bootstrap.level=95"))
    assert bootstrap_options(OmegaConf.create({})) == BootstrapOptions()  # a run written before the intervals


def test_ddp_trainer():
    cfg = compose_train("trainer=ddp", "trainer.devices=8", "trainer.num_nodes=2")
    assert (cfg.trainer.strategy, cfg.trainer.devices, cfg.trainer.num_nodes) == ("ddp", 8, 2)


def test_hirest_joint_composes_with_the_synthetic_scale_and_the_paper_sizes():
    synthetic = compose_train("data=hirest", "model=hirest_joint")
    assert synthetic.hydra.runtime.choices.encoder == "thumbnail"  # data=hirest picks its encoder
    assert synthetic.datamodule._target_ == "datamodules.hirest.HiRESTDataModule"
    assert (synthetic.model.hidden_dim, synthetic.model.optimizer.lr, synthetic.trainer.max_epochs) == (256, 3e-4, 20)
    assert synthetic.trainer.gradient_clip_val == 5.0 and synthetic.trainer.use_distributed_sampler is False
    release = compose_train("data=hirest_release", "data.root=/x", "model=hirest_joint")
    assert (release.model.hidden_dim, release.model.num_heads, release.model.ffn_dim) == (768, 12, 3072)
    assert (release.model.optimizer.lr, release.model.optimizer.weight_decay) == (1e-5, 0.01)
    assert (release.trainer.max_epochs, release.datamodule.batch_size) == (50, 5)
    assert release.features.source == "released"
    take_served_tasks(synthetic)
    with open_dict(synthetic.model):
        synthetic.model.video_dim, synthetic.model.query_dim, synthetic.model.asr_dim = 12, 8, 384
        synthetic.model.hidden_dim, synthetic.model.embed_dim, synthetic.model.ffn_dim = 16, 16, 32
    module = hydra.utils.instantiate(synthetic.model)
    assert module.hparams.video_dim == 12
    # the Spacewalk-18 recipes are untouched by the HiREST groups
    assert compose_train().datamodule._target_ == "datamodules.step_recognition.StepRecognitionDataModule"


def test_hirest_heuristics_compose_and_build():
    cfg = compose_evaluate("data=hirest", "model=hirest_heuristics", "split=val")
    take_served_tasks(cfg)
    baselines = hydra.utils.instantiate(cfg.model).by_task()
    assert baselines["moment_retrieval"].threshold == 0.10 and baselines["video_retrieval"].num_frames == 20
    assert baselines["moment_segmentation"].num_frames == 32
    left_out = compose_evaluate("data=hirest", "model=hirest_heuristics", "model.video_retrieval=null")
    take_served_tasks(left_out)
    assert hydra.utils.instantiate(left_out.model).by_task()["video_retrieval"] is None


def test_feature_bank_folders_follow_the_encoders_a_run_reads():
    from hydra.core.hydra_config import HydraConfig

    from spacewalk.training import text_bank_suffix

    assert text_bank_suffix("minilm") == "" and text_bank_suffix("mpnet") == "+mpnet"
    for overrides, folder in (((), "feature_banks/synthetic/minilm"),
                              (("text_encoder=mpnet",), "feature_banks/synthetic/minilm+mpnet")):
        cfg = compose_train("paths.data_dir=D", *overrides)
        HydraConfig.instance().set_config(cfg)
        assert cfg.hydra.runtime.choices.encoder == "text_only"  # the default: no video encoder
        assert cfg.datamodule.bank_dir == f"D/{folder}"  # MiniLM's banks keep their folders
    # a text-only run reads the text bank whatever the encoder; video runs read their encoder's
    for overrides, folder in ((("model=all_layer",), "tiny_clip"), (("model=all_layer", "modalities=text"), "minilm"),
                              (("encoder=tiny_clip",), "minilm"), (("encoder=tiny_clip", "modalities=video+text",
                                                                    "text_encoder=mpnet"), "tiny_clip+mpnet"),
                              (("task=intra_video_retrieval", "model=ivr_last_layer", "encoder=clip_vit_b32"),
                               "minilm")):
        cfg = compose_train("paths.data_dir=D", *overrides)
        HydraConfig.instance().set_config(cfg)
        assert cfg.datamodule.bank_dir == f"D/feature_banks/synthetic/{folder}", overrides
    cfg = compose_train("paths.data_dir=D", "text_encoder=mpnet")
    assert cfg.encoder.text._target_ == "spacewalk.encoders.sentence.mpnet_text_encoder"
    assert cfg.encoder.text.cache_dir == "D/models" and cfg.encoder.text.max_length == 384


def test_ckpt_path_last_resumes_from_the_newest_last_checkpoint(tmp_path):
    # model=all_layer has two checkpoint callbacks that keep a "last": last.ckpt (every 100 steps) and last-v1.ckpt
    # (each epoch's end, Lightning's name for the second callback's); resuming takes whichever is newer
    import os

    from omegaconf import OmegaConf

    from spacewalk.training.run_directory import resume_path

    cfg = OmegaConf.create({"ckpt_path": "last", "paths": {"output_dir": str(tmp_path)}})
    with pytest.raises(ConfigError, match="last.ckpt"):
        resume_path(cfg)
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for name, mtime in (("last.ckpt", 100), ("last-v1.ckpt", 200), ("epoch00.ckpt", 300)):
        torch.save({"state_dict": {}}, folder / name)  # whole checkpoints: an empty file is refused (below)
        os.utime(folder / name, (mtime, mtime))
    assert resume_path(cfg) == str(folder / "last-v1.ckpt")
    os.utime(folder / "last.ckpt", (400, 400))
    assert resume_path(cfg) == str(folder / "last.ckpt")
    assert resume_path(OmegaConf.create({"ckpt_path": str(folder / "epoch00.ckpt")})) == str(folder / "epoch00.ckpt")
    with pytest.raises(ConfigError, match="ckpt_path=x.ckpt: checkpoint not found"):
        resume_path(OmegaConf.create({"ckpt_path": "x.ckpt"}))


def whole_and_torn_checkpoints(folder) -> dict[str, object]:
    """A small real checkpoint (torch.save of a dict, as Lightning writes) and its broken copies."""
    whole = folder / "whole.ckpt"
    torch.save({"state_dict": {"w": torch.arange(1000.0)}, "epoch": 3}, whole)
    empty, torn = folder / "empty.ckpt", folder / "torn.ckpt"
    empty.write_bytes(b"")
    torn.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    return {"whole": whole, "empty": empty, "torn": torn}


@pytest.mark.parametrize("which, message", [("empty", "is empty"), ("torn", "is not a whole checkpoint")])
def test_an_empty_or_truncated_checkpoint_is_refused_naming_the_file(which, message, tmp_path):
    from spacewalk.training.run_directory import check_checkpoint, resume_path

    files = whole_and_torn_checkpoints(tmp_path)
    check_checkpoint(files["whole"], "ckpt_path")  # a whole one passes
    with pytest.raises(ValueError, match=f"ckpt_path={files[which]}: {files[which]} {message}.*copy it again"):
        resume_path(OmegaConf.create({"ckpt_path": str(files[which])}))
    # ckpt_path=last: the newest last*.ckpt is the one checked
    folder = tmp_path / "run" / "checkpoints"
    folder.mkdir(parents=True)
    (folder / "last.ckpt").write_bytes(files[which].read_bytes())
    cfg = OmegaConf.create({"ckpt_path": "last", "paths": {"output_dir": str(tmp_path / "run")}})
    with pytest.raises(ValueError, match=f"ckpt_path=last: {folder / 'last.ckpt'} {message}"):
        resume_path(cfg)


@pytest.mark.parametrize("which, message", [("empty", "is empty"), ("torn", "is not a whole checkpoint")])
def test_evaluate_refuses_an_empty_or_truncated_checkpoint_before_loading_it(which, message, tmp_path):
    from spacewalk.training import evaluate

    files = whole_and_torn_checkpoints(tmp_path)
    ckpt = tmp_path / "run" / "checkpoints" / "epoch03.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(files[which].read_bytes())
    cfg = compose_evaluate(f"ckpt_path={ckpt}", f"paths.output_dir={tmp_path / 'eval'}")
    with pytest.raises(ValueError, match=f"ckpt_path={ckpt}: {ckpt} {message}"):
        evaluate(cfg)


@pytest.mark.parametrize("units, warned", [(False, True), (True, False)])
def test_bf16_on_a_cpu_without_bf16_units_is_said_to_be_slow(monkeypatch, caplog, units, warned):
    # emulated bfloat16 trained MiniLM more than 10x slower than float32 on an AVX2-only CPU (docs/speed.md)
    import logging

    import pytorch_lightning as pl
    import torch

    from spacewalk.training.trainer import warn_slow_bf16

    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: units)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    with caplog.at_level(logging.WARNING, logger="spacewalk.training.trainer"):
        warn_slow_bf16(pl.Trainer(accelerator="cpu", precision="bf16-mixed", logger=False))
        warn_slow_bf16(pl.Trainer(accelerator="cpu", precision="32-true", logger=False))  # never a warning
    assert [r.message.startswith("trainer.precision=bf16-mixed on a CPU without bfloat16 units")
            for r in caplog.records] == ([True] if warned else [])


def test_all_layer_decodes_with_pyav_in_two_workers():
    # sparse frames are seeks, which PyAV does faster than decord (docs/speed.md); workers decode beside training
    for model in ("all_layer", "ivr_all_layer"):
        cfg = compose_train(f"model={model}")
        assert (cfg.datamodule.video_backend, cfg.datamodule.num_workers) == ("pyav", 2), model


def test_train_refuses_to_resume_from_a_truncated_checkpoint_before_reading_data(tmp_path):
    from spacewalk.training import train

    torn = whole_and_torn_checkpoints(tmp_path)["torn"]
    cfg = compose_train(f"ckpt_path={torn}", f"paths.data_dir={tmp_path / 'data'}",
                        f"paths.output_dir={tmp_path / 'run'}")
    with pytest.raises(ValueError, match=f"ckpt_path={torn}: {torn} is not a whole checkpoint"):
        train(cfg)
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


def test_a_retest_runs_on_the_commands_machine_with_the_runs_numerics():
    # a run trained on 2 nodes of 4 GPUs under DDP, re-tested here: evaluate.py's devices, the run's precision
    from spacewalk.training.run import recipe

    run_cfg = compose_train("model=lfb_avg", "trainer.devices=4", "+trainer.num_nodes=2", "+trainer.strategy=ddp",
                            "+trainer.precision=bf16-mixed")
    cfg = compose_evaluate("trainer.devices=1")
    retest = recipe(run_cfg).retest_config(cfg, run_cfg.copy())
    assert retest.trainer.devices == 1 and "num_nodes" not in retest.trainer and "strategy" not in retest.trainer
    assert retest.trainer.precision == "bf16-mixed" and retest.trainer.max_epochs == run_cfg.trainer.max_epochs
    on_two = recipe(run_cfg).retest_config(compose_evaluate("trainer.devices=2", "+trainer.strategy=ddp"),
                                           run_cfg.copy())
    assert (on_two.trainer.devices, on_two.trainer.strategy) == (2, "ddp")
