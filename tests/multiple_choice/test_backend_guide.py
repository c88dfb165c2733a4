"""docs/writing_a_backend.md as written: its backend code runs through the runner on synthetic questions, its
config composes as a `conf/model/` file (fits the multiple-choice task, builds the backend), and its commands
compose."""

from __future__ import annotations

import re
import shutil
import sys
import types

import hydra

from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering
from spacewalk.multiple_choice import runner
from spacewalk.training.tasks import check_model

from conftest import CONF, REPO

GUIDE = (REPO / "docs" / "writing_a_backend.md").read_text()


def block(language: str) -> str:
    (code,) = re.findall(rf"```{language}\n(.*?)```", GUIDE, re.S)
    return code


def guide_module(tmp_path) -> types.ModuleType:
    """The guide's Python block, importable under the module path its config names."""
    target = re.search(r"_target_: (\S+)", block("yaml")).group(1)
    module_name = target.rsplit(".", 1)[0]
    module = types.ModuleType(module_name)
    exec(compile(block("python"), str(REPO / "docs" / "writing_a_backend.md"), "exec"), module.__dict__)
    return module


def test_the_guides_backend_answers_through_the_runner(synthetic_spacewalk18, tmp_path):
    from spacewalk.benchmarks.spacewalk18.open import open_spacewalk18

    backend = guide_module(tmp_path).KeywordBackend()
    task = QuestionAnswering(open_spacewalk18(synthetic_spacewalk18(seed=4, n_train=1, n_val=1, n_test=2,
                                                                    questions_per_video=10)), limit=12)
    metrics = runner.run(task, backend, tmp_path / "run", progress=False)
    records = runner.existing_records(tmp_path / "run")
    assert metrics["count"] == 12 and len(records) == 12
    assert all(r.choice is not None and len(r.scores) == 4 and "said" in r.meta for r in records.values())


def test_the_guides_config_composes_fits_and_builds(tmp_path, monkeypatch):
    module = guide_module(tmp_path)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    (conf / "model" / "mc_keywords.yaml").write_text(block("yaml"))
    commands = [line.split()[2:] for line in block("bash").splitlines() if line.startswith("python evaluate.py")]
    assert len(commands) == 2
    for overrides in commands:
        with hydra.initialize_config_dir(config_dir=str(conf), version_base="1.3"):
            cfg = hydra.compose("evaluate", overrides=overrides, return_hydra_config=True)
        check_model(cfg)
        backend = hydra.utils.instantiate(cfg.model)
        assert isinstance(backend, module.KeywordBackend) and backend.name.startswith("keywords_")
