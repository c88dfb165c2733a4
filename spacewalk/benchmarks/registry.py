"""The benchmark registry: each benchmark package declares itself, and the tools find it (docs/adding_a_benchmark.md).

A benchmark is the subpackage `spacewalk/benchmarks/<name>/` plus its configs. Its registration module
`spacewalk/benchmarks/<name>/benchmark.py` defines `BENCHMARK = Benchmark(...)`: its name (the package's), the release
that `python -m spacewalk.download <name>` fetches (every file pinned to a commit, with its sha256 where
known), how a fetched release is validated, the `python -m spacewalk.score` subcommand(s) that score a
prediction file, how a finished run is re-scored from its recorded predictions (spacewalk/results/rescore.py), and
which of its multiple-choice tasks `python -m spacewalk.multiple_choice.lmms_eval export` writes as lmms-eval tasks.
`discover()` scans the `spacewalk.benchmarks` package's subpackages for that module (pkgutil, reading
folders, importing only the registration modules), so no central list names the benchmarks: the score and
download commands and the architecture test all read the registry.

**Headline numbers.** Each benchmark declares the headline numbers of each of its tasks once (`Headline`: the
name, the unit the intervals and tests resample, how the number is computed from predictions, which way is
better), as `Benchmark.headlines` ({task: (Headline, ...)}), and says which task a finished run is
(`Benchmark.task_of`). The end-of-run table, the intervals in metrics.json, the re-scoring, the paired
comparison, the report's default columns and the logged keys all read that declaration, so a new number is one
edit in its benchmark's package (docs/adding_a_benchmark.md).

Registration modules stay light (argparse, pathlib, this module): each tool imports all of them on every
call, so `--help` and argument errors must answer at once; the dataset and scoring code is imported inside
the functions they name.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from spacewalk.core.errors import DataError

REGISTRATION_MODULE = "benchmark"  # spacewalk/benchmarks/<name>/benchmark.py


class UsageError(Exception):
    """A combination of arguments that argparse cannot check by itself: the command's usage and exit code 2."""


class ScoringFailed(Exception):
    """A tool the scoring needs is missing or failed (Java for captioning, an LLM judge): exit code 1."""


@dataclass(frozen=True)
class ReleaseFile:
    path: str  # where it goes under the dataset root, and where it is under a --source copy
    url: str  # the official URL, pinned to a commit so the bytes cannot change under us
    sha256: str | None = None  # None where no copy was at hand to hash (the registration says which and why)


def pinned(base: str, sha256_by_path: Mapping[str, str | None]) -> tuple[ReleaseFile, ...]:
    """Release files under one base URL (a repository's raw files at one commit)."""
    return tuple(ReleaseFile(path, f"{base}/{path}", sha) for path, sha in sha256_by_path.items())


@dataclass(frozen=True)
class Release:
    """What `python -m spacewalk.download <name>` fetches, and how it checks the result."""

    files: tuple[ReleaseFile, ...]
    # root -> the release read with the project's reader: a bad or partial download fails here, not in training
    validate: Callable[[Path], Any]
    # root -> {video id: URL} for `--videos` (yt-dlp); called after the annotations are in place, which may
    # name the videos (HiREST). None: no command here can fetch them, and `no_videos` says why and where to look.
    videos: Callable[[Path], dict[str, str]] | None = None
    no_videos: str = ""
    # zip archives for `--features`, unpacked into <root>/data/ (each holds one top-level folder of its name)
    features: tuple[str, ...] = ()


