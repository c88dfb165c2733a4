"""EgoSchema scoring and submission files (docs/egoschema_egocross.md, EgoSchema).

Accuracy is the only metric. Locally it is computed on the 500 questions of subset_answers.json; the full
5031 are scored by the authors' server (a JSON `{q_uid: answer}` posted by their validate.py) or by Kaggle
(a CSV with the header `q_uid,answer`). Both files hold one integer 0-4 per question; a reply our parser
could not read is written as -1 (what lmms-eval writes for it), which both count as wrong.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from spacewalk.core.errors import DataError
from spacewalk.core.io import load_json, write_json, write_text

UNPARSABLE = -1
CSV_HEADER = ("q_uid", "answer")


def accuracy(choices: Mapping[str, int | None], answers: Mapping[str, int]) -> dict[str, float | int | None]:
    """Accuracy (percent) over the questions of `answers`; a missing or None choice counts as wrong and as
    unparsable. With no question of known answer (the full split's items outside the public 500) the accuracy is
    None, not 0: no number was measured, and a 0 would be averaged as one by whatever reads metrics.json."""
    correct = sum(1 for q_uid, answer in answers.items() if choices.get(q_uid) == answer)
    unparsable = sum(1 for q_uid in answers if choices.get(q_uid) is None)
    total = len(answers)
    return {"accuracy": 100.0 * correct / total if total else None, "correct": correct, "total": total,
            "unparsable": unparsable}


def submission(choices: Mapping[str, int | None], order: Sequence[str]) -> dict[str, int]:
    """{q_uid: answer} in `order` (questions.json order), -1 for an unparsable reply."""
    missing = [q for q in order if q not in choices]
    if missing:
        raise ValueError(f"{len(missing)} questions have no answer (first: {missing[0]}); a submission needs all")
    return {q: UNPARSABLE if choices[q] is None else int(choices[q]) for q in order}


def write_submission_json(path: str | Path, answers: Mapping[str, int]) -> Path:
    """The file the authors' validate.py posts to their server: {q_uid: answer}."""
    return write_json(path, dict(answers), indent=4)


def write_submission_csv(path: str | Path, answers: Mapping[str, int]) -> Path:
    """Kaggle's file: header `q_uid,answer`, one row per question."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    writer.writerows(answers.items())
    return write_text(path, out.getvalue())


HOLDS = ("auto", "indices", "replies")  # what a predictions JSON holds (the score command's --holds)


def _choice(value, path: Path, q_uid: str, parse: Callable[[str, str], int | None] | None, holds: str = "auto"
            ) -> int | None:
    """One prediction: an answer index (-1: unparsable), null, or a raw reply that `parse` reads. `holds` says
    which the file's texts are: "indices" (a text is an index, "2" is 2), "replies" (a text is a model's reply,
    "0" included, read by the parser like any other), or "auto" (numbers are indices, other texts replies, and a
    text that reads as a number is refused, since it could be either)."""
    if value is None:
        return None
    if isinstance(value, str):
        digits = value.strip().lstrip("+-").isdigit()
        if holds == "indices":
            if not digits:
                raise DataError(f"expected an answer index 0-4 or -1 (--holds indices), got the text {value!r}",
                                file=path, item=q_uid, field=q_uid)
            return _index(int(value.strip()), path, q_uid)
        # "0".."4" may be an index written as a string (lmms-eval's parser reads no letter in it: every such answer
        # would count wrong, 0 %) or a model's own reply: the authors' validate.py and Kaggle take integers, and a
        # string is not documented to be either, so the user says which (--holds) rather than it being guessed
        if digits and holds == "auto":
            raise DataError(f"{value!r} could be an answer index written as a string or a model's reply: write an "
                            f"index as a number ({value.strip()}, not {json.dumps(value)}), or say what the file "
                            "holds: --holds indices, or --holds replies", file=path, item=q_uid, field=q_uid)
        if parse is None:
            raise DataError("a raw reply needs the questions file to be parsed (--questions or --root)",
                            file=path, item=q_uid, field=q_uid)
        return parse(q_uid, value)
    if holds == "replies":
        raise DataError(f"expected a reply text (--holds replies), got {value!r}", file=path, item=q_uid,
                        field=q_uid)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or float(value) != int(value):
        raise DataError(f"expected an answer index 0-4, -1, null or a reply text, got {value!r}", file=path,
                        item=q_uid, field=q_uid)
    return _index(int(value), path, q_uid)


def _index(value: int, path: Path, q_uid: str) -> int | None:
    if value == UNPARSABLE:
        return None
    if not 0 <= value <= 4:
        raise DataError(f"answer {value} is not an option index 0-4 (or -1)", file=path, item=q_uid, field=q_uid)
    return value


def read_predictions(path: str | Path, parse: Callable[[str, str], int | None] | None = None,
                     known: set[str] | None = None, holds: str = "auto") -> dict[str, int | None]:
    """q_uid -> choice (None: unparsable) from the server JSON, Kaggle CSV (by the .csv suffix), or a JSON of
    raw replies {q_uid: text} read with `parse(q_uid, text)`. `known`: the q_uids that may appear. `holds`: what
    a JSON's texts are (_choice; HOLDS); a CSV holds indices."""
    if holds not in HOLDS:
        raise ValueError(f"holds must be one of {HOLDS}, got {holds!r}")
    path = Path(path)
    if path.suffix.lower() == ".csv":
        rows = _read_csv(path)
    else:
        raw = load_json(path)
        if not isinstance(raw, dict):
            raise DataError(f"expected an object {{q_uid: answer or reply}}, got {type(raw).__name__}", file=path)
        rows = raw
    choices = {}
    for q_uid, value in rows.items():
        if known is not None and q_uid not in known:
            raise DataError("not an EgoSchema question", file=path, item=q_uid, field="q_uid")
        choices[q_uid] = _choice(value, path, q_uid, parse, holds)
    return choices


def _read_csv(path: Path) -> dict[str, int]:
    if not path.is_file():
        raise DataError("is a folder, not a file" if path.is_dir() else "file not found", file=path)
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header) != CSV_HEADER:
            raise DataError(f"the header must be {','.join(CSV_HEADER)}, got {header}", file=path)
        rows: dict[str, int] = {}
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) != 2:
                raise DataError(f"line {line}: expected 2 columns, got {len(row)}", file=path)
            q_uid, answer = row[0].strip(), row[1].strip()
            if q_uid in rows:
                raise DataError("duplicate row", file=path, item=q_uid, field="q_uid")
            try:
                rows[q_uid] = int(answer)
            except ValueError:
                raise DataError(f"line {line}: not an integer: {answer!r}", file=path, item=q_uid,
                                field="answer") from None
    return rows


def score_predictions(predictions: Mapping[str, int | None], answers: Mapping[str, int],
                      predictions_file: str | Path) -> dict[str, float | int]:
    """Subset accuracy of a predictions file; every answered question must have a prediction."""
    for q_uid in answers:
        if q_uid not in predictions:
            raise DataError("no prediction for a question of the answered subset", file=predictions_file,
                            item=q_uid, field="q_uid")
    return accuracy(predictions, answers)
