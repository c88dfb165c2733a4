"""HiREST's subtitles: Whisper's SRT files (the authors' ASR.zip layout), read and written with the `srt`
library, the package's one SRT reader."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_path


@dataclass(frozen=True)
class Subtitle:
    start: float
    end: float
    text: str


def read_srt(path: str | Path) -> list[Subtitle]:
    """Subtitles of one SRT file, in file order (the order of the rows of its embedding file)."""
    import srt

    path = Path(path)
    if not path.is_file():
        raise DataError("no subtitle file", file=path)
    try:
        subs = list(srt.parse(path.read_text(encoding="utf-8")))
    except (srt.SRTParseError, ValueError, UnicodeDecodeError) as e:
        raise DataError(f"not a valid SRT file ({e})", file=path) from e
    return [Subtitle(s.start.total_seconds(), s.end.total_seconds(), s.content) for s in subs]


def write_srt(path: str | Path, subtitles: Sequence[Subtitle]) -> Path:
    """`subtitles` as an SRT file; for Whisper's segments (a 20 ms grid, no "-->" in the text) these are the
    bytes whisper.utils.write_srt writes, the authors' ASR files."""
    import datetime

    import srt

    subs = [srt.Subtitle(i + 1, datetime.timedelta(seconds=s.start), datetime.timedelta(seconds=s.end), s.text)
            for i, s in enumerate(subtitles)]
    with atomic_path(path) as tmp:
        tmp.write_text(srt.compose(subs, reindex=False), encoding="utf-8")
    return Path(path)
