"""Reads back what an offline W&B run wrote (`<dir>/wandb/offline-run-*/run-<id>.wandb`), so that tests check
what a later `wandb sync` would upload: the file is a LevelDB-style log (a 7-byte `:W&B` header, then 32 KiB
blocks of records, each a 4-byte checksum, a 2-byte little-endian length and a 1-byte type: full, or the first,
middle and last piece of a record that spans blocks) of protobuf `Record`s. wandb itself no longer ships a
reader."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list:
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path}: not a W&B transaction log"
    out, pending, pos = [], b"", 7
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        piece = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == FULL:
            out.append(piece)
        elif kind == FIRST:
            pending = piece
        elif kind == MIDDLE:
            pending += piece
        elif kind == LAST:
            out.append(pending + piece)
    parsed = []
    for raw in out:
        record = pb.Record()
        record.ParseFromString(raw)
        parsed.append(record)
    return parsed


def finished_records(path: Path, timeout: float = 120.0) -> list:
    """The records of a run's log once its exit record is in: wandb's writer is a process of its own, which
    may still be flushing the file when `run.finish()` has returned (seen on a loaded machine: the run record
    not yet there)."""
    deadline = time.monotonic() + timeout
    while True:
        parsed = records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in parsed) or time.monotonic() > deadline:
            return parsed
        time.sleep(0.5)


def offline_run(run_dir: Path) -> dict[str, Any]:
    """The one offline run under `run_dir`/wandb: its run record's group, job type, name and tags, its config,
    the last value of each logged key (history, then summary), and its folder."""
    folders = sorted((Path(run_dir) / "wandb").glob("offline-run-*"))
    assert len(folders) == 1, folders
    (log,) = folders[0].glob("run-*.wandb")
    out: dict[str, Any] = {"folder": folders[0], "config": {}, "logged": {}}
    parsed = finished_records(log)
    assert any(r.WhichOneof("record_type") == "run" for r in parsed), f"{log}: no run record after its exit"
    for record in parsed:
        kind = record.WhichOneof("record_type")
        if kind == "run":
            run = record.run
            out |= {"group": run.run_group, "job_type": run.job_type, "name": run.display_name,
                    "tags": list(run.tags), "project": run.project}
            out["config"] |= {item.key: json.loads(item.value_json) for item in run.config.update}
        elif kind == "config":
            out["config"] |= {item.key: json.loads(item.value_json) for item in record.config.update}
        elif kind == "history":
            out["logged"] |= {"/".join(item.nested_key) or item.key: json.loads(item.value_json)
                              for item in record.history.item}
        elif kind == "summary":
            out["logged"] |= {"/".join(item.nested_key) or item.key: json.loads(item.value_json)
                              for item in record.summary.update}
    return out