@dataclass(frozen=True)
class ScoreCommand:
    """One `python -m spacewalk.score <name>` subcommand. The command adds `--predictions` (required) and
    `--output` itself; `arguments` adds the rest, and `score` turns the parsed arguments into the metrics
    (raising UsageError, DataError or ValueError for bad input, ScoringFailed for a missing tool)."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    score: Callable[[argparse.Namespace], dict[str, Any]]
    # the subcommand `python -m spacewalk.score --root ...` runs when no benchmark is named (one at most)
    default: bool = False
    description: str = ""  # the longer text of `python -m spacewalk.score <name> --help`


# The units a headline number's intervals and tests resample (statistics: spacewalk/results/statistics.py)
RECORDINGS = "recordings"  # one value per recording, then the mean (a recording's samples are not redrawn)
RECORDINGS_THEN_SAMPLES = "recordings, then samples within them"  # the same, each recording's value from samples
SAMPLES_WITHIN_RECORDINGS = "samples (resampled within each recording, every recording kept once)"
QUESTIONS = "questions"
QUERIES = "queries"


@dataclass(frozen=True)
class Headline:
    """One headline number of a task, as its benchmark declares it.

    `name`: its name in metrics.json, in every table and in the logged keys (`test/<name>`); `per_<group>/*` is a
    number per value of a group (per question type, per domain), each named `per_<group>/<value>`. `unit`: what
    its intervals and tests resample (the constants above, or the benchmark's own words). `computed`: how the
    number follows from the predictions, in words (the tables' notes and docs/adding_a_benchmark.md).
    `per_recording`: for a number that is a metric per recording, then the mean over recordings, the
    recording's value on multisets of its samples, `per_recording(rows, counts) -> values` (counts [m, n]: how
    often each sample is in each of m draws; `rows`: the benchmark's own per-recording object), which the
    re-scoring and the paired comparison use to draw a recording's samples again; None for a number over flat
    units or one whose recording's samples cannot be drawn again (`samples_redrawn`). `bounds`: its range (the
    intervals are cut to it)."""

    name: str
    unit: str
    computed: str
    higher_is_better: bool = True
    per_recording: Callable[[Any, Any], Any] | None = None
    samples_redrawn: bool = True  # a recording's samples are units of their own (IoU's tile its timeline: not)
    bounds: tuple[float, float] = (0.0, 100.0)

    @property
    def over_recordings(self) -> bool:
        """A metric per recording, then the mean: its intervals and tests are over recordings."""
        return self.unit in (RECORDINGS, RECORDINGS_THEN_SAMPLES)

    def matches(self, name: str) -> bool:
        """Whether `name` (a metrics.json path) is this number, or one of its group (`per_type/when task`)."""
        if self.name.endswith("/*"):
            return name.startswith(self.name[:-1]) and len(name) > len(self.name) - 1
        return name == self.name


@dataclass(frozen=True)
class LmmsEvalTask:
    """One multiple-choice task of the benchmark as an lmms-eval task (spacewalk/multiple_choice/lmms_eval/):
    `name` (lmms-eval's task name, unique over the benchmarks), `factory` (the dotted path of the function that
    builds the task, the `_target_` of its data config) with `settings` (its keyword arguments beyond the data
    keys every data config shares), `limit` (the factory's "first N items" argument, what lmms-eval's --limit N
    becomes), `metrics` (metrics.json's numbers lmms-eval reports: name -> higher is better), `data_config` (the
    conf/data config that runs the same task with evaluate.py), `cluster` (the item
    meta key lmms-eval's clustered standard error groups by, e.g. the recording), `group` (an lmms-eval group that
    runs it with its siblings by one name) and `notes` (the task README's account of where lmms-eval's own habits
    and this task's official rules differ)."""

    name: str
    factory: str
    settings: Mapping[str, Any]
    limit: str | None
    metrics: Mapping[str, bool]
    data_config: str  # the conf/data config of the same task under evaluate.py (a report's `data` key)
    cluster: str | None = None
    group: str | None = None
    notes: str = ""


@dataclass(frozen=True)
class Benchmark:
    name: str  # the package's name: spacewalk/benchmarks/<name>/
    release: Release
    scores: tuple[ScoreCommand, ...]
    # (run directory, its resolved config as a dict) -> spacewalk.results.rescore.ScoredRun: a finished run of this
    # benchmark re-scored from its recorded predictions (spacewalk/results/rescore.py, python -m spacewalk.compare);
    # the runs whose data config's _target_ lies in this package are this benchmark's
    rescore: Callable[[Path, dict[str, Any]], Any] | None = None
    # {task: its headline numbers} (module docstring), and which of those tasks a run is, from its config (the
    # composed or resolved config as a dict; None: none of them)
    headlines: Mapping[str, tuple[Headline, ...]] = field(default_factory=dict)
    task_of: Callable[[Mapping[str, Any]], str | None] | None = None
    # its multiple-choice tasks as lmms-eval tasks (python -m spacewalk.multiple_choice.lmms_eval export)
    lmms_eval: tuple[LmmsEvalTask, ...] = ()

    @property
    def package(self) -> str:
        return f"{__package__}.{self.name}"


def run_task(config: Mapping[str, Any]) -> tuple[Benchmark, str] | None:
    """The benchmark and task of a run, from its config: the benchmark whose package holds the data config's
    `_target_`, its `task_of(config)`; None where no registered benchmark claims the run."""
    data = config.get("data") if isinstance(config, Mapping) else None
    target = data.get("_target_") if isinstance(data, Mapping) else None
    if not isinstance(target, str):
        return None
    for benchmark in discover().values():
        if target.startswith(benchmark.package + ".") and benchmark.task_of is not None:
            task = benchmark.task_of(config)
            return (benchmark, task) if task in benchmark.headlines else None
    return None


def headlines_of(config: Mapping[str, Any]) -> tuple[Headline, ...]:
    """The headline numbers the run's benchmark declares for its task (none where no benchmark claims it)."""
    found = run_task(config)
    return found[0].headlines[found[1]] if found else ()


def declared_names() -> list[str]:
    """Every headline name any benchmark declares (groups left out), in the registry's order."""
    names: dict[str, None] = {}
    for benchmark in discover().values():
        for headlines in benchmark.headlines.values():
            names.update((h.name, None) for h in headlines if not h.name.endswith("/*"))
    return list(names)


def registration_modules() -> list[str]:
    """The registration modules of the `spacewalk.benchmarks` package's subpackages, found on disk without
    importing any of them."""
    import spacewalk.benchmarks as package

    found = []
    for info in pkgutil.iter_modules(package.__path__):
        spec = info.module_finder.find_spec(info.name) if info.ispkg else None
        if spec is None or not spec.submodule_search_locations:
            continue
        if any(sub.name == REGISTRATION_MODULE for sub in pkgutil.iter_modules(spec.submodule_search_locations)):
            found.append(f"{package.__name__}.{info.name}.{REGISTRATION_MODULE}")
    return sorted(found)


@cache
def discover() -> dict[str, Benchmark]:
    """Every registered benchmark by name, each registration checked (a bad one names its module)."""
    benchmarks: dict[str, Benchmark] = {}
    for module_name in registration_modules():
        module = importlib.import_module(module_name)
        benchmark = getattr(module, "BENCHMARK", None)
        package = module_name.rsplit(".", 2)[1]
        if not isinstance(benchmark, Benchmark):
            raise TypeError(f"{module.__file__}: a registration module defines BENCHMARK = Benchmark(...)")
        if benchmark.name != package:
            raise ValueError(f"{module.__file__}: BENCHMARK.name is {benchmark.name!r}, not its package's "
                             f"name {package!r}")
        benchmarks[benchmark.name] = benchmark
    commands = [c for b in benchmarks.values() for c in b.scores]
    names = [c.name for c in commands]
    if len(set(names)) != len(names):
        raise ValueError(f"two benchmarks register the same score subcommand: {sorted(names)}")
    defaults = [c.name for c in commands if c.default]
    if len(defaults) > 1:
        raise ValueError(f"more than one default score subcommand: {defaults}")
    tasks = [t.name for b in benchmarks.values() for t in b.lmms_eval]
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"two benchmarks register the same lmms-eval task name: {sorted(tasks)}")
    return dict(sorted(benchmarks.items()))


def find(name: str) -> Benchmark:
    try:
        return discover()[name]
    except KeyError:
        raise KeyError(f"no benchmark {name!r}; registered: {', '.join(discover())}") from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_sha256(path: Path, expected: str | None, name: str | Path) -> None:
    """Raise a DataError naming `name` (the release file) when `path`'s bytes are not the pinned ones."""
    if expected is None:
        return
    actual = sha256_of(path)
    if actual != expected:
        raise DataError(f"sha256 {actual} differs from the release's {expected} (a changed or corrupted "
                        "copy)", file=name)
