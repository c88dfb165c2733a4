"""Generation limits (spacewalk/multiple_choice/generation.py): each benchmark's answer format sets how many new
tokens a model may write, the judge has its own, a model config's number overrides the task's, and run.json
says which limit each model used. What reaches the model is checked where it leaves the process: the
kwargs of a tiny transformers model's `generate` and the bodies a stub chat-completions server receives."""

from __future__ import annotations

import json

import hydra
import pytest
from hydra.errors import InstantiationException

from spacewalk.benchmarks.egocross import openqa
from spacewalk.benchmarks.egocross.task import ANSWER_LIMITS as EGOCROSS_LIMITS
from spacewalk.benchmarks.egocross.task import EgoCrossCloseQATask, EgoCrossOpenQATask, open_egocross
from spacewalk.benchmarks.egoschema.task import EgoSchemaTask
from spacewalk.benchmarks.spacewalk18.questions.question_answering import ANSWER_LIMITS as SPACEWALK18_LIMITS
from spacewalk.benchmarks.spacewalk18.questions.question_answering import QuestionAnswering
from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import (
    StepRatingQuestions,
    StepRecognitionQuestions,
)
from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.baselines import ScriptedBackend
from spacewalk.multiple_choice.backends.caption_enhanced import CAPTION_LIMITS, CaptionEnhancedBackend
from spacewalk.multiple_choice.backends.openai_chat import OpenAIChatBackend
from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend
from spacewalk.multiple_choice.generation import FROM_CONFIG, AnswerLimits, generation_record
from spacewalk.multiple_choice.task import Prompt
from spacewalk.multiple_choice.tiny_models import tiny_qwen2_5_vl
from spacewalk.training.tasks import take_served_tasks

from conftest import compose_evaluate
from openai_stub import stub_fixture

stub = stub_fixture()


def api(**settings) -> OpenAIChatBackend:
    return OpenAIChatBackend(**({"model": "stub", "base_url_env": "TEST_BASE_URL", "api_key_env": "NO_SUCH_KEY",
                                 "num_frames": 1, "requests_per_minute": None} | settings))


def run_json(run_dir) -> dict:
    return json.loads((run_dir / runner.RUN_FILE).read_text())["generation"]


def tiny_qwen(spy: list, **settings) -> TransformersVLMBackend:
    """A tiny random Qwen2.5-VL whose `generate` remembers the max_new_tokens it was given and then writes 2
    tokens (random weights never stop by themselves: 2048 of them would only cost time)."""
    model, processor = tiny_qwen2_5_vl()
    original = model.generate

    def generate(**kwargs):
        spy.append(kwargs["max_new_tokens"])
        return original(**(kwargs | {"max_new_tokens": 2}))

    model.generate = generate
    return TransformersVLMBackend("qwen2_5_vl", model_object=model, processor=processor, num_frames=2,
                                  dtype="float32", device="cpu", **settings)


def test_each_benchmark_declares_its_answer_limits():
    # EgoCross: the authors' scripts (open models 2048 new tokens, API models none); the judge 512
    assert (EGOCROSS_LIMITS.local, EGOCROSS_LIMITS.api) == (2048, None)
    assert EgoCrossCloseQATask.answer_limits is EgoCrossOpenQATask.answer_limits is EGOCROSS_LIMITS
    assert openqa.JUDGE_MAX_TOKENS == 512
    # EgoSchema: lmms-eval's egoschema task, whose prompt and parser we use (16, API models too)
    assert (EgoSchemaTask.answer_limits.local, EgoSchemaTask.answer_limits.api) == (16, 16)
    # Spacewalk-18: ours, 128 for the letter (QA), the number (step questions) and the rating
    assert (SPACEWALK18_LIMITS.local, SPACEWALK18_LIMITS.api) == (128, 128)
    for task in (QuestionAnswering, StepRecognitionQuestions, StepRatingQuestions):
        assert task.answer_limits is SPACEWALK18_LIMITS
    # the caption-enhanced captioner: the caption prompt's
    assert (CAPTION_LIMITS.local, CAPTION_LIMITS.api) == (128, 128)
    with pytest.raises(ValueError, match="AnswerLimits.local=0"):
        AnswerLimits(local=0, api=None, source="x")


