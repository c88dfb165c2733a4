"""EgoCross OpenQA: the authors' prompt, their reply parsing, the substring rule and their LLM judge.

Source: MyUniverse0726/EgoCross, eval_gpt_openset.py and eval_gemini_openset.py (`parse_model_response`,
`evaluate_answer_with_detail`, and the prompt built in `run`). Restated:
- the reply's "prediction" is read as in CloseQA (whole reply as JSON, else the first `{...}` block), but
  kept whatever its JSON type; a reply that yields none leaves the prediction "" (which still goes on to
  the judge, as theirs does);
- a string answer found in the prediction (both lower-cased) scores 5 without the judge; a numeric answer
  scores 5 when equal to the prediction or when its digits occur in str(prediction); a prediction that is
  not a string against a string answer makes their `.lower()` raise, and after their five retries the
  item keeps score 0: so do we;
- otherwise the judge (their prompt, with question, short answer, detailed answer and prediction) replies;
  its first `{...}` block (non-greedy) is read as JSON and "mark" (default 0) is the score; a reply without
  such a block, or one that is not valid JSON, leaves 0 (their function returns None and the caller's
  retries end at 0). Their caller compares the mark with 4 outside any try, so a mark that is not a number
  stops their script; we count it as 0 and say so in the item's record.
- correct iff score >= 4.
Their judge ran at temperature 0.01, top_p 0.9, at most 512 new tokens; ours is whatever text backend of
the harness is given (its own decoding settings, greedy for ours), at their 512 new tokens
(`JUDGE_MAX_TOKENS`, whatever limit the judge's backend config holds: spacewalk/benchmarks/egocross/task.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spacewalk.benchmarks.egocross.closeqa import FIRST_BLOCK

CORRECT_FROM = 4
# the authors' judge: at most 512 new tokens (docs/egoschema_egocross.md, EgoCross); the judge's own limit, never the
# answering model's
JUDGE_MAX_TOKENS = 512


def prompt_text(question: str, original_video_fps, sampling_fps: float) -> str:
    return (
        "Please carefully read the question and the provided context, then provide a clear and concise answer "
        "based on your understanding. "
        f"Question: {question}\n"
        f"The original FPS of the video is {original_video_fps}. This image set is obtained by sampling at "
        f"{sampling_fps} fps."
        "Your answer should be reasoned and directly address the question. "
        "Respond in JSON format with two fields: 'prediction' (your answer as text) and 'reason' (a brief "
        "explanation of your reasoning). "
        "Do not include any other content.\n\n"
        "Example response:\n"
        "{\n"
        '    "prediction": "The time duration of the video is 10 seconds.",\n'
        '    "reason": "The total number of frames is 240 and the frame rate is 24 FPS, so 240 / 24 = 10 '
        'seconds."\n'
        "}\n"
    )


# The judge prompt of `evaluate_answer_with_detail`, line by line: their triple-quoted string keeps its
# source indentation and the trailing spaces of several lines, and both reach the judge.
_JUDGE_LINES = (
    "",
    "        You are an intelligent chatbot designed for evaluating the correctness of AI assistant predictions "
    "for question-answer pairs. Your task is to compare the predicted answer with the ground-truth and "
    "determine if the predicted answer is correct or not. Here's how you can accomplish the task: ",
    "        ##INSTRUCTIONS: ",
    "        - Focus on the factual accuracy and semantic equivalence of the predicted answer with the "
    "ground-truth. ",
    "        - Consider uncertain predictions, such as 'it is impossible to answer the question from the video', "
    "as incorrect, unless the ground truth answer also says that.",
    "        Please evaluate the following video-based question-answer pair: ",
    "        Question: {question} ",
    "        Correct ground truth: {answer} ",
    "        Detailed ground truth: {detailed_answer}",
    "        Predicted Answer: {pred} ",
    "        Provide your evaluation as a correct/incorrect prediction along with the score where the score is "
    "an integer value between 0 (fully wrong) and 5 (fully correct). The middle score provides the percentage "
    "of correctness. Please generate the response in the form of a json object with the following fields:",
    "        ```",
    "        {",
    '            "mark": 4,  # The score of the prediction',
    '            "reason": "",  # The reason for the score',
    "        }",
    "        ```",
    "    ",
)
JUDGE_TEMPLATE = "\n".join(_JUDGE_LINES)


def judge_prompt(question: str, answer: str | int, detailed_answer: str, prediction: Any) -> str:
    # their order of replacements (a question that contains "{answer}" is rewritten too, as theirs is)
    return (JUDGE_TEMPLATE.replace("{question}", question).replace("{answer}", str(answer))
            .replace("{pred}", str(prediction)).replace("{detailed_answer}", str(detailed_answer)))


def read_prediction(reply: str) -> Any:
    """The prediction the authors' open-set `parse_model_response` returns: any JSON value, "" when none."""
    try:
        return json.loads(reply).get("prediction", "")
    except Exception:  # noqa: BLE001  (theirs: any failure falls through to the block search)
        pass
    try:
        match = FIRST_BLOCK.search(reply)
        if match:
            return json.loads(match.group(0)).get("prediction", "")
    except Exception:  # noqa: BLE001
        pass
    return ""


