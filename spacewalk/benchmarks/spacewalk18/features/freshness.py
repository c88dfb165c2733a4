"""Whether a recording's bank may be read as it is, or must be (re)built.

A built recording's `meta.json` says everything that shaped its arrays: the bank format's version, the
encoders' identities, the grid and (where video was encoded) the decoding settings, and fingerprints of the
sources (the transcript file's bytes, the steps, the duration, the video file's size and time). A bank whose
meta differs from what a build would write now is stale: the first differing key is the reason, logged when it
is rebuilt. Settings that change how a build runs but never its arrays (`BUILD_SETTINGS`) are left out, so
changing them leaves a bank fresh. A folder without meta.json is not one this project wrote (our builds are
atomic), so it is never replaced.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording
from spacewalk.core.errors import DataError
from spacewalk.core.io import load_json

if TYPE_CHECKING:  # the interface lives with the encoders; importing it at run time would pull in torch
    from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
    from spacewalk.encoders import TextEncoder, VideoEncoder

BANK_VERSION = 1
META_FILE = "meta.json"
# BankConfig fields that change how a bank is built, never its arrays: not part of meta.json
BUILD_SETTINGS = ("prefetch", "decoders")


def expected_meta(rec: Recording, config: BankConfig, text_encoder: TextEncoder, video_encoder: VideoEncoder | None,
                  with_video: bool, frame_features: bool) -> dict[str, Any]:
    """Everything that shaped the arrays, so that any change makes the bank stale. Video settings and the video
    file count only where video was encoded: a text-only bank does not depend on them."""
    settings = {"segment_seconds": config.segment_seconds}
    if with_video:
        settings |= {k: v for k, v in dataclasses.asdict(config).items()
                     if k not in ("segment_seconds", *BUILD_SETTINGS) and (k, v) != ("decode_device", "cpu")}
        if frame_features:
            # only where true: banks of clip encoders, built before this existed, stay fresh
            settings["frame_features"] = True
    transcript = rec.transcript_path.read_bytes()
    steps = json.dumps([dataclasses.asdict(s) for s in rec.steps], sort_keys=True)
    video = None
    if with_video:
        stat = rec.video_path.stat()
        video = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    return {
        "version": BANK_VERSION,
        "video_id": rec.video_id,
        "encoders": {"text": text_encoder.identity, "video": video_encoder.identity if with_video else None},
        "config": settings,
        "sources": {
            "transcript": {"size": len(transcript), "sha1": hashlib.sha1(transcript).hexdigest()},
            "steps_sha1": hashlib.sha1(steps.encode()).hexdigest(),
            "duration": rec.duration,
            "video": video,
        },
    }


def read_meta(folder: Path, video_id: str) -> dict | None:
    """The folder's meta.json, or None where nothing is built yet."""
    meta_file = folder / META_FILE
    if not meta_file.is_file():
        if folder.exists():
            # Our builds are atomic, so a folder without meta is someone else's: never replace it.
            raise DataError(f"folder has no {META_FILE}: not a bank this project wrote; delete it, or add "
                            "an external meta.json (docs/feature_bank.md)", file=folder, item=video_id)
        return None
    meta = load_json(meta_file)
    if not isinstance(meta, dict):
        raise DataError("expected a JSON object", file=meta_file, item=video_id)
    return meta


def staleness(folder: Path, rec: Recording, expected: dict[str, Any], with_video: bool) -> str | None:
    """Why the bank in `folder` must be (re)built, or None when it is fresh against `expected` (expected_meta). A
    bank with video also serves a text-only request (its video is then not loaded) rather than being rebuilt
    without it."""
    meta = read_meta(folder, rec.video_id)
    if meta is None:
        return "not built"
    if meta.get("external") is True:
        raise DataError("an external folder where this project builds its own bank", file=folder, item=rec.video_id)
    want, have = dict(_flatten(expected)), dict(_flatten({k: meta.get(k) for k in expected}))
    if not with_video:
        want = {k: v for k, v in want.items() if not k.startswith(("encoders.video", "sources.video"))}
    for key, value in want.items():
        if have.get(key) != value:
            return f"{key} changed: {have.get(key)!r} -> {value!r}"
    return None


def _flatten(obj: dict, prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in obj.items():
        if isinstance(value, dict) and value:
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
