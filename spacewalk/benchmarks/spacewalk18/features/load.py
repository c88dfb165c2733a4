"""Reading a recording's bank: its arrays memory-mapped and checked, and features made elsewhere validated.

Every array is checked against the recording on each load, not only when built: its shape on the grid
(`num_cells = ceil(duration / k)` rows, one row per sentence or step), a float dtype, and finite values (scanned
in slices of the mapped file), so a bank damaged or edited since its build never reaches training. A problem is
a DataError naming the file, the recording and the array.

External features (a folder whose meta.json says `"external": true`: InternVideo, EgoVLP, ...) bring video.npy
on our grid and, optionally, step_video.npy; one bank holds one feature width, checked across its recordings
(`ExternalFeatures`). The text arrays of an external folder are ours (built into its `text/` subfolder) unless
the folder brings all of them. docs/feature_bank.md has the layout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from spacewalk.benchmarks.spacewalk18.data.dataset import Recording, load_transcript
from spacewalk.benchmarks.spacewalk18.features.config import BankConfig
from spacewalk.benchmarks.spacewalk18.features.freshness import META_FILE, read_meta
from spacewalk.core.errors import DataError
from spacewalk.media.grid import cell_of, cell_span, num_cells
from spacewalk.media.video import segment_timestamps

TEXT_PART = "text"  # subfolder of an external folder: the text arrays we build for it
TEXT_FIELDS = ("cell_text", "sentence_text", "step_narration", "step_caption")
TIME_FIELDS = ("sentence_start", "sentence_end")


@dataclass
class RecordingBank:
    """One recording's features, as FeatureBank.load returns them (memory-mapped, float16)."""

    video_id: str
    segment_seconds: float
    num_cells: int
    duration: float
    video: np.ndarray | None  # [num_cells, Dv]
    cell_text: np.ndarray  # [num_cells, Dt]
    sentence_text: np.ndarray  # [n_sentences, Dt], file order
    sentence_start: np.ndarray  # float64 [n_sentences]
    sentence_end: np.ndarray
    step_video: np.ndarray | None  # [K+1, Dv], row 0 (Irrelevant) zero
    step_narration: np.ndarray  # [K+1, Dt], row 0 = F_t(IRRELEVANT_DESCRIPTION)
    step_caption: np.ndarray  # [K+1, Dt], row 0 = F_t(IRRELEVANT_DESCRIPTION)
    # per-frame video features, for encoders that average frame embeddings (averages_frames): every frame
    # the cells were made of, in time order; what sparse frame sampling reads. None otherwise.
    frame_video: np.ndarray | None = None  # [num_frames, Dv]
    frame_time: np.ndarray | None = None  # float64 [num_frames], seconds

    def _check_time(self, t: float, name: str) -> None:
        if not 0 <= t <= self.duration + 1e-6:
            raise ValueError(f"{self.video_id}: {name} {t} outside the recording [0, {self.duration}]")

    def cell_of(self, t: float) -> int:
        self._check_time(t, "time")
        return cell_of(t, self.segment_seconds, self.num_cells)

    def cells_in(self, start: float, end: float) -> np.ndarray:
        """Indices of the cells overlapping [start, end) (spacewalk.media.grid.cell_span, the rule every window
        reader shares); an empty window gives the cell holding it."""
        self._check_time(start, "window start")
        self._check_time(end, "window end")
        if end < start:
            raise ValueError(f"{self.video_id}: window [{start}, {end}] is reversed")
        first, last = cell_span(start, end, self.segment_seconds, self.num_cells)
        return np.arange(first, last + 1)


