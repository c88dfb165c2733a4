"""The per-item records of a multiple-choice run on disk, compact: `records.jsonl` (one line per item) and
`prompt_parts.jsonl` (each distinct prompt part once).

A prompt is a few parts (spacewalk/multiple_choice/task.py), and most of them repeat across items: the
instruction, the question, a recording's K + 1 choices (several KB), a summary. The records therefore name
their prompt's parts by id (`"prompt_parts": [id, ...]`, the first 16 hex digits of the part text's
SHA-256), and `prompt_parts.jsonl` holds each distinct part once (`{"id": ..., "text": ...}`); a part is
written, flushed and synced before the first record that names it, so a killed run never leaves a record
whose prompt cannot be read back. (The 12,000 test samples of Spacewalk-18 step questions at w = 5 min:
records.jsonl of 121 MB with every prompt in full; 9 MB + 20 MB of distinct parts, mostly the windows'
transcripts, this way.)
`prompts: full` keeps the whole text in every record (`"prompt": ...`) instead; a run directory may hold
both forms (a resume with the other setting), and every reader takes both.

`read_run(run_dir)` gives the records with their prompt texts put back together (what a model was asked,
visuals as `<visual>` / `<video: ...>` / `<image: ...>`); `python -m spacewalk.multiple_choice.records
RUN_DIR [ITEM_ID ...]` prints them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import IO, Any

from spacewalk.core.arguments import existing_folder
from spacewalk.core.command_errors import user_errors_reported
from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_path
from spacewalk.multiple_choice.items import MultipleChoiceItem
from spacewalk.multiple_choice.task import Record
from spacewalk.results.layout import PREDICTIONS

log = logging.getLogger(__name__)

RECORDS = "records.jsonl"
PARTS = "prompt_parts.jsonl"
PROMPT_FORMS = ("parts", "full")


def shard_name(rank: int) -> str:
    return f"records.rank{rank}.jsonl"


def parts_shard_name(rank: int) -> str:
    return f"prompt_parts.rank{rank}.jsonl"


def part_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def record_to_json(record: Record) -> dict[str, Any]:
    """The record's line: the prompt as part ids when it has them, else as its text."""
    out = asdict(record)
    parts = out.pop("prompt_parts")
    if parts is not None:
        del out["prompt"]
        out = {"item_id": out.pop("item_id"), "prompt_parts": list(parts), **out}
    out["scores"] = None if record.scores is None else list(record.scores)
    out["meta"] = dict(record.meta)
    return out


def record_from_json(raw: Mapping[str, Any]) -> Record:
    scores, parts = raw.get("scores"), raw.get("prompt_parts")
    if parts is None and "prompt" not in raw:
        raise KeyError("prompt")
    return Record(item_id=str(raw["item_id"]), prompt=raw.get("prompt", ""), reply=raw["reply"], choice=raw["choice"],
                  correct=raw["correct"], scores=None if scores is None else tuple(scores),
                  meta=raw.get("meta") or {}, prompt_parts=None if parts is None else tuple(parts))


def _json_lines(path: Path) -> Iterable[tuple[int, Any]]:
    """(line number, parsed JSON) of a JSONL file. A last line cut off by a kill (no newline, not valid JSON,
    or cut inside a UTF-8 character) is dropped; a bad line elsewhere is an error naming the file and line."""
    if not path.is_file():
        return
    # decoded line by line: a kill may cut the last line inside a multi-byte character, which must be dropped
    # like any other torn line, not stop the whole read
    lines = path.read_bytes().split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            if number == len(lines):  # the unterminated last line of a killed writer
                log.warning("%s: dropping the cut-off last line (written when the run stopped)", path)
                return
            what = "UTF-8" if isinstance(e, UnicodeDecodeError) else "JSON"
            raise DataError(f"line {number} is not {what} ({e})", file=path) from e
        yield number, value


