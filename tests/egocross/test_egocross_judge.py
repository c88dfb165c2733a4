"""`python -m spacewalk.score egocross --task openqa` with its own LLM judge: the OpenAI-compatible client
against a stub chat-completions server on 127.0.0.1 (the authors' judge prompt, sent only for the replies
the substring rule leaves open; a mark >= 4 correct; a judge reply with no readable mark counted wrong and
listed), a tiny local transformers checkpoint as the judge, and the errors: bad reply files (exit 2,
naming file, item and field, before any judge request), missing or contradictory options (exit 2), a judge
that refuses (exit 1)."""

from __future__ import annotations

import json

import pytest

from spacewalk.benchmarks.egocross import openqa
from spacewalk.benchmarks.egocross.dataset import TESTBED_FILE, EgoCross
from spacewalk.benchmarks.egocross.synthetic import ANSWERS_FILE, Options, generate_egocross
from spacewalk.multiple_choice import tiny_models
from spacewalk.score import main as score_main

from helpers.openai_stub import stub_fixture

MARK_4, NO_MARK, MARK_2 = '{"mark": 4, "reason": "same meaning"}', "The prediction looks right to me.", '{"mark": 2}'


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = generate_egocross(tmp_path_factory.mktemp("ec") / "egocross", Options(per_category=1, frames=(2, 2)))
    return root, EgoCross(root, answers=root / ANSWERS_FILE).questions


# the judge's defaults: never the real API here
stub = stub_fixture("OPENAI_BASE_URL", OPENAI_API_KEY="sk-judge")


def prediction(q, kind: int):
    """kind 0: the answer text inside the prediction (the substring rule, no judge); 1-3: for the judge."""
    return f"I see {q.answer.text} here" if kind == 0 else f"a paraphrase number {kind}"


def write_replies(path, questions):
    path.write_text(json.dumps({str(q.id): json.dumps({"prediction": prediction(q, i % 4), "reason": "r"})
                                for i, q in enumerate(questions)}))
    return path


def command(root, replies, *more: str) -> list[str]:
    return ["egocross", "--task", "openqa", "--data", str(root / TESTBED_FILE), "--answers", str(root / ANSWERS_FILE),
            "--predictions", str(replies), *more]


def test_the_openai_judge_scores_what_the_substring_rule_leaves_open(data, stub, tmp_path, capsys):
    root, questions = data
    replies = write_replies(tmp_path / "replies.json", questions)
    kinds = {q.id: i % 4 for i, q in enumerate(questions)}
    asked = [q for q in questions if kinds[q.id]]
    stub.queue = [(200, {1: MARK_4, 2: NO_MARK, 3: MARK_2}[kinds[q.id]], 0) for q in asked]
    judgements = tmp_path / "judgements.json"
    assert score_main(command(root, replies, "--judge", "openai", "--judge-model", "stub-judge",
                              "--judge-requests-per-minute", "0", "--judge-concurrency", "1",  # the queue's order
                              "--judgements", str(judgements))) == 0
    metrics = json.loads(capsys.readouterr().out)

    # one request per reply the substring rule leaves open, each the authors' judge prompt, text only
    assert len(stub.requests) == len(asked)
    for request, q in zip(stub.requests, asked):
        body = request["body"]
        assert request["auth"] == "Bearer sk-judge" and body["model"] == "stub-judge" and body["max_tokens"] == 512
        assert body["temperature"] == 0.0 and len(body["messages"]) == 1
        assert body["messages"][0]["content"] == [{"type": "text", "text": openqa.judge_prompt(
            q.question, q.answer.text, q.answer.detailed, prediction(q, kinds[q.id]))}]

    count = {k: sum(1 for v in kinds.values() if v == k) for k in range(4)}
    assert metrics["total"] == len(questions) and metrics["correct"] == count[0] + count[1]
    assert metrics["accuracy"] == 100 * (count[0] + count[1]) / len(questions)
    assert metrics["judge"] == "openai:stub-judge"
    assert metrics["score_sources"] == {"substring": count[0], "judge: mark": count[1] + count[3],
                                        "judge: no {...} block": count[2]}
    # the unreadable judge replies: scored 0 (wrong) and listed by id with the reason
    assert metrics["judge_unreadable"] == {str(q.id): "no {...} block" for q in questions if kinds[q.id] == 2}
    assert metrics["mean_score"] == (5 * count[0] + 4 * count[1] + 2 * count[3]) / len(questions)
    written = json.loads(judgements.read_text())
    assert len(written) == len(questions)
    first_unreadable = next(q for q in questions if kinds[q.id] == 2)
    assert written[str(first_unreadable.id)] | {"judge_prompt": None} == {
        "prediction": prediction(first_unreadable, 2), "score": 0, "correct": False,
        "source": "judge: no {...} block", "judge_prompt": None, "judge_reply": NO_MARK}


