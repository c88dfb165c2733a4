"""Fetch a benchmark's official annotations (and, on request, its videos) into a dataset root.

    python -m spacewalk.download spacewalk18 --root data/spacewalk18            # annotations (~40 MB)
    python -m spacewalk.download spacewalk18 --root data/spacewalk18 --videos   # + 18 recordings via yt-dlp
    python -m spacewalk.download spacewalk18 --root DIR --source /path/to/a/local/copy

Files already present are kept (re-running resumes an interrupted download); each file is written to a
temporary name and renamed, so nothing half-written ever carries a final name. The result is validated
with the project's reader before the command reports success.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from spacewalk.errors import DataError
from spacewalk.io import atomic_path


@dataclass(frozen=True)
class Release:
    base: str  # URL or local folder holding the release layout
    files: tuple[str, ...]
    # Files the authors removed from the head of their repository, fetched from the last commit that had them.
    historical_base: str
    historical_files: tuple[str, ...]
    videos: dict[str, str]


_SPACEWALK18_REPO = "https://raw.githubusercontent.com/brown-palm/Spacewalk-18-benchmark"
_SPACEWALK18_VIDEOS = {  # video id -> YouTube URL, as listed by the authors' data/download_videos.py
    "01152020": "84CRZYioFRs", "01252020": "cOzMVW1GdDc", "01272021": "q3tVWmP0CMc", "02012021": "XwuRiIh2IlM",
    "02282021": "gcv6beMn750", "03152022": "s4TVhE8NDLs", "03232022": "uZqaTsbDcgU", "06092023": "wS4z42KaeGk",
    "06162021": "gCKsedpraVg", "06262020": "KlK_bLnqmas", "09122021": "vvsMOSAfHG0", "10062019": "z0Ut8daLD6I",
    "11152019": "evaBhht5uGA", "11152022": "sNvIV3UUcQw", "11222019": "sIpjW-KUcEA", "12022019": "gH1OHoszYcw",
    "12022021": "ScAtmwgIXwU", "12032022": "zvxenTNLjWE",
}

RELEASES = {
    "spacewalk18": Release(
        base=f"{_SPACEWALK18_REPO}/main",
        files=("data/annotation.json", "data/steps.json", "tasks/split.json",
               "tasks/step_recognition/train.json", "tasks/step_recognition/val.json",
               "tasks/step_recognition/test.json", "tasks/question_answering/test.json",
               *(f"data/transcripts/{v}.csv" for v in sorted(_SPACEWALK18_VIDEOS))),
        historical_base=f"{_SPACEWALK18_REPO}/6b227ae3214245d64d21a13cb0bd36dbf2e57fd7",
        historical_files=("tasks/intra-video_retrieval/val.json", "tasks/intra-video_retrieval/test.json"),
        videos={v: f"https://www.youtube.com/watch?v={yt}" for v, yt in _SPACEWALK18_VIDEOS.items()},
    ),
}


def _fetch(source: str, dest: Path) -> None:
    with atomic_path(dest) as tmp:
        if source.startswith(("http://", "https://")):
            try:
                with urllib.request.urlopen(source, timeout=60) as response, open(tmp, "wb") as out:
                    shutil.copyfileobj(response, out)
            except OSError as e:
                raise DataError(f"download failed ({e})", file=source) from e
        else:
            path = Path(source.removeprefix("file://"))
            if not path.is_file():
                raise DataError("file not found in the source", file=path)
            shutil.copyfile(path, tmp)


def download_annotations(name: str, root: Path, source: str | None = None) -> list[Path]:
    """Fetch every annotation file missing under root; `source` replaces the official base(s)."""
    release = RELEASES[name]
    jobs = [(f"{source or release.base}/{f}", f) for f in release.files]
    jobs += [(f"{source or release.historical_base}/{f}", f) for f in release.historical_files]
    written = []
    for url, rel in tqdm(jobs, desc=f"{name} annotations", unit="file"):
        dest = root / rel
        if not dest.is_file():
            _fetch(url, dest)
            written.append(dest)
    return written


def download_videos(name: str, root: Path, ids: list[str] | None = None, ytdlp: str = "yt-dlp") -> list[Path]:
    """Download recordings with yt-dlp (720p mp4 like the release) to <root>/data/videos/<id>.mp4."""
    release = RELEASES[name]
    exe = shutil.which(ytdlp)
    if exe is None:
        raise RuntimeError(f"{ytdlp!r} not found on PATH: `pip install yt-dlp` to download the videos")
    written = []
    for video_id in tqdm(ids or sorted(release.videos), desc=f"{name} videos", unit="video"):
        dest = root / "data/videos" / f"{video_id}.mp4"
        if dest.is_file():
            continue
        with atomic_path(dest) as tmp:
            # yt-dlp appends its own suffixes to partial files; give it a name of our own and move it after
            part = tmp.with_name(tmp.name + ".mp4")
            cmd = [exe, "-f", "bv*[height<=720][ext=mp4]+ba[ext=m4a]/b[height<=720][ext=mp4]/b",
                   "--merge-output-format", "mp4", "--no-playlist", "-o", str(part), release.videos[video_id]]
            result = subprocess.run(cmd)
            if result.returncode != 0 or not part.is_file():
                part.unlink(missing_ok=True)
                raise RuntimeError(f"yt-dlp failed for {video_id} ({release.videos[video_id]}), exit code "
                                   f"{result.returncode}")
            part.replace(tmp)
        written.append(dest)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacewalk.download", description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", choices=sorted(RELEASES))
    parser.add_argument("--root", required=True, type=Path, help="dataset root to fill (created if missing)")
    parser.add_argument("--source", help="a URL or local folder in the release layout to fetch from instead")
    parser.add_argument("--videos", action="store_true", help="also download the videos with yt-dlp")
    args = parser.parse_args(argv)
    try:
        download_annotations(args.benchmark, args.root, args.source)
        if args.videos:
            download_videos(args.benchmark, args.root)
        from spacewalk.spacewalk18 import Spacewalk18

        dataset = Spacewalk18(args.root)
        for split in ("train", "val", "test"):
            dataset.step_samples(split)
    except (DataError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.benchmark} ready at {args.root}: {dataset!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
