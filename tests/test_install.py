"""Install by use (pyproject.toml): the core install trains and scores; W&B, the video-LLM helpers, HiREST's
subtitles, SSIM and captioning scores, and the cluster launchers are extras. Checked on the source (no package of
an extra among the core dependencies, `make setup` installing every extra the tests exercise) and by running the
main job with every extra's packages made unimportable, as on a machine with the core install only."""

from __future__ import annotations

import json
import re

import pytest
import tomllib

from conftest import REPO, run_command

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
# each extra, and the modules its packages install (what the core run must never import)
EXTRA_MODULES = {"tracking": ["wandb"], "video-llm": ["accelerate"], "hirest": ["srt", "skimage", "pycocoevalcap"],
                 "cluster": ["hydra_plugins.hydra_submitit_launcher", "hydra_plugins.hydra_optuna_sweeper",
                             "submitit", "optuna"]}


def requirement_name(requirement: str) -> str:
    return re.split(r"[<>=\[ ;]", requirement, maxsplit=1)[0].lower()


def test_the_extras_are_not_core_and_make_setup_installs_them():
    core = {requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert set(EXTRA_MODULES) <= set(extras)
    for name in EXTRA_MODULES:
        assert not core & {requirement_name(r) for r in extras[name]}, name
    heavy = {"wandb", "pycocoevalcap", "hydra-submitit-launcher", "hydra-optuna-sweeper", "scikit-image"}
    assert heavy.isdisjoint(core)
    installed = re.search(r"^EXTRAS \?= (\S+)$", (REPO / "Makefile").read_text(), re.M).group(1).split(",")
    assert set(EXTRA_MODULES) | {"dev", "mpnet"} <= set(installed)


BLOCKED_RUN = """
import importlib.metadata as metadata, runpy, sys
# a module set to None in sys.modules is one Python cannot import and importlib.util.find_spec does not find, and a
# distribution whose metadata is not found is not installed (some libraries ask the metadata): as on a machine
# without the extras
for name in {blocked!r}:
    sys.modules[name] = None
def hidden(read):
    def read_unless_blocked(name, *args, **kwargs):
        if name.lower().replace("_", "-") in {distributions!r}:
            raise metadata.PackageNotFoundError(name)
        return read(name, *args, **kwargs)
    return read_unless_blocked
metadata.version, metadata.metadata, metadata.distribution = map(hidden, (metadata.version, metadata.metadata,
                                                                          metadata.distribution))
sys.argv = {argv!r}
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_the_core_install_trains_and_scores(synthetic_spacewalk18, tmp_path):
    root = synthetic_spacewalk18(seed=1, n_train=2, n_val=1, n_test=1, minutes=(6.0, 8.0), steps_per_video=(4, 5),
                                 samples_per_video=200,
                                 retrieval_samples_per_video=50, questions_per_video=4)
    blocked = [m for modules in EXTRA_MODULES.values() for m in modules]
    distributions = {requirement_name(r) for name in EXTRA_MODULES
                     for r in PYPROJECT["project"]["optional-dependencies"][name]} | {"submitit", "optuna"}
    run = tmp_path / "run"
    argv = ["train.py", "model=lfb_cat", "context=1min", f"data.root={root}", f"paths.data_dir={tmp_path / 'data'}",
            f"hydra.run.dir={run}", "trainer.max_epochs=1", "plots=false"]
    result = run_command("-c", BLOCKED_RUN.format(blocked=blocked, distributions=distributions, argv=argv), timeout=900)
    said = result.stdout + result.stderr + (run / "train.log").read_text()
    assert "logger pytorch_lightning.loggers.WandbLogger left out: wandb is not installed" in said
    assert not (run / "wandb").exists()
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["split"] == "test" and all(0 <= metrics[k] <= 100 for k in ("Accuracy", "mAP", "IoU"))
    scored = run_command("-c", BLOCKED_RUN.format(blocked=blocked, distributions=distributions, argv=[
        "-m", "spacewalk.score", "--root", str(root), "--split", "test",
        "--predictions", str(run / "predictions.json")]).replace(
        'runpy.run_path(sys.argv[0], run_name="__main__")',
        'sys.argv = sys.argv[2:]; sys.argv.insert(0, "spacewalk.score"); runpy.run_module("spacewalk.score", '
        'run_name="__main__")'), timeout=300)
    assert json.loads(scored.stdout)["Accuracy"] == pytest.approx(metrics["Accuracy"])