def read_records(path: Path) -> list[Record]:
    """The records of one JSONL file (prompts as stored: part ids or text)."""
    records = []
    first_line: dict[str, int] = {}
    for number, raw in _json_lines(Path(path)):
        try:
            record = record_from_json(raw)
        except (KeyError, TypeError) as e:
            raise DataError(f"line {number} is not a record (missing or bad {e})", file=path) from e
        # a run writes each item once per file (a resume answers only what no file holds): a second record
        # means two runs wrote here at once or a hand-edited file, and one copy would be scored silently
        if record.item_id in first_line:
            raise DataError(f"line {number}: a second record for this item (the first is on line "
                            f"{first_line[record.item_id]})", file=path, item=record.item_id, field="item_id")
        first_line[record.item_id] = number
        # a hand-edited "choice": "2" or "correct": 1 would be compared, not read: wrong numbers, no error
        for name, value, ok, expected in (
                ("choice", record.choice, record.choice is None or type(record.choice) is int, "an option index"),
                ("correct", record.correct, record.correct is None or type(record.correct) is bool, "true or false"),
                ("reply", record.reply, isinstance(record.reply, str), "the reply text")):
            if not ok:
                raise DataError(f"line {number}: expected {expected}{'' if name == 'reply' else ' or null'}, got "
                                f"{value!r}", file=path, item=record.item_id, field=name)
        records.append(record)
    return records


def repair_tail(path: Path) -> None:
    """Cut a last line left without its newline by a killed writer, before appending after it."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        with open(path, "r+b") as f:
            f.truncate(data.rfind(b"\n") + 1)


def part_files(run_dir: Path) -> list[Path]:
    return [run_dir / PARTS, *sorted(run_dir.glob("prompt_parts.rank*.jsonl"))]


def load_prompt_parts(run_dir: str | Path) -> dict[str, str]:
    """Part id -> text, from the merged file and every rank's shard."""
    parts: dict[str, str] = {}
    for path in part_files(Path(run_dir)):
        for number, raw in _json_lines(path):
            try:
                parts.setdefault(str(raw["id"]), raw["text"])
            except (KeyError, TypeError) as e:
                raise DataError(f"line {number} is not a prompt part (missing or bad {e})", file=path) from e
    return parts


def with_prompt_texts(records: Sequence[Record], parts: Mapping[str, str], where: Path | str = "") -> list[Record]:
    """The records with `prompt` put back together from their part ids (records that carry the text as they
    are)."""
    out = []
    for record in records:
        if record.prompt_parts is None:
            out.append(record)
            continue
        missing = [i for i in record.prompt_parts if i not in parts]
        if missing:
            raise DataError(f"prompt part {missing[0]} is not in {PARTS}", file=where, item=record.item_id,
                            field="prompt_parts")
        out.append(replace(record, prompt="\n".join(parts[i] for i in record.prompt_parts)))
    return out


class PartWriter:
    """Appends the parts not yet on disk to one parts file (a rank's own), synced before the records that
    name them are written."""

    def __init__(self, run_dir: Path, path: Path):
        self.known = set(load_prompt_parts(run_dir))
        self.path = path
        repair_tail(path)

    def ids(self, parts: Sequence[str], out: IO[str]) -> tuple[str, ...]:
        ids, new = [], []
        for text in parts:
            i = part_id(text)
            if i not in self.known:
                self.known.add(i)
                new.append({"id": i, "text": text})
            ids.append(i)
        if new:
            out.write("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in new))
            out.flush()
            os.fsync(out.fileno())
        return tuple(ids)


def write_merged(run_dir: Path, records: Sequence[Record]) -> None:
    """records.jsonl (the given order) and prompt_parts.jsonl (the parts the records name, in order of first
    use), each written atomically; then the ranks' shards go."""
    parts = load_prompt_parts(run_dir)
    used: dict[str, str] = {}
    for record in records:
        for i in record.prompt_parts or ():
            if i not in parts:
                raise DataError(f"prompt part {i} is not in any {PARTS}", file=run_dir, item=record.item_id,
                                field="prompt_parts")
            used.setdefault(i, parts[i])
    with atomic_path(run_dir / RECORDS) as tmp:
        tmp.write_text("".join(json.dumps(record_to_json(r), ensure_ascii=False) + "\n" for r in records),
                       encoding="utf-8")
    if used or (run_dir / PARTS).is_file():
        with atomic_path(run_dir / PARTS) as tmp:
            tmp.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                                   for i, t in used.items()), encoding="utf-8")
    for path in [*run_dir.glob("records.rank*.jsonl"), *run_dir.glob("prompt_parts.rank*.jsonl")]:
        path.unlink()


