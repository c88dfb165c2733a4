"""The multiple-choice runner: a task's items -> its prompts -> a backend's replies -> the task's parse ->
one `Record` per item, appended to the run's JSONL as it happens -> the task's metrics and official files.

Records: spacewalk/multiple_choice/records.py (each distinct prompt part stored once, `prompts="parts"`, or
every prompt in full, `prompts="full"`).

Resuming: records are appended (and flushed) a chunk at a time, or one at a time as replies arrive from a
backend with requests in flight (`answer_as_completed`), so a killed run loses at most the chunk or the
requests in flight; the finished run's records.jsonl is rewritten in the task's item order (`finish`), so its
files do not depend on the order replies came in. A re-run with the same run directory reads every record
already there, skips those items and ends with the same metrics as a run that was never interrupted. A run
directory remembers what it was made with (`run.json`: the task, the backend and their settings, the
generation limits each model used, the frame rule and visual budget of a video LLM (`visual`), and a digest of
the items it asked); a re-run with other settings (a limit
included) or changed items in the same directory is refused instead of mixing two runs' replies.

Generation limits: the task's answer limits are applied to the backend before the first item
(spacewalk/multiple_choice/generation.py); run.json's "generation" says what the answering model (and the
task's judge, if any) generated with.

Several processes: each takes the items `rank::world_size` (RANK / WORLD_SIZE from the environment, as
torchrun and SLURM's srun set them, or passed in) and appends to its own shard,
`records.rank<r>.jsonl`; rank 0 waits until every item has a record in some shard, then merges them
into `records.jsonl` (in the task's item order) and writes the metrics and official files. Shards of an
earlier run with another world size are read too: resuming works whatever the number of processes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import load_json, write_json
from spacewalk.multiple_choice.generation import generation_record
from spacewalk.multiple_choice.items import MultipleChoiceItem
from spacewalk.multiple_choice.records import (
    PARTS,
    PROMPT_FORMS,
    RECORDS,
    PartWriter,
    parts_shard_name,
    read_records,
    read_run,  # noqa: F401  (re-exported: runner.read_run(run_dir))
    record_to_json,
    repair_tail,
    shard_name,
    write_merged,
)
from spacewalk.multiple_choice.task import Backend, MultipleChoiceTask, Prompt, Record, Reply
from spacewalk.results.bootstrap import BootstrapOptions
from spacewalk.results.layout import METRICS as METRICS  # the file run() writes, named where every run file is
from spacewalk.results.layout import write_metrics

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
# model settings that change how fast a backend answers, never what: left out of run.json's identity (and of the
# run directory's name, conf/task/multiple_choice.yaml), so a run resumes with another value
SPEED_SETTINGS = frozenset({"concurrency"})


def rank_and_world(rank: int | None = None, world_size: int | None = None) -> tuple[int, int]:
    """This process's rank and the number of processes: the arguments, else RANK / WORLD_SIZE (torchrun),
    else SLURM_PROCID / SLURM_NTASKS (srun), else a single process."""
    env = os.environ
    if world_size is None and "WORLD_SIZE" not in env:
        _check_slurm_step(env)
    if world_size is None:
        world_size = int(env.get("WORLD_SIZE", env.get("SLURM_NTASKS", 1)))
    if rank is None:
        rank = int(env.get("RANK", env.get("SLURM_PROCID", 0)))
    if not 0 <= rank < world_size:
        raise ConfigError(f"rank {rank} outside 0..{world_size - 1}")
    return rank, world_size


def _check_slurm_step(env: Mapping[str, str]) -> None:
    """Refuse SLURM variables that cannot form a group of processes: SLURM_NTASKS > 1 is also set in an sbatch
    script or an salloc shell, where the command was started once, not by srun; rank 0 would then wait (up to
    `wait_seconds`) for the records of peers that never start."""
    ntasks = env.get("SLURM_NTASKS")
    if ntasks is None or not ntasks.strip().isdigit() or int(ntasks) <= 1:
        return
    missing = [name for name in ("SLURM_STEP_ID", "SLURM_PROCID") if name not in env]
    if missing:
        raise ConfigError(f"SLURM_NTASKS={ntasks} but {' and '.join(missing)} not set: this process was not "
                          "started by srun, so no other rank will come. Start the command with `srun` (one process "
                          "per task), or unset SLURM_NTASKS (or set WORLD_SIZE=1) to run as a single process")


# ---- records on disk (spacewalk/multiple_choice/records.py) ----


def existing_records(run_dir: Path) -> dict[str, Record]:
    """Every record in the run directory (the merged file and every shard), by item id."""
    found: dict[str, Record] = {}
    for path in [run_dir / RECORDS, *sorted(run_dir.glob("records.rank*.jsonl"))]:
        for record in read_records(path):
            found.setdefault(record.item_id, record)
    return found


def items_digest(items: Sequence[MultipleChoiceItem]) -> str:
    """SHA-256 of what the records depend on in each item (id, question, options, answer, transcript), in
    order: settings alone do not say whether a questions file was edited between a run and its resume."""
    content = [[item.id, item.question, list(item.options), item.answer, item.transcript] for item in items]
    return hashlib.sha256(json.dumps(content, ensure_ascii=False).encode("utf-8")).hexdigest()


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def check_run_identity(run_dir: Path, identity: Mapping[str, Any]) -> None:
    """Refuse to resume a run directory made with other settings or other items; write the identity on first
    use."""
    path = run_dir / RUN_FILE
    identity = json.loads(json.dumps(identity, default=str))  # the form it takes once written
    if path.is_file():
        previous = load_json(path)
        # a setting at null is the same run as one without it: a setting added since (at its null default, as
        # data.limit) does not make an existing run another
        if _without_nulls(previous) != _without_nulls(identity):
            diff = sorted(k for k in set(previous) | set(identity) if previous.get(k) != identity.get(k))
            what = [*(["other settings"] if set(diff) - {"items", "items_digest"} else []),
                    *(["other items (the task's questions, options, answers or transcripts changed since: its "
                       "records answer the old ones)"] if "items_digest" in diff else [])]
            what = " and ".join(what) or "other settings"
            if "items_digest" not in previous:  # made before run.json held the digest: its items are unknown
                what = "a version that did not record its items (no items_digest), so they cannot be checked"
            raise ConfigError(f"{run_dir} holds a run made with {what} (differing: {diff}; see {path}); "
                              "to start afresh choose another hydra.run.dir or delete that run")
        return
    write_json(path, identity)


# ---- the run ----


def _chunks(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _record(task: MultipleChoiceTask, item: MultipleChoiceItem, prompt: Prompt, reply: Reply
            ) -> tuple[Record, list[str]]:
    """The item's record (prompt text in full) and its prompt's audit parts."""
    if reply.choice is not None:
        choice = reply.choice if 0 <= reply.choice < len(item.options) else None
    else:
        choice = task.parse(item, reply.text)
    correct = None if item.answer is None else choice == item.answer
    parts = prompt.audit_parts()
    return Record(item_id=item.id, prompt="\n".join(parts), reply=reply.text, choice=choice, correct=correct,
                  scores=None if reply.scores is None else tuple(float(s) for s in reply.scores),
                  meta=dict(reply.meta)), parts


def _replies(task: MultipleChoiceTask, backend: Backend, todo: Sequence[MultipleChoiceItem], chunk_size: int
             ) -> Iterator[list[tuple[MultipleChoiceItem, Prompt, Reply]]]:
    """The replies to `todo`, a group at a time, each group recorded as soon as it is in: a backend that answers
    as replies arrive (`answer_as_completed`, the OpenAI-compatible one with several requests in flight) one
    reply at a time, in the order they come; any other backend a chunk of `chunk_size` items at a time (its
    batch)."""
    as_completed = getattr(backend, "answer_as_completed", None)
    if as_completed is not None:
        for item, prompt, reply in as_completed((item, task.prompt(item)) for item in todo):
            yield [(item, prompt, reply)]
        return
    for chunk in _chunks(todo, chunk_size):
        prompts = [task.prompt(item) for item in chunk]
        replies = backend.answer(chunk, prompts)
        if len(replies) != len(chunk):
            raise RuntimeError(f"backend {backend.name} gave {len(replies)} replies for {len(chunk)} items")
        yield list(zip(chunk, prompts, replies))


def _progress_postfix(correct: int, answered: int, unparsable: int) -> dict[str, str]:
    # answered counts only records whose answer is known (hidden answers have no running accuracy)
    accuracy = f"{100 * correct / answered:.1f}" if answered else "-"
    return {"acc": accuracy, "unparsable": str(unparsable)}


def run(task: MultipleChoiceTask, backend: Backend, run_dir: str | Path, *, chunk_size: int = 8,
        identity: Mapping[str, Any] | None = None, rank: int | None = None, world_size: int | None = None,
        wait_seconds: float = 24 * 3600, poll_seconds: float = 2.0, progress: bool = True,
        prompts: str = "parts", bootstrap: BootstrapOptions | None = None) -> dict[str, Any] | None:
    """Answer every item of `task` not yet recorded in `run_dir`, then (rank 0) merge the records and write
    `metrics.json` and the task's official files. Returns the metrics on rank 0, None on the other ranks.
    `prompts`: "parts" (each distinct prompt part once, in prompt_parts.jsonl) or "full" (every record
    carries its whole prompt). `bootstrap`: the intervals beside the metrics (`finish`)."""
    if chunk_size < 1:
        raise ConfigError(f"chunk_size must be at least 1, got {chunk_size}")
    if prompts not in PROMPT_FORMS:
        raise ConfigError(f"prompts must be one of {PROMPT_FORMS}, got {prompts!r}")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rank, world_size = rank_and_world(rank, world_size)
    items = list(task.items())
    if not items:  # metrics over no item would be a 0 % (or a division by zero) that reads as a result
        raise DataError(f"task {task.name} has no items to answer (an empty questions file, or a filter that keeps "
                        "none)")
    ids = [item.id for item in items]
    repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
    if repeated:  # records are kept by item id: a second item with it would take the first's reply
        raise DataError(f"task {task.name}: item ids {repeated[:5]} occur more than once; each item needs its own "
                        "id")
    backend, generation = generation_record(task, backend)
    log.info("generation limits: %s", json.dumps(generation))
    # what a video LLM was shown (its frame rule and visual budget, spacewalk/multiple_choice/budget.py), where the
    # backend says; absent for backends that do not (a resume of their earlier runs is unaffected)
    visual = getattr(backend, "visual_settings", lambda: None)()
    if rank == 0:
        check_run_identity(run_dir, {"task": task.name, "backend": backend.name, "items": len(items),
                                     "items_digest": items_digest(items), "generation": generation,
                                     **({"visual": visual} if visual is not None else {}), **(identity or {})})

    done = existing_records(run_dir)
    unknown = set(done) - set(ids)
    if unknown:
        raise DataError(f"records of items this task does not have (e.g. {sorted(unknown)[:3]}): it belongs to "
                        "another run", file=run_dir)
    mine = items[rank::world_size]
    todo = [item for item in mine if item.id not in done]
    answered = [done[item.id] for item in mine if item.id in done]
    shard = run_dir / (RECORDS if world_size == 1 else shard_name(rank))
    repair_tail(shard)
    part_writer = (PartWriter(run_dir, run_dir / (PARTS if world_size == 1 else parts_shard_name(rank)))
                   if prompts == "parts" else None)

    correct = sum(bool(r.correct) for r in answered)
    unparsable = sum(r.choice is None for r in answered)
    bar = tqdm(total=len(mine), initial=len(answered), disable=not progress, dynamic_ncols=True,
               desc=f"{task.name} / {backend.name}" + (f" [rank {rank}/{world_size}]" if world_size > 1 else ""))
    known = sum(r.correct is not None for r in answered)
    bar.set_postfix(_progress_postfix(correct, known, unparsable))
    parts_out = open(part_writer.path, "a", encoding="utf-8") if part_writer is not None else None
    with open(shard, "a", encoding="utf-8") as out:
        for group in _replies(task, backend, todo, chunk_size):
            records, audit = map(list, zip(*(_record(task, *answered_item) for answered_item in group)))
            if part_writer is not None:  # the parts reach the disk before the records that name them
                records = [replace(r, prompt="", prompt_parts=part_writer.ids(parts, parts_out))
                           for r, parts in zip(records, audit)]
            out.write("".join(json.dumps(record_to_json(r), ensure_ascii=False) + "\n" for r in records))
            out.flush()
            os.fsync(out.fileno())
            answered.extend(records)
            correct += sum(bool(r.correct) for r in records)
            unparsable += sum(r.choice is None for r in records)
            known += sum(r.correct is not None for r in records)
            bar.update(len(records))
            bar.set_postfix(_progress_postfix(correct, known, unparsable))
    bar.close()
    if parts_out is not None:
        parts_out.close()
        if part_writer.path.stat().st_size == 0:
            part_writer.path.unlink()
    if rank != 0:
        return None
    return finish(task, run_dir, items, wait_seconds=wait_seconds, poll_seconds=poll_seconds,
                  bootstrap=bootstrap)


def finish(task: MultipleChoiceTask, run_dir: Path, items: Sequence[MultipleChoiceItem] | None = None, *,
           wait_seconds: float = 0.0, poll_seconds: float = 2.0,
           bootstrap: BootstrapOptions | None = None) -> dict[str, Any]:
    """Rank 0's end: wait for every item's record, merge the shards into records.jsonl (item order), write
    metrics.json and the task's official files. Also re-scores a finished run directory on its own.
    `bootstrap`: metrics.json's "intervals" from the task's `intervals(items, records, metrics, options)`
    (spacewalk/results/bootstrap.py; a task without one has none), over the per-item units records.jsonl keeps."""
    items = list(task.items()) if items is None else list(items)
    deadline = time.monotonic() + wait_seconds
    while True:
        done = existing_records(run_dir)
        missing = [item.id for item in items if item.id not in done]
        if not missing:
            break
        if time.monotonic() >= deadline:
            raise RuntimeError(f"{run_dir}: {len(missing)} items have no record (e.g. {missing[:3]}); did another "
                               "rank stop? Re-run the same command to answer them")
        time.sleep(poll_seconds)
    records = [done[item.id] for item in items]
    write_merged(run_dir, records)
    metrics = task.metrics(items, records)
    intervals = getattr(task, "intervals", None)
    if bootstrap is not None and intervals is not None:
        metrics["intervals"] = intervals(items, records, metrics, bootstrap)
    task.write_outputs(items, records, run_dir)
    write_metrics(run_dir, metrics)  # with its version (spacewalk/results/layout.py)
    return metrics