def load_array(folder: Path, name: str, video_id: str, shape: tuple[int | None, ...], check_finite: bool,
               why: str = "") -> np.ndarray:
    """Memory-map `<folder>/<name>.npy` and check it against `shape` (None: any size)."""
    file = folder / f"{name}.npy"
    if not file.is_file():
        raise DataError("array missing", file=file, item=video_id, field=name)
    try:
        array = np.load(file, mmap_mode="r")
    except (ValueError, OSError) as e:
        raise DataError(f"not a readable .npy array ({e})", file=file, item=video_id, field=name) from e
    if array.dtype not in (np.float16, np.float32, np.float64):
        raise DataError(f"expected float16 or float32 values, got {array.dtype}", file=file, item=video_id,
                        field=name)
    if array.ndim != len(shape) or any(h != w if w is not None else h == 0
                                       for h, w in zip(array.shape, shape)):
        shown = ", ".join("D" if w is None else str(w) for w in shape)
        raise DataError(f"shape {list(array.shape)}, expected [{shown}]" + (f" ({why})" if why else ""),
                        file=file, item=video_id, field=name)
    if check_finite:
        for i in range(0, len(array), 65536):  # in slices: the file is mapped, not read into memory
            finite = np.isfinite(array[i:i + 65536])
            if not finite.all():
                row = i + int(np.argwhere(~finite)[0][0])
                raise DataError(f"non-finite values (NaN or inf), first in row {row}; rebuild the bank (delete "
                                "the folder)", file=file, item=video_id, field=name)
    return array


def transcript_sentences(rec: Recording):
    # From the file, not the Recording's cached copy: the fingerprint in meta.json is of the file now.
    return load_transcript(rec.transcript_path, rec.video_id)


