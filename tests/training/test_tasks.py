"""Every (task, model) pair composed with Hydra's compose API: the models that serve a task (their config's
`_tasks_`) compose and, where that is cheap (no data read, no weights), instantiate; every other pair is refused,
naming the task's models. A new model is one config file; a model name with no config lists the models its entry
point runs; the task's defaults are added with Hydra's public API."""

from __future__ import annotations

import hydra
import pytest
from omegaconf import OmegaConf, open_dict

import spacewalk.training  # noqa: F401  (the config resolvers)
from spacewalk.core.errors import ConfigError
from spacewalk.training.tasks import check_model, models_serving, served_tasks, with_task_defaults

from conftest import CONF, compose_config, run_command

TASKS = sorted(p.stem for p in (CONF / "task").glob("*.yaml"))
MODELS = sorted(p.stem for p in (CONF / "model").glob("*.yaml"))
# models whose instantiation loads weights or reads data: composed and checked, not built
HEAVY = {"all_layer", "ivr_all_layer", "mc_caption_enhanced", "mc_contrastive_text", "mc_contrastive_video",
         "mc_llava_onevision", "mc_plan", "mc_qwen2_5_vl", "mc_transformers", "mc_smollm2", "mc_gemma3_270m",
         "mc_qwen2_5_vl_egoschema", "mc_qwen3_vl_egoschema", "mc_llava_onevision_egoschema", "mc_gemma3_egoschema",
         "mc_qwen2_5_vl_egocross", "mc_qwen2_5_vl_spacewalk18"}
# what a task needs besides task= to compose (HiREST's data config carries its features and scale)
TASK_DATA = {"hirest": ["data=hirest"], "multiple_choice": ["data=spacewalk18_qa"]}


def compose_pair(entry: str, task: str, model: str):
    overrides = TASK_DATA.get(task, [f"task={task}"]) + [f"model={model}"]
    return compose_config(entry, *overrides)


@pytest.fixture(scope="module")
def task_models() -> dict[str, list[str]]:
    return {task: models_serving(task, CONF) for task in TASKS}


def test_every_model_serves_a_task_and_names_only_tasks_that_exist(task_models):
    listed = {m for models in task_models.values() for m in models}
    assert listed == set(MODELS)
    assert {t for m in MODELS for t in served_tasks(CONF / "model" / f"{m}.yaml")} == set(TASKS)
    assert task_models["intra_video_retrieval"] == ["ivr_all_layer", "ivr_last_layer", "ivr_tw_finch", "ivr_zero_shot"]
    assert "random" in task_models["step_recognition"] and "random" in task_models["multiple_choice"]


def test_a_new_model_is_one_config_file(tmp_path):
    # a copy of conf/ with one file added: the new model composes, fits its task, is named when another model is
    # refused, and gets no key of its own into the model's arguments
    import shutil

    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    (conf / "model" / "my_head.yaml").write_text(
        (CONF / "model" / "lfb_avg.yaml").read_text().replace("models.heads.LFBAvg", "models.heads.LFBCat"))
    assert "my_head" in models_serving("step_recognition", conf)
    with hydra.initialize_config_dir(config_dir=str(conf), version_base="1.3"):
        cfg = hydra.compose("train", overrides=["model=my_head"], return_hydra_config=True)
    check_model(cfg)
    assert "_tasks_" not in cfg.model and cfg.model.head._target_ == "models.heads.LFBCat"


def test_the_task_wiring_uses_no_private_hydra_api():
    from conftest import REPO

    sources = [p for p in (REPO / "spacewalk").rglob("*.py")] + [REPO / "train.py", REPO / "evaluate.py"]
    assert [p for p in sources if "hydra._internal" in p.read_text()] == []


@pytest.mark.parametrize("entry, runs, refused", [
    ("train", ["lfb_cat", "lfb_avg", "zero_shot", "all_layer"], ["random", "plan_prior", "mc_openai", "ivr_zero_shot"]),
    ("evaluate", ["random", "plan_prior", "zero_shot", "zero_shot_paper"], ["lfb_cat", "all_layer", "mc_openai"]),
])
def test_a_model_name_with_no_config_lists_the_models_its_entry_point_runs(entry, runs, refused):
    with pytest.raises(ConfigError, match=f"model=lfb_ct: there is no conf/model/lfb_ct.yaml; the models of "
                                          f"task=step_recognition that {entry}.py runs: ") as typo:
        with_task_defaults([f"{entry}.py", "model=lfb_ct", "context=1min"], CONF, entry)
    listed = str(typo.value).rsplit(": ", 1)[1].split(", ")
    assert set(runs) <= set(listed) and not set(refused) & set(listed)
    with pytest.raises(ConfigError, match="the models of task=intra_video_retrieval that train.py runs: "
                                          "ivr_all_layer, ivr_last_layer, ivr_tw_finch, ivr_zero_shot"):
        with_task_defaults(["train.py", "task=intra_video_retrieval", "model=ivr_lastlayer"], CONF, "train")
    with pytest.raises(ConfigError, match="train.py runs no model of task=multiple_choice"):
        with_task_defaults(["train.py", "data=egoschema", "model=mc_opneai"], CONF, "train")


