"""Every shipped config composes, and the recipes carry the paper's hyper-parameters."""

from __future__ import annotations

from pathlib import Path

import hydra
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import open_dict

from conftest import REPO

CONF = str(REPO / "conf")
MODELS = sorted(p.stem for p in (REPO / "conf/model").glob("*.yaml"))
CONTEXTS = sorted(p.stem for p in (REPO / "conf/context").glob("*.yaml"))


def compose_train(*overrides: str):
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides), return_hydra_config=True)


@pytest.mark.parametrize("model", [m for m in MODELS if m not in ("random", "plan_prior")])
def test_every_recipe_builds(model):
    cfg = compose_train(f"model={model}")
    with open_dict(cfg.model):
        cfg.model.head.dim = 16
    module = hydra.utils.instantiate(cfg.model)
    assert module.hparams.batch_size == cfg.model.batch_size


def test_paper_hyper_parameters():
    lfb_nl, lfb_cat, lfb_tf = (compose_train(f"model={m}").model for m in ("lfb_nl", "lfb_cat", "lfb_tf"))
    assert (lfb_nl.optimizer.lr, lfb_nl.batch_size) == (1e-3, 512)
    assert (lfb_cat.optimizer.lr, lfb_cat.batch_size) == (1e-4, 2048)
    assert (lfb_tf.optimizer.lr, lfb_tf.batch_size) == (1e-4, 512)
    assert compose_train().trainer.max_epochs == 20


@pytest.mark.parametrize("context", CONTEXTS)
def test_contexts(context):
    from spacewalk.windows import parse_duration

    cfg = compose_train(f"context={context}")
    assert cfg.datamodule.context_seconds == parse_duration(context)


def test_optuna_search_composes():
    cfg = compose_train("hparams_search=head_optuna")
    assert cfg.hydra.sweeper.direction == "minimize" and "model.optimizer.lr" in cfg.hydra.sweeper.params


def test_ddp_trainer():
    cfg = compose_train("trainer=ddp", "trainer.devices=8", "trainer.num_nodes=2")
    assert (cfg.trainer.strategy, cfg.trainer.devices, cfg.trainer.num_nodes) == ("ddp", 8, 2)