def load_video_arrays(folder: Path, rec: Recording, segment_seconds: float,
                      check_finite: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """video.npy on the grid, and step_video.npy where the folder has it (external features may not)."""
    grid = f"num_cells = ceil(duration {rec.duration} s / segment_seconds {segment_seconds} s)"
    video = load_array(folder, "video", rec.video_id, (num_cells(rec.duration, segment_seconds), None),
                       check_finite, grid)
    step_video = None
    if (folder / "step_video.npy").is_file():
        step_video = load_array(folder, "step_video", rec.video_id, (len(rec.steps), video.shape[1]),
                                check_finite, "one row per step, Irrelevant included, as wide as video.npy")
    return video, step_video


def frame_times(rec: Recording, config: BankConfig) -> np.ndarray:
    """The times of the frames the cells are made of, in order (every cell's 1/fps frames)."""
    cells = segment_timestamps(0.0, rec.duration, config.segment_seconds, config.fps, duration=rec.duration)
    return np.concatenate([c.timestamps for c in cells])


def load_frame_arrays(folder: Path, rec: Recording, config: BankConfig, dim: int) -> dict[str, np.ndarray]:
    times = frame_times(rec, config)
    why = f"one row per 1/fps frame of the cells (fps {config.fps})"
    return {"frame_video": load_array(folder, "frame_video", rec.video_id, (len(times), dim), False, why),
            "frame_time": load_array(folder, "frame_time", rec.video_id, (len(times),), False, why)}


def load_text_arrays(folder: Path, rec: Recording, segment_seconds: float, check_finite: bool) -> dict[str, np.ndarray]:
    v = rec.video_id
    grid = f"num_cells = ceil(duration {rec.duration} s / segment_seconds {segment_seconds} s)"
    out = {"cell_text": load_array(folder, "cell_text", v, (num_cells(rec.duration, segment_seconds), None),
                                   check_finite, grid)}
    dim, n_sentences = out["cell_text"].shape[1], len(transcript_sentences(rec))
    for name, rows, why in (("sentence_text", n_sentences, "one row per transcript sentence"),
                            ("step_narration", len(rec.steps), "one row per step, Irrelevant included"),
                            ("step_caption", len(rec.steps), "one row per step, Irrelevant included")):
        out[name] = load_array(folder, name, v, (rows, dim), check_finite, why)
    for name in TIME_FIELDS:
        out[name] = load_array(folder, name, v, (n_sentences,), check_finite, "one per transcript sentence")
    return out


# ---- features made elsewhere ---------------------------------------------------------------------------------

def external_meta(folder: Path, video_id: str) -> dict | None:
    """The folder's meta.json when it says `"external": true`, else None."""
    meta = read_meta(folder, video_id)
    return meta if meta is not None and meta.get("external") is True else None


def external_has_text(folder: Path, video_id: str) -> bool:
    """Whether an external folder brings its own text arrays (all of them, or none)."""
    names = TEXT_FIELDS + TIME_FIELDS
    present = [f for f in names if (folder / f"{f}.npy").is_file()]
    if present and len(present) < len(names):
        missing = next(f for f in names if f not in present)
        raise DataError(f"external text arrays come all together or not at all (found {present})",
                        file=folder / f"{missing}.npy", item=video_id, field=missing)
    return bool(present)


class ExternalFeatures:
    """The external folders of one bank: each validated (meta, shapes on our grid, finite values) and all of one
    width (a head has one input size)."""

    def __init__(self, segment_seconds: float):
        self.segment_seconds = segment_seconds
        self._width: tuple[int, str, str] | None = None  # (width, first video id, its encoder)

    def load(self, folder: Path, rec: Recording) -> tuple[np.ndarray, np.ndarray | None]:
        """The external video arrays of `rec` in `folder`, validated."""
        video_id = rec.video_id
        meta, file = external_meta(folder, video_id), folder / META_FILE
        if not isinstance(meta.get("encoder"), str) or not meta["encoder"]:
            raise DataError("an external bank must name its encoder (a non-empty string)", file=file,
                            item=video_id, field="encoder")
        k = meta.get("segment_seconds")
        if isinstance(k, bool) or not isinstance(k, (int, float)):
            raise DataError(f"expected a number of seconds, got {k!r}", file=file, item=video_id,
                            field="segment_seconds")
        if abs(k - self.segment_seconds) > 1e-9:
            raise DataError(f"features on a {k} s grid, but this bank uses segment_seconds={self.segment_seconds}",
                            file=file, item=video_id, field="segment_seconds")
        video, step_video = load_video_arrays(folder, rec, self.segment_seconds, check_finite=True)
        dim = video.shape[1]
        if "dim" in meta and meta["dim"] != dim:
            raise DataError(f"meta.json says dim {meta['dim']!r} but video.npy has {dim} columns",
                            file=folder / "video.npy", item=video_id, field="video")
        if self._width is None:
            self._width = (dim, video_id, meta["encoder"])
        elif self._width[0] != dim:
            width, other, encoder = self._width
            raise DataError(f"{dim} columns ({meta['encoder']}), but {other}'s external features ({encoder}) "
                            f"have {width}: one bank holds one feature width", file=folder / "video.npy",
                            item=video_id, field="video")
        return video, step_video


def external_video_dim(folders: dict[str, Path]) -> int:
    """The width of the external video features in `folders` ({video id: folder}), which must all be external
    folders of one width: from meta.json's `dim` or video.npy's header, nothing else read."""
    widths: dict[int, str] = {}
    for video_id, folder in folders.items():
        meta = external_meta(folder, video_id)
        if meta is None:
            raise DataError("video features are wanted but there is no video encoder to build them, and no "
                            "external features here (a meta.json with \"external\": true): choose an "
                            "encoder= config with a video encoder, or put external features in this bank "
                            "(encoder=external, docs/feature_bank.md)", file=folder / META_FILE, item=video_id)
        dim = meta.get("dim")
        if dim is None:
            file = folder / "video.npy"
            if not file.is_file():
                raise DataError("array missing", file=file, item=video_id, field="video")
            try:
                shape = np.load(file, mmap_mode="r").shape
            except (ValueError, OSError) as e:
                raise DataError(f"not a readable .npy array ({e})", file=file, item=video_id, field="video") from e
            if len(shape) != 2:
                raise DataError(f"shape {list(shape)}, expected [num_cells, D]", file=file, item=video_id,
                                field="video")
            dim = shape[1]
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise DataError(f"expected a positive int, got {dim!r}", file=folder / META_FILE, item=video_id,
                            field="dim")
        widths.setdefault(dim, video_id)
        if len(widths) > 1:
            (w0, first), (w1, other) = widths.items()
            raise DataError(f"{w1} columns, but {first}'s external features have {w0}: one bank holds one "
                            "feature width", file=folder / "video.npy", item=other, field="video")
    if not widths:
        raise ValueError("external_video_dim needs at least one video id")
    return next(iter(widths))