@pytest.mark.parametrize("edit, item, field", [
    (lambda r: r.update({"1": 4}), "1", "1"),                    # a reply that is not text
    (lambda r: r.pop("2"), "2", "id"),                           # a question without a reply
    (lambda r: r.update({"99999": "{}"}), "99999", "id"),        # an id that is not in the testbed
])
def test_bad_reply_files_fail_before_any_judge_request(data, stub, tmp_path, capsys, edit, item, field):
    root, questions = data
    path = write_replies(tmp_path / "replies.json", questions)
    replies = json.loads(path.read_text())
    edit(replies)
    path.write_text(json.dumps(replies))
    assert score_main(command(root, path, "--judge", "openai", "--judge-model", "stub-judge")) == 2
    err = capsys.readouterr().err
    assert str(path) in err and f"item {item}" in err and field in err
    assert stub.requests == []


def test_judge_options_and_a_judge_that_refuses(data, stub, tmp_path, capsys):
    root, questions = data
    replies = write_replies(tmp_path / "replies.json", questions)
    for more in ([], ["--judge", "openai"], ["--judge", "openai", "--judge-model", "m", "--no-judge"]):
        with pytest.raises(SystemExit) as e:
            score_main(command(root, replies, *more))
        assert e.value.code == 2
    assert "--judge-model" in capsys.readouterr().err
    stub.queue = [(401, "invalid key", 0)]  # not retried: the run stops, saying why
    assert score_main(command(root, replies, "--judge", "openai", "--judge-model", "m")) == 1
    err = capsys.readouterr().err
    assert "the judge (openai:m) failed" in err and "HTTP 401" in err and "OPENAI_API_KEY" in err
    assert score_main(command(root, replies, "--judge", "qwen2_5_vl", "--judge-model", str(tmp_path / "none"))) == 1
    assert "cannot load the judge" in capsys.readouterr().err


@pytest.mark.parametrize("judge", ["transformers", "qwen2_5_vl"])  # the family found from the checkpoint, or named
def test_a_local_transformers_checkpoint_as_the_judge(data, tmp_path, capsys, judge):
    root, questions = data
    replies = write_replies(tmp_path / "replies.json", questions[:6])
    checkpoint = tiny_models.write(tmp_path / "tiny", ["qwen2_5_vl"])["qwen2_5_vl"]
    args = command(root, replies, "--judge", judge, "--judge-model", str(checkpoint), "--judge-max-tokens", "4",
                   "--judgements", str(tmp_path / "judgements.json"))
    subset = write_subset(root, questions[:6], tmp_path)
    args[args.index("--data") + 1], args[args.index("--answers") + 1] = str(subset), str(subset)
    assert score_main(args) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["judge"] == f"qwen2_5_vl:{checkpoint}" and metrics["total"] == 6
    judged = json.loads((tmp_path / "judgements.json").read_text())
    # random weights: what the judge says is noise, but every open reply went to it and got a reading
    assert sum(j["source"].startswith("judge: ") for j in judged.values()) == sum(i % 4 != 0 for i in range(6))
    assert all(isinstance(j["judge_reply"], str) for j in judged.values() if j["source"].startswith("judge: "))
    assert set(metrics["judge_unreadable"]) <= set(judged)


def write_subset(root, questions, tmp_path):
    """The testbed JSON holding only these questions, the answers added to each (the judge sees a few prompts)."""
    answers = json.loads((root / ANSWERS_FILE).read_text())
    keep = {q.id for q in questions}
    path = tmp_path / "subset" / TESTBED_FILE
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([row | answers[str(row["id"])] for row in json.loads((root / TESTBED_FILE).read_text())
                                if row["id"] in keep]))
    return path