def read_run(run_dir: str | Path) -> list[Record]:
    """A finished run's records with their prompt texts (what each model was asked)."""
    run_dir = Path(run_dir)
    return with_prompt_texts(read_records(run_dir / RECORDS), load_prompt_parts(run_dir), run_dir)


ITEM_COLUMNS = ("item_id", "question", "options", "reply", "parsed choice", "answer", "correct", "frames seen")


def frames_seen(record: Record) -> int | None:
    """How many frames the model was shown in all, where the backend's reply says (`meta["visuals"]`: the
    OpenAI-compatible and transformers backends'); None where it does not."""
    visuals = record.meta.get("visuals")
    return None if visuals is None else sum(int(v["frames"]) for v in visuals)


def item_rows(items: Sequence[MultipleChoiceItem], records: Sequence[Record]) -> list[list[Any]]:
    """One row per item (ITEM_COLUMNS), in the items' order: what a reader scans to see where a model goes
    wrong (a W&B table of the run). Options as "index: text" lines; the parsed choice and the answer as option
    indices (None: unparsable / hidden)."""
    by_id = {r.item_id: r for r in records}
    rows = []
    for item in items:
        record = by_id[item.id]
        options = "\n".join(f"{i}: {text}" for i, text in enumerate(item.options))
        rows.append([item.id, item.question, options, record.reply, record.choice, item.answer, record.correct,
                     frames_seen(record)])
    return rows


def item_records(run_dir: str | Path, items: Sequence[Any]) -> list[Record]:
    """A finished run's record of each of `items`, in their order (re-scoring a run: spacewalk/results/rescore.py); a
    run without records.jsonl, or with an item unanswered, is refused naming it."""
    path = Path(run_dir) / RECORDS
    if not path.is_file():
        raise DataError("the run has no records.jsonl (an unfinished multiple-choice run: re-run its command)",
                        file=path)
    by_id = {r.item_id: r for r in read_records(path)}
    missing = [item.id for item in items if item.id not in by_id]
    if missing:
        raise DataError(f"{len(missing)} items have no record (e.g. {missing[:3]}): an unfinished run, or one "
                        "made on other items", file=path)
    return [by_id[item.id] for item in items]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.multiple_choice.records",
                                     description="Print a multiple-choice run's records with their prompts.")
    parser.add_argument("run_dir", type=existing_folder, help="a multiple-choice run's directory")
    parser.add_argument("item_ids", nargs="*", help="only these items (default: all)")
    args = parser.parse_args(argv)
    with user_errors_reported():  # a torn or hand-edited file, another kind of run: its message, no traceback
        records = read_run(checked_run_dir(args.run_dir))
        wanted = set(args.item_ids)
        unknown = wanted - {r.item_id for r in records}
        if unknown:
            raise DataError(f"no record of items {sorted(unknown)[:5]}", file=args.run_dir / RECORDS)
    for record in records:
        if wanted and record.item_id not in wanted:
            continue
        print(f"=== {record.item_id}: choice {record.choice}, correct {record.correct}\n{record.prompt}\n"
              f"--- reply\n{record.reply}\n")


def checked_run_dir(run_dir: Path) -> Path:
    """`run_dir` when it holds a multiple-choice run's records; otherwise a DataError that says what it holds
    instead (printing nothing would read as a run with no items)."""
    if (run_dir / RECORDS).is_file():
        return run_dir
    if any(run_dir.glob("records.rank*.jsonl")):
        raise DataError(f"only the ranks' shards (records.rank<r>.jsonl), no {RECORDS}: the run has not finished; "
                        "re-run its command to finish it", file=run_dir)
    kind = f" (it holds {PREDICTIONS}: a run of another task)" if (run_dir / PREDICTIONS).is_file() else ""
    raise DataError(f"no {RECORDS}: not a multiple-choice run's directory{kind}", file=run_dir)


if __name__ == "__main__":
    main()