def test_the_model_configs_leave_the_limit_to_the_benchmark():
    """Every generating model config holds null (the task's limit); the EgoCross data config holds the
    authors' judge limit, the number the code's default is."""
    for model, key in (("mc_qwen2_5_vl", "max_new_tokens"), ("mc_llava_onevision", "max_new_tokens"),
                       ("mc_openai", "max_tokens")):
        assert compose_evaluate("data=egocross", f"model={model}").model[key] is None
    caption = compose_evaluate("data=egocross", "model=mc_caption_enhanced").model
    assert caption.llm.max_tokens is None and caption.captioner.max_new_tokens is None
    assert compose_evaluate("data=egocross").data.judge_max_tokens == openqa.JUDGE_MAX_TOKENS


def test_egocross_closeqa_sends_the_authors_2048_to_an_open_model(synthetic_egocross_root, tmp_path):
    root = synthetic_egocross_root
    task = open_egocross(root=root, answers=root / "answers.json", limit=2)
    spy: list = []
    backend = tiny_qwen(spy)  # no max_new_tokens: mc_qwen2_5_vl's null
    runner.run(task, backend, tmp_path, progress=False)
    assert spy and set(spy) == {2048}
    assert run_json(tmp_path) == {"task_limits": {"local": 2048, "api": None, "source": EGOCROSS_LIMITS.source},
                                  "answer": {"max_new_tokens": 2048, "from": EGOCROSS_LIMITS.source}}
    assert backend.max_new_tokens is None  # the caller's backend is left as it was (the runner uses a copy)


def test_egocross_closeqa_sends_no_max_tokens_to_an_api_model(synthetic_egocross_root, stub, tmp_path):
    root = synthetic_egocross_root
    task = open_egocross(root=root, answers=root / "answers.json", limit=2)
    stub.default = '{"prediction": "A", "reason": "r"}'
    runner.run(task, api(), tmp_path, progress=False)
    assert len(stub.requests) == 2 and all("max_tokens" not in r["body"] for r in stub.requests)
    assert run_json(tmp_path)["answer"] == {"max_tokens": None, "from": EGOCROSS_LIMITS.source}


def test_a_number_in_the_model_config_overrides_the_task(synthetic_egocross_root, stub, tmp_path):
    root = synthetic_egocross_root
    task = open_egocross(root=root, answers=root / "answers.json", limit=1)
    spy: list = []
    runner.run(task, tiny_qwen(spy, max_new_tokens=5), tmp_path / "open", progress=False)
    assert spy == [5] and run_json(tmp_path / "open")["answer"] == {"max_new_tokens": 5, "from": FROM_CONFIG}
    runner.run(task, api(max_tokens=300), tmp_path / "api", progress=False)
    assert stub.requests[-1]["body"]["max_tokens"] == 300


def test_the_judge_has_its_own_limit_never_the_answering_models(synthetic_egocross_root, stub, tmp_path):
    """OpenQA with one backend config answering and judging (data.judge=${model}): the answers go out with the
    answering model's limit (none: the authors' for API models; or the config's 6), the judge's requests with
    512, and run.json says both."""
    root = synthetic_egocross_root
    stub.default = '{"prediction": "a paraphrase", "mark": 1}'  # no substring hit: every reply is judged
    for own, sent in ((None, None), (6, 6)):
        stub.requests.clear()
        backend = api(max_tokens=own)
        task = open_egocross(root=root, answers=root / "answers.json", qa="openqa", limit=2, judge=backend)
        run_dir = tmp_path / f"own{own}"
        runner.run(task, backend, run_dir, progress=False)
        answers = [r["body"] for r in stub.requests if r["body"]["messages"][0]["content"][0]["type"] == "image_url"]
        judged = [r["body"] for r in stub.requests if r["body"]["messages"][0]["content"][0]["type"] == "text"]
        assert len(answers) == 2 and [b.get("max_tokens") for b in answers] == [sent, sent]
        assert len(judged) == 2 and [b["max_tokens"] for b in judged] == [512, 512]
        generation = run_json(run_dir)
        assert generation["answer"]["max_tokens"] == sent and generation["judge"]["max_tokens"] == 512
        assert generation["judge_limits"]["local"] == generation["judge_limits"]["api"] == 512
        assert backend.max_tokens == own  # judging did not change the answering backend