def substring_score(answer: str | int, prediction: Any) -> int | None:
    """5 when the rule before the judge decides, 0 when their code fails there (kept at 0), None: ask the judge."""
    if isinstance(answer, int) and (prediction == answer or str(answer) in str(prediction)):
        return 5
    if isinstance(answer, str):
        if not isinstance(prediction, str):
            return 0
        if answer.lower() in prediction.lower():
            return 5
    return None


def read_mark(judge_reply: str) -> tuple[float, str]:
    """The judge's score and how it was read ("mark", or why it is 0)."""
    match = FIRST_BLOCK.search(judge_reply)
    if match is None:
        return 0, "no {...} block"
    try:
        data = json.loads(match.group(0))
        mark = data.get("mark", 0)
    except Exception as e:  # noqa: BLE001
        return 0, f"unreadable block ({type(e).__name__})"
    if isinstance(mark, bool) or not isinstance(mark, (int, float)):
        return 0, f"mark is not a number: {mark!r}"
    return mark, "mark"


def judge_agreement(cases: Sequence[tuple[str, str | int, str, str]], judgements: Sequence[Judgement],
                    generate: Callable[[list[str]], list[str]], batch_size: int = 8) -> dict[str, Any]:
    """How often the judge agrees with the substring rule: the cases the rule scored 5 (the answer found in the
    prediction, so the authors never ask the judge) are put to the judge as well, its marks used for nothing
    else: `cases` (how many), `agree` (the judge also marks them correct, >= 4), `percent`, and `unreadable` (its
    reply gave no mark). Ours, not the authors': a check of a judge before its marks are trusted."""
    decided = [i for i, j in enumerate(judgements) if j.source == "substring"]
    prompts = [judge_prompt(*cases[i][:3], judgements[i].prediction) for i in decided]
    marks: list[tuple[float, str]] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start:start + batch_size]
        replies = generate(chunk)
        if len(replies) != len(chunk):
            raise RuntimeError(f"the judge returned {len(replies)} replies for {len(chunk)} prompts")
        marks += [read_mark(reply) for reply in replies]
    agree = sum(mark >= CORRECT_FROM for mark, _ in marks)
    return {"cases": len(decided), "agree": agree, "percent": 100.0 * agree / len(decided) if decided else None,
            "unreadable": sum(how != "mark" for _, how in marks)}


@dataclass(frozen=True)
class Judgement:
    prediction: Any
    score: float
    source: str  # "substring", "substring_error", "judge: <how the mark was read>", "no_judge"
    judge_prompt: str | None = None
    judge_reply: str | None = None

    @property
    def correct(self) -> bool:
        return self.score >= CORRECT_FROM


def judge_replies(cases: Sequence[tuple[str, str | int, str, str]],
                  generate: Callable[[list[str]], list[str]] | None, batch_size: int = 8) -> list[Judgement]:
    """Score (question, answer_text, detailed_answer, reply) cases: the substring rule first, then the judge
    through `generate` (a list of prompt texts in, one reply text each out) for those it leaves open.
    With `generate` None those are scored 0 with source "no_judge" (a lower bound, reported as such)."""
    results: list[Judgement | None] = []
    pending: list[tuple[int, str]] = []
    for question, answer, detailed, reply in cases:
        prediction = read_prediction(reply)
        score = substring_score(answer, prediction)
        if score is not None:
            results.append(Judgement(prediction, score, "substring" if score else "substring_error"))
        elif generate is None:
            results.append(Judgement(prediction, 0, "no_judge"))
        else:
            pending.append((len(results), judge_prompt(question, answer, detailed, prediction)))
            results.append(None)
    for start in range(0, len(pending), batch_size):
        chunk = pending[start:start + batch_size]
        replies = generate([text for _, text in chunk])
        if len(replies) != len(chunk):
            raise RuntimeError(f"the judge returned {len(replies)} replies for {len(chunk)} prompts")
        for (i, text), judge_reply in zip(chunk, replies):
            mark, how = read_mark(judge_reply)
            results[i] = Judgement(read_prediction(cases[i][3]), mark, f"judge: {how}", text, judge_reply)
    return results  # type: ignore[return-value]
