"""EgoCross CloseQA: the authors' prompt and their reply parsing.

Source: MyUniverse0726/EgoCross, eval_os_closedset.py (open-source models) and eval_gpt_closedset.py /
eval_gemini_closedset.py, which share the prompt and `parse_model_response`. The prompt is theirs to the
character (including the missing separator between the last option and "The original FPS"); the frames
come first, then this text, as their scripts send them. Greedy decoding.

Their parsing, restated: read the whole reply as JSON and take its "prediction"; if that raises anything
(not JSON; JSON that is not an object; a prediction that is not a string, whose .lower() fails), search
the reply for the first `{...}` block, non-greedy (regex `\\{[\\s\\S]*?\\}`, so it ends at the first "}"),
and do the same with it; if that raises too, the reply is wrong. A parsed prediction is correct iff
prediction.lower() == correct_option_letter.lower(): exact after lower-casing, so "b" is right and
"B: 3" or " B" are wrong. A JSON object without "prediction" parses to "" (wrong, and no second try).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from spacewalk.core.errors import ConfigError

FIRST_BLOCK = re.compile(r"\{[\s\S]*?\}")


def prompt_text(question: str, option_lines: Sequence[str], original_video_fps, sampling_fps: float) -> str:
    options = "\n\nOptions:\n" + "\n".join(option_lines) if option_lines else ""
    return (
        "Please carefully read the question and its options, then select the most appropriate answer. "
        f"Question: {question}{options}"
        f"The original FPS of the video is {original_video_fps}. This image set is obtained by sampling at "
        f"{sampling_fps} fps."
        "Respond in JSON format with two fields: 'prediction' (the correct option letter: A, B, C, or D) and "
        "'reason' (a brief explanation of your choice). "
        "Do not include any other content.\n\n"
        "Example response:\n"
        "{\n"
        '    "prediction": "B",\n'
        '    "reason": "Paris is the capital city of France."\n'
        "}\n"
    )


def _prediction_of(text: str) -> str:
    """The "prediction" string of a JSON object text; raises (as the authors' code does) otherwise."""
    prediction = json.loads(text).get("prediction", "")  # AttributeError when the JSON is not an object
    prediction.lower()  # AttributeError when it is not a string: the authors' comparison raises here
    return prediction


def read_prediction(reply: str) -> str | None:
    """The prediction the authors' `parse_model_response` compares with the answer; None when it fails."""
    try:
        return _prediction_of(reply)
    except Exception:  # noqa: BLE001  (theirs: `except Exception`, whatever went wrong)
        pass
    match = FIRST_BLOCK.search(reply)
    if match is None:
        return None
    try:
        return _prediction_of(match.group(0))
    except Exception:  # noqa: BLE001
        return None


def is_correct(reply: str, correct_letter: str) -> bool:
    """The authors' `success` for one reply."""
    prediction = read_prediction(reply)
    return prediction is not None and prediction.lower() == correct_letter.lower()


def choice(reply: str, letters: Sequence[str]) -> int | None:
    """The option whose letter the prediction names (case-insensitive, exact), None when it names none:
    correct iff it is the answer's index, which is the authors' `success` whenever the answer is one of the
    option letters (the reader checks that)."""
    prediction = read_prediction(reply)
    if prediction is None:
        return None
    lowered = [letter.lower() for letter in letters]
    return lowered.index(prediction.lower()) if prediction.lower() in lowered else None


def scripted_reply(item, prompt=None) -> str:
    """The ground truth as the prompt asks for it: {"prediction": "<letter>", "reason": ...} (a scripted
    backend's check of runner, parser and scorer; conf/model/mc_scripted_json.yaml)."""
    if item.answer is None:
        raise ConfigError(f"item {item.id} has no answer to script")
    letters = item.meta.get("letters") or tuple(chr(ord("A") + i) for i in range(len(item.options)))
    return json.dumps({"prediction": letters[item.answer], "reason": "scripted from the ground truth"})
