"""Fetch a benchmark's official annotations (and, on request, its videos) into a dataset root.

    python -m spacewalk.download spacewalk18 --root data/spacewalk18            # annotations (~40 MB)
    python -m spacewalk.download spacewalk18 --root data/spacewalk18 --videos   # + 18 recordings via yt-dlp
    python -m spacewalk.download spacewalk18 --root DIR --source /path/to/a/local/copy
    python -m spacewalk.download hirest --root data/hirest [--features] [--videos]
    python -m spacewalk.download egoschema --root data/egoschema    # questions, subset answers, Ego4D windows
    python -m spacewalk.download egocross --root data/egocross      # the testbed JSON (no frames, no answers)

EgoSchema's videos (Google Drive) and EgoCross's frames and answers (the authors' gated release) need the
user's own access: docs/egoschema_egocross.md says how to get them and where to put them.

HiREST: `--features` fetches the authors' released features (EVA-CLIP frames at 1 fps, Whisper ASR, MiniLM
ASR embeddings; several GB) into <root>/data/, the layout `data.features=released` reads.

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
    # zip archives unpacked into <root>/data/ (each holds one top-level folder of that name)
    features: tuple[str, ...] = ()


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
    # HiREST videos are YouTube ids named by the annotations themselves: see hirest_videos()
    "hirest": Release(
        base="https://raw.githubusercontent.com/j-min/HiREST/main",
        files=tuple(f"data/splits/all_data_{s}.json" for s in ("train", "val", "test"))
        + ("data/splits/all_data_test_negative_samples.json", "data/evaluation/categories.json",
           "data/evaluation/formatted_moment_evaluation_gt.json", "data/val_testing/all_data_test.json",
           "data/val_testing/formated_moment_evaluation_gt.json"),
        historical_base="", historical_files=(), videos={},
        features=tuple(f"https://huggingface.co/j-min/HiREST-baseline/resolve/main/{name}.zip"
                       for name in ("eva_clip_features", "ASR", "ASR_feats_all-MiniLM-L6-v2")),
    ),
    # the public annotations only; videos need the user's own Google Drive access (docs/egoschema_egocross.md)
    "egoschema": Release(
        base="https://raw.githubusercontent.com/egoschema/EgoSchema/main",
        files=("questions.json", "subset_answers.json", "uid_to_ego4d.json"),
        historical_base="", historical_files=(), videos={},
    ),
    # the testbed questions only; frames and answers are on the authors' gated dataset (docs/egoschema_egocross.md)
    "egocross": Release(
        base="https://raw.githubusercontent.com/MyUniverse0726/EgoCross/main",
        files=("datasets/egocross_testbed_imgs.json",),
        historical_base="", historical_files=(), videos={},
    ),
}
# benchmarks whose videos (or frames) no command here can fetch
NO_VIDEO_DOWNLOAD = {"egoschema": "EgoSchema's clips are on Google Drive (the authors' download.py fetches them)",
                     "egocross": "EgoCross's frames are on the authors' gated dataset"}


def hirest_videos(root: Path) -> dict[str, str]:
    """<id>.mp4 -> YouTube URL for every video the HiREST annotations name (distractors included)."""
    from spacewalk.hirest.dataset import HiREST, video_id

    return {v: f"https://www.youtube.com/watch?v={video_id(v)}" for v in HiREST(root).videos()}


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


def download_features(name: str, root: Path) -> list[Path]:
    """Fetch and unpack the released feature archives; an unpacked folder is kept (resume)."""
    import zipfile

    written = []
    for url in RELEASES[name].features:
        folder = root / "data" / url.rsplit("/", 1)[1].removesuffix(".zip")
        if folder.is_dir():
            continue
        archive = root / "data" / f".{folder.name}.zip"
        if not archive.is_file():
            _fetch(url, archive)
        staging = folder.with_name(f".{folder.name}.unpacking")
        shutil.rmtree(staging, ignore_errors=True)
        with zipfile.ZipFile(archive) as z:
            z.extractall(staging)
        inner = staging / folder.name
        (inner if inner.is_dir() else staging).rename(folder)  # the folder appears whole or not at all
        shutil.rmtree(staging, ignore_errors=True)
        archive.unlink()
        written.append(folder)
    return written


def download_videos(name: str, root: Path, ids: list[str] | None = None, ytdlp: str = "yt-dlp") -> list[Path]:
    """Download videos with yt-dlp (720p mp4) to <root>/data/videos/<id>.mp4."""
    release = RELEASES[name]
    urls = hirest_videos(root) if name == "hirest" else release.videos
    folder = root / "data/videos"
    exe = shutil.which(ytdlp)
    if exe is None:
        raise RuntimeError(f"{ytdlp!r} not found on PATH: `pip install yt-dlp` to download the videos")
    written = []
    for video_id in tqdm(ids or sorted(urls), desc=f"{name} videos", unit="video"):
        dest = folder / (video_id if video_id.endswith(".mp4") else f"{video_id}.mp4")
        if dest.is_file():
            continue
        with atomic_path(dest) as tmp:
            # yt-dlp appends its own suffixes to partial files; give it a name of our own and move it after
            part = tmp.with_name(tmp.name + ".mp4")
            cmd = [exe, "-f", "bv*[height<=720][ext=mp4]+ba[ext=m4a]/b[height<=720][ext=mp4]/b",
                   "--merge-output-format", "mp4", "--no-playlist", "-o", str(part), urls[video_id]]
            result = subprocess.run(cmd)
            if result.returncode != 0 or not part.is_file():
                part.unlink(missing_ok=True)
                raise RuntimeError(f"yt-dlp failed for {video_id} ({urls[video_id]}), exit code "
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
    parser.add_argument("--features", action="store_true", help="HiREST: also the authors' released features")
    args = parser.parse_args(argv)
    try:
        if args.videos and args.benchmark in NO_VIDEO_DOWNLOAD:
            raise RuntimeError(f"{NO_VIDEO_DOWNLOAD[args.benchmark]}: see docs/egoschema_egocross.md")
        if args.features and args.benchmark in NO_VIDEO_DOWNLOAD:
            raise RuntimeError(f"--features: {args.benchmark} has no released features")
        download_annotations(args.benchmark, args.root, args.source)
        if args.features:
            download_features(args.benchmark, args.root)
        if args.videos:
            download_videos(args.benchmark, args.root)
        dataset = VALIDATE[args.benchmark](args.root)
    except (DataError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.benchmark} ready at {args.root}: {dataset!r}")
    return 0


def _validate_spacewalk18(root: Path):
    from spacewalk.spacewalk18.dataset import Spacewalk18

    dataset = Spacewalk18(root)
    for split in ("train", "val", "test"):
        dataset.step_samples(split)
    return dataset


def _validate_hirest(root: Path):
    from spacewalk.hirest.dataset import HiREST

    dataset = HiREST(root)
    for split in ("train", "val", "test"):
        dataset.step_annotations(split)
    dataset.candidates("test"), dataset.categories, dataset.moment_gt("val")
    return dataset


def _validate_egoschema(root: Path):
    from spacewalk.egoschema.dataset import EgoSchema

    return EgoSchema(root).validate()


def _validate_egocross(root: Path):
    from spacewalk.egocross.dataset import EgoCross

    return EgoCross(root)


# benchmark -> reads everything fetched, so a bad or partial download fails here and not in training
VALIDATE = {"spacewalk18": _validate_spacewalk18, "hirest": _validate_hirest, "egoschema": _validate_egoschema,
            "egocross": _validate_egocross}


if __name__ == "__main__":
    sys.exit(main())