def test_train_py_refuses_a_model_name_with_no_config_in_one_line():
    result = run_command("train.py", "model=lfb_ct", check=False, timeout=120)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("error: model=lfb_ct: there is no conf/model/")


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("model", MODELS)
def test_a_pair_composes_and_builds_or_is_refused_naming_the_models_that_fit(task, model, task_models):
    cfg = compose_pair("evaluate", task, model)
    assert cfg.task.name == task and cfg.hydra.runtime.choices.model == model
    if model not in task_models[task]:
        with pytest.raises(ValueError, match=f"model={model} does not fit task={task}") as refused:
            check_model(cfg)
        assert all(name in str(refused.value) for name in task_models[task])
        return
    check_model(cfg)
    if model in HEAVY:
        return
    from hydra.core.hydra_config import HydraConfig

    HydraConfig.instance().set_config(cfg)  # ${hydra:runtime.choices...} in the bank folders
    node = cfg.model.copy()
    if node.get("head") is not None:
        with open_dict(node):
            # known from the DataModule's encoders at run time (VideoMAE's MLP: a video block beside 384-d text)
            node.head.dim = 16 + 2 * 384 if model == "videomae_mlp" else 16
    if task == "hirest" and model == "hirest_joint":
        with open_dict(node):
            node.video_dim, node.query_dim, node.asr_dim = 12, 8, 16
            node.hidden_dim, node.embed_dim, node.ffn_dim, node.num_heads = 16, 16, 32, 2
    built = hydra.utils.instantiate(node, _convert_="all")
    assert type(built).__name__ == cfg.model._target_.rsplit(".", 1)[-1]
    # the DataModule's class is the task's (its constructor reads data: the class only)
    assert hydra.utils.get_class(cfg.datamodule._target_) if "datamodule" in cfg else task == "multiple_choice"


def test_random_is_chance_in_each_task_that_has_one():
    step = compose_pair("evaluate", "step_recognition", "random")
    choice = compose_pair("evaluate", "multiple_choice", "random")
    assert step.model._target_ == "models.baselines.RandomBaseline"
    assert choice.model._target_ == "spacewalk.multiple_choice.backends.baselines.RandomBackend"
    assert step.model.seed == choice.model.seed == 0


def test_the_default_pairs_of_the_entry_points_fit():
    for entry, overrides in (("train", []), ("evaluate", []), ("evaluate", ["data=spacewalk18_qa"]),
                             ("evaluate", ["data=egoschema"]), ("evaluate", ["data=egocross"])):
        check_model(compose_config(entry, *overrides))


def test_train_refuses_a_wrong_pair_before_reading_data(tmp_path):
    result = run_command("train.py", "task=intra_video_retrieval", "model=lfb_cat", f"hydra.run.dir={tmp_path}",
                         f"paths.data_dir={tmp_path / 'data'}", check=False, timeout=120)
    assert result.returncode != 0
    assert "ivr_all_layer, ivr_last_layer, ivr_tw_finch, ivr_zero_shot" in result.stderr
    assert not (tmp_path / "data").exists()  # nothing generated or read


@pytest.mark.parametrize("overrides", [["model=lfb_cat"], ["task=intra_video_retrieval", "model=ivr_last_layer"],
                                       ["data=hirest", "model=hirest_joint"]], ids=["lfb_cat", "ivr", "hirest"])
def test_evaluate_refuses_a_model_that_trains_before_reading_data(overrides, tmp_path):
    from spacewalk.training import evaluate

    cfg = compose_config("evaluate", *overrides, f"paths.data_dir={tmp_path / 'data'}",
                         f"paths.output_dir={tmp_path / 'run'}")
    with pytest.raises(ValueError, match="is trained: run train.py"):
        evaluate(cfg)
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize("overrides", [["model=plan_prior"], ["data=hirest", "model=hirest_heuristics"],
                                       ["data=egoschema", "model=random"]], ids=["plan_prior", "hirest", "egoschema"])
def test_train_refuses_a_model_with_nothing_to_train_before_reading_data(overrides, tmp_path):
    from spacewalk.training import train

    cfg = compose_config("train", *overrides, f"paths.data_dir={tmp_path / 'data'}",
                         f"paths.output_dir={tmp_path / 'run'}")
    with pytest.raises(ValueError, match="has nothing to train"):
        train(cfg)
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize("entry, overrides", [
    ("train", ["model=lfb_cat"]), ("train", ["task=intra_video_retrieval", "model=ivr_last_layer"]),
    ("evaluate", ["model=zero_shot"]), ("evaluate", ["data=spacewalk18_step_questions", "model=random"])],
    ids=["lfb_cat", "ivr", "zero_shot", "step_questions"])
@pytest.mark.parametrize("context, why", [("0s", "longer than 0 s"), ("0", "longer than 0 s"),
                                          ("-1min", "cannot read a duration")])