def test_the_judge_limit_through_the_configs(synthetic_egocross_root):
    """`python evaluate.py data=egocross data.qa=openqa 'data.judge=${model}' model=mc_openai model.max_tokens=6`
    and with data.judge_max_tokens=100: the judge copies the answering model's config but not its limit."""
    root = synthetic_egocross_root
    common = ("data=egocross", f"data.root={root}", f"data.answers={root / 'answers.json'}", "data.qa=openqa",
              "data.judge=${model}", "model=mc_openai", "model.max_tokens=6")
    for extra, judge_limit in (((), 512), (("data.judge_max_tokens=100",), 100)):
        cfg = compose_evaluate(*common, *extra)
        take_served_tasks(cfg)  # as the entry point does before anything is built
        task = hydra.utils.instantiate(cfg.data, _convert_="all")
        backend, generation = generation_record(task, hydra.utils.instantiate(cfg.model, _convert_="all"))
        assert generation["answer"] == {"max_tokens": 6, "from": FROM_CONFIG}
        assert generation["judge"]["max_tokens"] == judge_limit and task.judge.max_tokens == judge_limit
    with pytest.raises(InstantiationException, match="judge_max_tokens=0"):  # Hydra's wrapper of the ValueError
        refused = compose_evaluate(*common, "data.judge_max_tokens=0")
        take_served_tasks(refused)
        hydra.utils.instantiate(refused.data, _convert_="all")


def test_caption_enhanced_llm_gets_the_task_limit_and_the_captioner_the_caption_limit():
    model, processor = tiny_qwen2_5_vl()
    captioner = TransformersVLMBackend("qwen2_5_vl", model_object=model, processor=processor, text_only=True)
    backend = CaptionEnhancedBackend(captioner, api())
    for limits, llm in ((EGOCROSS_LIMITS, None), (SPACEWALK18_LIMITS, 128)):
        assert backend.limited(limits).generation_settings() == {
            "llm": {"max_tokens": llm, "from": limits.source},
            "captioner": {"max_new_tokens": 128, "from": CAPTION_LIMITS.source}}
    explicit = CaptionEnhancedBackend(TransformersVLMBackend("qwen2_5_vl", model_object=model, processor=processor,
                                                             text_only=True, max_new_tokens=40), api(max_tokens=9))
    assert explicit.limited(EGOCROSS_LIMITS).generation_settings() == {
        "llm": {"max_tokens": 9, "from": FROM_CONFIG}, "captioner": {"max_new_tokens": 40, "from": FROM_CONFIG}}


def test_a_resume_with_another_limit_is_refused(synthetic_egocross_root, stub, tmp_path):
    root = synthetic_egocross_root
    task = open_egocross(root=root, answers=root / "answers.json", limit=2)
    runner.run(task, api(), tmp_path, progress=False)
    runner.run(task, api(), tmp_path, progress=False)  # the same limit: resumes (nothing left to answer)
    with pytest.raises(ValueError, match=r"other settings \(differing: \['generation'\]"):
        runner.run(task, api(max_tokens=16), tmp_path, progress=False)


def test_a_generating_backend_needs_a_limit():
    """A task that declares no limits cannot run a generating backend (it would get its library's default);
    a transformers backend used on its own without a limit says so instead of generating."""

    class NoLimits:
        name = "no_limits"

    with pytest.raises(ValueError, match="task no_limits declares no answer_limits"):
        generation_record(NoLimits(), api())
    assert generation_record(NoLimits(), ScriptedBackend())[1] == {"answer": None}  # writes no model text
    model, processor = tiny_qwen2_5_vl()
    backend = TransformersVLMBackend("qwen2_5_vl", model_object=model, processor=processor, text_only=True)
    with pytest.raises(ValueError, match="max_new_tokens is not set"):
        backend.generate([Prompt(("Say a letter.",))])
    with pytest.raises(ValueError, match="max_new_tokens=0"):
        TransformersVLMBackend("qwen2_5_vl", model_object=model, processor=processor, max_new_tokens=0)
