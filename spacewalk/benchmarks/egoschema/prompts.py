"""How EgoSchema is asked: lmms-eval's video-LLM prompt with its reply parser, and the paper's contrastive texts.

The video-LLM wording is lmms-eval's `egoschema` / `egoschema_subset` task (EvolvingLMMs-Lab/lmms-eval,
lmms_eval/tasks/egoschema/utils.py `egoschema_doc_to_text`, default `lmms_eval_specific_kwargs`): the
video, then the question, each option on its own line as lmms-lab/egoschema stores it ("A. <option>"),
then "Answer with the option's letter from the given choices directly." (generation: greedy, at most 16
new tokens). Its reply parser is the MMMU rule that `egoschema_process_results_generation` uses
(`parse_multi_choice_response`), restated below; where that rule picks a letter at random (no candidate
at all) we return None instead, so an unparsable reply is counted as such (and wrong), never a coin toss.

The contrastive adaptation (the EgoSchema paper's InternVideo / CLIP-style models, docs/egoschema_egocross.md,
EgoSchema): each option becomes the text "Question: <question>? Is it <option>", scored against the video; the best
wins.
"""

from __future__ import annotations

from collections.abc import Sequence

LETTERS = ("A", "B", "C", "D", "E")
LMMS_EVAL_POST_PROMPT = "\nAnswer with the option's letter from the given choices directly."
LMMS_EVAL_MAX_NEW_TOKENS = 16


def lettered_options(options: Sequence[str]) -> list[str]:
    """The options as lmms-lab/egoschema stores them: "A. <option>", ..."""
    return [f"{LETTERS[i]}. {option}" for i, option in enumerate(options)]


def lmms_eval_text(question: str, options: Sequence[str]) -> str:
    """lmms-eval's `egoschema_doc_to_text` (default pre_prompt ''), the text that follows the video."""
    return question + "".join("\n" + op for op in lettered_options(options)) + LMMS_EVAL_POST_PROMPT


def contrastive_text(question: str, option: str) -> str:
    """'Question: <question>? Is it <option>'. EgoSchema questions end with '?' or '.'; that final mark is
    replaced by the template's '?' (our choice: the paper's template written literally would read '..?')."""
    return f"Question: {question.rstrip().rstrip('?.').rstrip()}? Is it {option}"


def contrastive_texts(question: str, options: Sequence[str]) -> tuple[str, ...]:
    return tuple(contrastive_text(question, option) for option in options)


def parse_lmms_eval(reply: str, options: Sequence[str]) -> int | None:
    """The option index lmms-eval's EgoSchema parser (MMMU's `parse_multi_choice_response`) reads from
    `reply`; None where it would pick at random."""
    letters = LETTERS[:len(options)]
    # lmms-eval compares option texts with their "A. " prefix (doc["option"][i].strip())
    contents = {letter: text.strip() for letter, text in zip(letters, lettered_options(options))}
    response = reply
    for char in (",", ".", "!", "?", ";", ":", "'"):
        response = response.strip(char)
    response = f" {response} "  # spaces so that "A " and "A." never match inside a word at the ends

    candidates: list[str] = []
    for pattern in ("({})", "{} ", "{}."):  # "(A)", then "A ", then "A."; every form that occurs
        candidates += [pattern.format(letter) for letter in letters if pattern.format(letter) in response]
    by_content = False
    if not candidates and len(response.split()) > 5:
        candidates = [letter for letter in letters if contents[letter].lower() in response.lower()]
        by_content = True
    if not candidates:
        return None
    if len(candidates) == 1:
        chosen = candidates[0]
    else:
        # the candidate whose LAST occurrence comes first (argmin of rfind; ties: the earlier candidate)
        if by_content:
            positions = [response.lower().rfind(contents[c].lower()) for c in candidates]
        else:
            positions = [response.rfind(c) for c in candidates]
        chosen = candidates[positions.index(min(positions))]
    letter = chosen.replace("(", "").replace(")", "").replace(".", "").strip()
    return letters.index(letter) if letter in letters else None