def test_an_empty_or_negative_context_is_refused_before_reading_data(entry, overrides, context, why, tmp_path):
    # an empty window used to run on without end; every task's run goes through train() or evaluate()
    from spacewalk.training import evaluate, train

    cfg = compose_config(entry, *overrides, f"context={context}", f"paths.data_dir={tmp_path / 'data'}",
                         f"paths.output_dir={tmp_path / 'run'}")
    with pytest.raises(ValueError, match=f"context={context}: .*{why}"):
        (train if entry == "train" else evaluate)(cfg)
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()


def test_the_step_questions_refuse_an_empty_window_when_built_directly():
    from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import StepRecognitionQuestions

    # refused before the dataset is read (so none is needed here)
    with pytest.raises(ValueError, match="context=0s: the window must be longer than 0 s"):
        StepRecognitionQuestions(None, context="0s")


@pytest.mark.parametrize("task", TASKS)
def test_each_task_owns_its_data_and_default_models(task, task_models):
    cfg = OmegaConf.load(CONF / "task" / f"{task}.yaml").task
    assert cfg.default_model.evaluate in task_models[task]
    assert cfg.default_model.get("train") in [*task_models[task], None]
    composed = compose_config("evaluate", f"task={task}", f"data={cfg.default_data}",
                              f"model={cfg.default_model.evaluate}")
    assert composed.task.name == task
    check_model(composed)
    # the entry points' own defaults are the default task's
    if task == "step_recognition":
        assert compose_config("train").hydra.runtime.choices.model == cfg.default_model.train
        assert compose_config("evaluate").hydra.runtime.choices.model == cfg.default_model.evaluate


@pytest.mark.parametrize("data", sorted(p.stem for p in (CONF / "data").glob("*.yaml")))
def test_each_data_config_says_which_tasks_read_it_and_chooses_one_of_them(data):
    composed = compose_config("evaluate", f"data={data}")
    assert composed.task.name in composed.data_tasks and set(composed.data_tasks) <= set(TASKS)


def test_data_of_another_task_is_refused_naming_the_tasks_that_read_it():
    with pytest.raises(ValueError, match="data=synthetic is not read by task=hirest; .*: step_recognition, "
                                         "intra_video_retrieval"):
        check_model(compose_config("train", "task=hirest", "data=synthetic", "model=hirest_joint"))
    with pytest.raises(ValueError, match="data=hirest is not read by task=step_recognition; .*: hirest"):
        check_model(compose_config("train", "data=hirest", "task=step_recognition", "model=lfb_cat"))


@pytest.mark.parametrize("entry, argv, added", [
    ("train", [], []),
    ("train", ["model=lfb_avg", "context=1min"], []),
    ("train", ["experiment=paper_lfb_nl"], []),  # the experiment's model fits: kept
    ("train", ["task=intra_video_retrieval"], ["model=ivr_last_layer"]),
    ("train", ["-m", "task=intra_video_retrieval", "seed=0,1", "--cfg", "job"], ["model=ivr_last_layer"]),
    ("train", ["data=hirest"], ["model=hirest_joint"]),
    ("train", ["task=hirest"], ["data=hirest", "model=hirest_joint"]),
    ("train", ["task=intra_video_retrieval", "model=lfb_cat"], []),  # the user's choice: refused, not replaced
    ("train", ["-m", "task=step_recognition,intra_video_retrieval"], []),  # each job's task differs
    ("train", ["data=spacewalk18_qa"], []),  # nothing to train: refused by check_model
    ("evaluate", ["data=hirest"], ["model=hirest_heuristics"]),
    ("evaluate", ["task=intra_video_retrieval"], ["model=ivr_zero_shot"]),
    ("evaluate", ["task=multiple_choice"], ["data=spacewalk18_qa"]),  # random is chance there too
    ("evaluate", ["ckpt_path=RUN/checkpoints/X.ckpt"], []),  # a re-test reads its run's config
    ("train", ["task=nope"], []),  # Hydra reports it
])
def test_a_command_naming_a_task_gets_its_defaults(entry, argv, added):
    command = [f"{entry}.py", *argv]
    assert sorted(with_task_defaults(command, CONF, entry)) == sorted(command + added)


def test_a_task_alone_runs_its_default_model_and_train_refuses_a_task_with_nothing_to_train():
    assert check_model(compose_config("train", "task=intra_video_retrieval", "model=ivr_last_layer")) is None
    with pytest.raises(ValueError, match="model=random has nothing to train: task=multiple_choice scores"):
        check_model(compose_config("train", "data=spacewalk18_qa", "model=random"))


def test_train_py_adds_the_default_model_to_what_hydra_runs():
    result = run_command("train.py", "task=intra_video_retrieval", "--cfg", "hydra", timeout=120)
    assert "task=intra_video_retrieval: model=ivr_last_layer (the task's defaults" in result.stderr
    assert "- model=ivr_last_layer" in result.stdout  # hydra.overrides.task: what the run records
