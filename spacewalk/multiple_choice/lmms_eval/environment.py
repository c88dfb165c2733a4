"""A Python environment in which lmms-eval runs the exported tasks next to this project's own packages.

Why a separate one: lmms-eval 0.7.3 pins `wandb==0.25.0` and `av<16`; the project runs wandb 0.31 and av 18 (both
inside the project's ranges, so a fresh `pip install ".[lmms_eval]"` resolves, but installing lmms-eval into an
existing environment would downgrade two packages under the rest of the project). So the environment here is a venv
of the same interpreter that holds only what lmms-eval needs and the project's environment lacks:

- lmms-eval and qwen-vl-utils (which lmms-eval's chat models use to sample a video slice), installed without their
  dependencies (`--no-deps`: their pins would pull the older wandb and av);
- the libraries lmms-eval imports on its path from the command line to the `openai` model and these tasks
  (`datasets`, `evaluate`, `sacrebleu`, `loguru`, `pytablewriter`, ... pinned in `RESOLVED`), installed with their
  dependencies, each constrained to the version the project's environment already has (`pip -c`), so pip adds only
  what is missing and never a second copy of a package the project has;
- a `.pth` file that adds the project environment's site-packages after its own (`site.addsitedir`, so the
  project's own `.pth` files, an editable install of spacewalk among them, work there too): torch, transformers,
  decord, numpy and spacewalk come from there.

It is built once per set of pins and interpreter (the folder's name is their digest), under a lock, and marked
complete only at the end: an interrupted build is removed and redone on the next call. Nothing is installed into the
project's environment. `python -m spacewalk.multiple_choice.lmms_eval environment` prints its Python (then
`<python> -m lmms_eval ...` is lmms-eval's command).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from filelock import FileLock

# installed without dependencies (module docstring); lmms-eval's version is the one the task folders are written for
NO_DEPS = ("lmms-eval==0.7.3", "qwen-vl-utils==0.0.14")
# what lmms-eval 0.7.3 imports from `python -m lmms_eval --model openai` to the end of a run that the project's
# environment lacks, with their own dependencies; resolved against the project's installed versions
RESOLVED = (
    "datasets==5.2.0", "dill==0.4.1", "multiprocess==0.70.19", "pandas==3.1.1", "pyarrow==26.0.1", "pytz==2026.6",
    "evaluate==0.4.6", "sacrebleu==2.6.0", "portalocker==4.4.2", "colorama==0.4.6", "loguru==0.7.3",
    "python-dotenv==1.2.4", "pytablewriter==0.38.0", "DataProperty==0.37.0", "mbstrdecoder==1.1.5",
    "pathvalidate==3.3.1", "tabledata==0.0.26", "typepy==0.3.1", "chardet==6.0.0.post1", "dominate==2.9.1",
    "Logbook==1.10.1", "msgfy==0.2.1", "six==1.17.0",
)
COMPLETE = ".complete"
BASE_PTH = "_spacewalk_base_environment.pth"


def base_site_packages() -> list[str]:
    """The running environment's site-packages (pure and platform), the project's."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def digest() -> str:
    """What the environment is made of: the pins, the interpreter and the environment it extends."""
    content = "\n".join([*NO_DEPS, "--", *RESOLVED, "--", sys.version, *base_site_packages()])
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:12]


def default_root() -> Path:
    """Where environments are kept: $SPACEWALK_LMMS_EVAL_ENVS, else <data dir>/lmms_eval_env (the data dir as the
    configs have it: $SPACEWALK_DATA_DIR, else data/ of the working directory)."""
    if os.environ.get("SPACEWALK_LMMS_EVAL_ENVS"):
        return Path(os.environ["SPACEWALK_LMMS_EVAL_ENVS"])
    return Path(os.environ.get("SPACEWALK_DATA_DIR", "data")) / "lmms_eval_env"


def python_of(env: Path) -> Path:
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def constraints() -> str:
    """The project environment's installed versions as pip constraints (local and editable installs left out: no
    index has them)."""
    lines = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name and not dist.read_text("direct_url.json"):
            lines.setdefault(name.lower().replace("_", "-"), f"{name}=={dist.version}")
    return "\n".join(sorted(lines.values())) + "\n"


def _run(command: list[str], what: str, log: Path) -> None:
    with open(log, "a", encoding="utf-8") as out:
        out.write("$ " + " ".join(command) + "\n")
        out.flush()
        result = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False)
    if result.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise RuntimeError(f"{what} failed (exit {result.returncode}); the log: {log}\n{tail}")


def ensure_environment(root: str | Path | None = None, progress=print) -> Path:
    """The Python of the lmms-eval environment (module docstring), built on first use under `root`."""
    root = Path(root) if root is not None else default_root()
    env = (root / digest()).absolute()
    python = python_of(env)
    if (env / COMPLETE).is_file():
        return python
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{env.name}.lock")):
        if (env / COMPLETE).is_file():  # another process built it while this one waited
            return python
        if env.exists():
            shutil.rmtree(env)  # an interrupted build
        progress(f"building the lmms-eval environment in {env} (once; PyPI)")
        log = root / f"{env.name}.log"
        log.unlink(missing_ok=True)
        _run([sys.executable, "-m", "venv", str(env)], "creating the venv", log)
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        lines = [f"import site; site.addsitedir({path!r})" for path in base_site_packages()]
        Path(site, BASE_PTH).write_text("\n".join(lines) + "\n", encoding="utf-8")
        pip = [str(python), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
        _run([*pip, "--no-deps", *NO_DEPS], "installing lmms-eval", log)
        constraints_file = env / "constraints.txt"
        constraints_file.write_text(constraints(), encoding="utf-8")
        _run([*pip, "-c", str(constraints_file), *RESOLVED], "installing lmms-eval's libraries", log)
        _run([str(python), "-c", "import lmms_eval.__main__, qwen_vl_utils, spacewalk"], "importing lmms-eval", log)
        (env / COMPLETE).write_text("\n".join([*NO_DEPS, *RESOLVED]) + "\n", encoding="utf-8")
    return python

