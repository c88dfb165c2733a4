"""Fetch a benchmark's official annotations (and, on request, its videos) into a dataset root.

    python -m spacewalk.download BENCHMARK --root DIR [--videos] [--features] [--source COPY]
    python -m spacewalk.download spacewalk18 --root data/spacewalk18            # annotations (~40 MB)
    python -m spacewalk.download spacewalk18 --root data/spacewalk18 --videos   # + 18 recordings via yt-dlp

Each benchmark declares its release in its package (spacewalk/benchmarks/<name>/benchmark.py, found by
spacewalk.benchmarks.registry; its docstring shows its own commands): every file's URL pinned to a commit with its
sha256, its videos (or why no command here can fetch them, and where the user gets them), its released
features (`--features`), and how the result is validated. `--source` is a local copy or mirror in the
release layout to fetch the same files from.

Files already present are kept when their sha256 is the release's (re-running resumes an interrupted
download; a different file under a release file's name is refused, naming it); each file is written to a
temporary name, checked against its sha256, and renamed, so nothing half-written or changed ever carries a
final name. The result is validated with the project's reader before the command reports success.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

from tqdm import tqdm

from spacewalk.benchmarks.registry import Benchmark, ReleaseFile, check_sha256, discover
from spacewalk.core.arguments import output_folder
from spacewalk.core.errors import DataError
from spacewalk.core.io import atomic_path


def _fetch(source: str, dest: Path, sha256: str | None = None) -> None:
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
        check_sha256(tmp, sha256, source)  # before the rename: a changed file never gets the final name


def download_annotations(benchmark: Benchmark, root: Path, source: str | None = None) -> list[Path]:
    """Fetch every annotation file missing under root; `source` (a URL or folder in the release layout)
    replaces the official URLs."""
    def url(f: ReleaseFile) -> str:
        return f.url if source is None else f"{source}/{f.path}"

    written = []
    for f in tqdm(benchmark.release.files, desc=f"{benchmark.name} annotations", unit="file"):
        dest = root / f.path
        if dest.is_file():
            # kept only when it is the release's: a root that holds another file under the name (the test
            # split's GT where val's belongs, an edited copy) would be validated and scored as if it were
            check_existing(dest, f.sha256)
            continue
        _fetch(url(f), dest, f.sha256)
        written.append(dest)
    return written


def check_existing(path: Path, sha256: str | None) -> None:
    """A file already in the root must be the release's (files without a pinned sha256 are kept as they are)."""
    try:
        check_sha256(path, sha256, path)
    except DataError as error:
        raise DataError(f"{error}; this root's file is not the release's: delete it to fetch the release's, or "
                        "download into another root") from None


def download_features(benchmark: Benchmark, root: Path) -> list[Path]:
    """Fetch and unpack the released feature archives; an unpacked folder is kept (resume)."""
    import zipfile

    written = []
    for url in benchmark.release.features:
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


def download_videos(benchmark: Benchmark, root: Path, ids: list[str] | None = None,
                    ytdlp: str = "yt-dlp") -> list[Path]:
    """Download videos with yt-dlp (720p mp4) to <root>/data/videos/<id>.mp4."""
    if benchmark.release.videos is None:
        raise RuntimeError(benchmark.release.no_videos or f"{benchmark.name} has no videos to download")
    exe = shutil.which(ytdlp)
    if exe is None:
        raise RuntimeError(f"{ytdlp!r} not found on PATH: `pip install yt-dlp` to download the videos")
    urls = benchmark.release.videos(root)
    folder = root / "data/videos"
    written = []
    for video_id in tqdm(ids or sorted(urls), desc=f"{benchmark.name} videos", unit="video"):
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
    benchmarks = discover()
    parser = argparse.ArgumentParser(prog="python -m spacewalk.download", description=__doc__.split("\n\n")[0])
    parser.add_argument("benchmark", choices=sorted(benchmarks))
    parser.add_argument("--root", required=True, type=output_folder, help="dataset root to fill (created if missing)")
    parser.add_argument("--source", help="a URL or local folder in the release layout to fetch from instead")
    parser.add_argument("--videos", action="store_true", help="also download the videos with yt-dlp")
    parser.add_argument("--features", action="store_true",
                        help="also the authors' released features, where the benchmark has them")
    args = parser.parse_args(argv)
    benchmark = benchmarks[args.benchmark]
    release = benchmark.release
    try:
        # refused before anything is fetched
        if args.videos and release.videos is None:
            raise RuntimeError(release.no_videos or f"{benchmark.name} has no videos to download")
        if args.features and not release.features:
            raise RuntimeError(f"--features: {benchmark.name} has no released features")
        download_annotations(benchmark, args.root, args.source)
        if args.features:
            download_features(benchmark, args.root)
        if args.videos:
            download_videos(benchmark, args.root)
        dataset = release.validate(args.root)
    except (DataError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.benchmark} ready at {args.root}: {dataset!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
