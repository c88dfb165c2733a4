"""Finished run directories as the tables and comparisons read them: the one run finder, and per run its config keys,
its headline numbers with their intervals, and the command and commit that produced it.

**Which runs.** `find_runs(paths)` takes run directories (spacewalk/results/layout.py: Hydra's record, a
metrics.json or a resolved config in it), plan-decoded predictions (`<run>/decoded/<name>/`, given by their path)
and folders holding runs at any depth (a sweep's jobs `0/`, `1/`, ... in job order; evaluate.py's
`<data>/<model>/<hash>/`; a run directory's own folders are not searched). A run reached twice (a sweep given
together with one of its runs, or a path given twice) is refused, naming both ways: it would count twice in a
mean. `python -m spacewalk.report`, `python -m spacewalk.compare`, `python -m spacewalk.power` and the sweep summary
all find their runs here.

**Headline numbers.** Every task's metrics.json holds `"intervals"`: for each headline number an interval dict
(estimate, low, high, level, unit, n, ...), at the top level (step recognition, intra-video retrieval, the
multiple-choice tasks, where a group of them, `per_type` or `per_domain`, is a dict of interval dicts) or beside
each HiREST task's numbers (`{split: {task: {..., "intervals": {...}}}}`). The headline numbers of a run are exactly
those, named by their path with "/" (`Accuracy`, `per_domain/surgery`, `test/moment_retrieval/R@0.5`), the
interval's `estimate` (the official number) as the value. A number over recordings (its interval's unit is one of
the recordings' units, or names its values, `"values": "per_video"`) carries its per-recording values from
`per_video` beside its interval, and its interval is made from them here (Student's t, spacewalk/results/
statistics.py), whichever version of metrics.json holds it: one rule for every run in a table. Beside the headline
numbers, those without an interval: HiREST captioning's overall corpus metrics (`test/step_captioning/CIDEr`,
from its `"all"`), `best_val_loss`, and `val/<name>` and `decoded/<name>` of the declared headline names where
they have none. A run written with `metrics.bootstrap.n_resamples=0` (or before the intervals) falls back to its
top-level numbers of the declared headline names, without intervals. Any other number of metrics.json can be
asked for by its path (`metric_value`). A number that is NaN in metrics.json stays NaN (`Metric.undefined`): the
tables show and flag it, never average it away.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spacewalk.benchmarks.registry import RECORDINGS, RECORDINGS_THEN_SAMPLES, declared_names, run_task
from spacewalk.core.errors import DataError
from spacewalk.results.layout import (
    COMPOSED_CONFIG,
    DECODED,
    HYDRA,
    HYDRA_CONFIG,
    METRICS,
    OVERRIDES,
    RUN_CONFIG,
    is_decoded,
    is_run_dir,
    number,
    read_metrics,
    read_yaml,
)
from spacewalk.results.provenance import command_line, read_provenance
from spacewalk.results.statistics import recording_interval

PER_RECORDING = "per_video"  # where metrics.json keeps a number's per-recording values, beside its "intervals"
# the interval units whose numbers are over recordings (a version-1 file's IoU unit began "recordings (IoU: ...")
_RECORDING_UNITS = (RECORDINGS, RECORDINGS_THEN_SAMPLES)


@dataclass(frozen=True)
class Metric:
    """One headline number: the value (nan: undefined), its interval (None without one) and the interval's unit
    and level; `per_recording`, for a number over recordings, each recording's value (recording id, value)."""

    value: float
    low: float | None = None
    high: float | None = None
    unit: str | None = None
    level: float | None = None
    # how many units (questions, recordings) the interval is over: a column header can say it ("when task (67)");
    # not part of the number, so two Metrics that differ only in it are equal
    n: int | None = field(default=None, compare=False)
    per_recording: tuple[tuple[str, float], ...] | None = field(default=None, compare=False)

    @property
    def undefined(self) -> bool:
        return math.isnan(self.value)


def _is_interval(x: Any) -> bool:
    return isinstance(x, Mapping) and "estimate" in x and "low" in x and "high" in x


def _finite(x: Any) -> float | None:
    x = number(x)
    return None if x is None or math.isnan(x) else x


def _over_recordings(interval: Mapping[str, Any]) -> bool:
    unit = str(interval.get("unit") or "")
    return interval.get("values") == PER_RECORDING or unit in _RECORDING_UNITS or unit.startswith("recordings (")


def _per_recording(holder: Mapping[str, Any], name: str) -> tuple[tuple[str, float], ...] | None:
    """The per-recording values of `name` in `holder["per_video"]` ({recording: {name: value}}), None where it
    has none; an undefined recording (null) is nan."""
    table = holder.get(PER_RECORDING)
    if not isinstance(table, Mapping) or not table:
        return None
    values = []
    for recording, numbers in table.items():
        if not isinstance(numbers, Mapping) or name not in numbers:
            return None
        value = number(numbers[name])
        if value is None and numbers[name] is not None:
            return None
        values.append((str(recording), math.nan if value is None else value))
    return tuple(values)


def _intervals(holder: Mapping[str, Any], node: Mapping[str, Any], prefix: str, out: dict[str, Metric]) -> None:
    """The interval dicts under an "intervals" mapping (nested groups of them too), by path; `holder` is the
    dict that holds the "intervals" (and the per-recording values beside them)."""
    for key, value in node.items():
        name = f"{prefix}{key}"
        if _is_interval(value):
            estimate = number(value["estimate"])
            if estimate is None:  # no number (mAP of a run without scores): nothing to show
                continue
            n = value.get("n")
            level = number(value.get("level"))
            metric = Metric(estimate, _finite(value["low"]), _finite(value["high"]), value.get("unit"), level,
                            n if isinstance(n, int) and not isinstance(n, bool) else None)
            values = _per_recording(holder, str(key)) if _over_recordings(value) else None
            if values is not None:  # every run's interval over recordings by the same rule (module docstring)
                made = recording_interval([v for _, v in values], level or 0.95, metric.unit or RECORDINGS,
                                          estimate=estimate)
                metric = Metric(estimate, made.low, made.high, metric.unit, made.level, made.n, values)
            out[name] = metric
        elif isinstance(value, Mapping):
            _intervals(holder, value, f"{name}/", out)


def _numbers(node: Mapping, prefix: str, out: dict[str, Metric]) -> None:
    for key, value in node.items():
        if isinstance(value, Mapping):
            _numbers(value, f"{prefix}{key}/", out)
        elif number(value) is not None:
            out[f"{prefix}{key}"] = Metric(number(value))


def _walk(node: Mapping, prefix: str, out: dict[str, Metric]) -> None:
    """Every "intervals" mapping in metrics.json, with the path of the dict that holds it as prefix; and a HiREST
    task's overall numbers (`"all"`) where it has no intervals (captioning's corpus metrics), without one."""
    if prefix and "intervals" not in node and isinstance(node.get("all"), Mapping):
        _numbers(node["all"], prefix, out)
    for key, value in node.items():
        if key == "intervals" and isinstance(value, Mapping):
            _intervals(node, value, prefix, out)
        elif isinstance(value, Mapping) and key not in ("all", PER_RECORDING):
            _walk(value, f"{prefix}{key}/", out)


def metric_value(metrics: Mapping, path: str) -> float | None:
    """The number at `path` ("decoded/Accuracy", "val/Accuracy") in metrics.json (nan kept), None where there is
    none."""
    node: Any = metrics
    for part in path.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return number(node)


def headline_metrics(metrics: Mapping) -> dict[str, Metric]:
    """The run's headline numbers (module docstring): those with an interval, then the ones without."""
    out: dict[str, Metric] = {}
    _walk(metrics, "", out)
    declared = declared_names()
    if not out:
        for name in declared:
            value = metric_value(metrics, name)
            if value is not None:
                out[name] = Metric(value)
    for name in ["best_val_loss", *(f"{prefix}/{n}" for prefix in ("val", DECODED) for n in declared)]:
        value = metric_value(metrics, name)
        if value is not None and name not in out:
            out[name] = Metric(value)
    return out


# ---- one run directory ----------------------------------------------------------------------------------------

@dataclass
class RunDir:
    """One run directory, read once."""

    path: Path
    overrides: list[str]  # the job's command-line overrides (.hydra/overrides.yaml)
    entry: str | None  # train or evaluate (Hydra's job name)
    choices: dict[str, Any]  # the config groups' choices (model, data, task, decoding, experiment, ...)
    config: dict[str, Any]  # the job's composed config, interpolations left as written
    metrics: dict[str, Any] | None  # metrics.json, None where the job wrote none (failed, or still running)
    provenance: dict[str, Any] | None = None
    headline: dict[str, Metric] = field(default_factory=dict)
    # evaluate.py ckpt_path=<run>/checkpoints/X.ckpt (a re-test, e.g. a decoding): the trained run, whose config
    # says what was trained (its model, context, seed); None otherwise or where that directory is gone
    origin: RunDir | None = None

    @property
    def name(self) -> str:
        return self.path.name

    def given(self, key: str) -> bool:
        """Whether the command line set `key` (`key=...`, `+key=...`)."""
        return any(o.split("=", 1)[0].lstrip("+~") == key for o in self.overrides)

    def has(self, key: str) -> bool:
        """Whether the run has the config key at all (a config group's choice, or a path of its config)."""
        if self.origin is not None and not self.given(key) and self.origin.has(key):
            return True
        if key in self.choices:
            return True
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False
            node = node[part]
        return True

    def value(self, key: str) -> Any:
        """A config key a table groups by: a config group's choice (`model`, `decoding`, `experiment`) or a value
        of the config by its dotted path (`context`, `seed`, `model.temperature`). A re-test's keys are its trained
        run's, but for those its own command line sets (`decoding=...`)."""
        if self.origin is not None and not self.given(key):
            return self.origin.value(key)
        if key in self.choices:
            return self.choices[key]
        node: Any = self.config
        for part in key.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return None
            node = node[part]
        return node

    def label(self, key: str) -> Any:
        """`value(key)` for a table's row or column: a config section (a mapping: the run has no Hydra record of
        its config groups' choices) cannot name a run, and is refused naming the run and the key."""
        value = self.value(key)
        if isinstance(value, (Mapping, list)):
            raise DataError(f"{key} is a config section here, not a value (the run has no {HYDRA}/{HYDRA_CONFIG} "
                            "with its config groups' choices): a table cannot name it by that key", file=self.path)
        return value

    @property
    def task(self) -> str | None:
        """The benchmark and task (`spacewalk18 step_recognition`), from the run's config through the registry;
        None where no registered benchmark claims it."""
        found = run_task(self.origin.config if self.origin is not None and not self.config.get("data")
                         else self.config)
        return f"{found[0].name} {found[1]}" if found else None

    @property
    def seed(self) -> Any:
        return self.value("seed")

    @property
    def command(self) -> str | None:
        """The job's command: the one provenance.json records, else rebuilt from .hydra/overrides.yaml (the same
        words; a run written before provenance.json existed)."""
        if self.provenance and self.provenance.get("command"):
            return str(self.provenance["command"])
        return command_line(self.entry, self.overrides) if self.entry else None

    @property
    def commit(self) -> str | None:
        """The commit the run's code was at ("+dirty" when tracked files differed), None where not recorded."""
        if not self.provenance or not self.provenance.get("commit"):
            return None
        return str(self.provenance["commit"]) + ("+dirty" if self.provenance.get("dirty") else "")


def _mapping(value: Any, path: Path, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DataError(f"expected a mapping ({what}), found {type(value).__name__}", file=path)
    return dict(value)


def read_run(path: str | Path) -> RunDir:
    """Read one run directory (module docstring); a torn or malformed file of it is named."""
    path = Path(path)
    if not is_run_dir(path):
        raise DataError(f"not a run directory (no {HYDRA}/, {METRICS} or {RUN_CONFIG})", file=path)
    hydra_dir = path / HYDRA
    if hydra_dir.exists() and not hydra_dir.is_dir():
        raise DataError("a file, where Hydra's folder is expected", file=hydra_dir)
    overrides: Any = read_yaml(hydra_dir / OVERRIDES) if (hydra_dir / OVERRIDES).exists() else []
    if overrides is None:
        overrides = []
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise DataError("expected a list of overrides", file=hydra_dir / OVERRIDES)
    hydra_file = hydra_dir / HYDRA_CONFIG
    hydra_cfg = _mapping(_mapping(read_yaml(hydra_file), hydra_file, "Hydra's record").get("hydra"), hydra_file,
                         "its hydra: section") if hydra_file.exists() else {}
    runtime = _mapping(hydra_cfg.get("runtime"), hydra_file, "hydra.runtime")
    config_file = hydra_dir / COMPOSED_CONFIG
    if not config_file.exists():
        config_file = path / RUN_CONFIG
    config = _mapping(read_yaml(config_file), config_file, "the run's config") if config_file.exists() else {}
    metrics = read_metrics(path / METRICS) if (path / METRICS).exists() else None
    choices = {k: v for k, v in _mapping(runtime.get("choices"), hydra_file, "hydra.runtime.choices").items()
               if not k.startswith("hydra")}
    job = _mapping(hydra_cfg.get("job"), hydra_file, "hydra.job")
    return RunDir(path=path, overrides=overrides, entry=job.get("name"), choices=choices, config=config,
                  metrics=metrics, provenance=read_provenance(path),
                  headline=headline_metrics(metrics) if metrics else {},
                  origin=_origin(path, config, runtime.get("cwd")))


def _origin(path: Path, config: Mapping, cwd: str | None) -> RunDir | None:
    """The train.py run a re-test's checkpoint comes from (<run>/checkpoints/X.ckpt, relative to the command's
    directory), where it is still there."""
    ckpt = config.get("ckpt_path")
    if not isinstance(ckpt, str) or not ckpt.endswith(".ckpt"):  # none, or train.py's ckpt_path=last (a resume)
        return None
    run = (Path(cwd or ".") / ckpt).parent.parent
    if not is_run_dir(run) or run.resolve() == path.resolve():  # train.py ckpt_path=last: the run itself
        return None
    return read_run(run)


# ---- finding runs ----------------------------------------------------------------------------------------------

def _job_order(path: Path) -> tuple:
    return (0, int(path.name), "") if path.name.isdigit() else (1, 0, path.name)


def _runs_below(folder: Path) -> list[Path]:
    """The run directories inside `folder` at any depth (a run directory's own folders are not searched), each
    folder's in job order."""
    found: list[Path] = []
    for path in sorted((p for p in folder.iterdir() if p.is_dir()), key=_job_order):
        found += [path] if is_run_dir(path) else _runs_below(path)
    return found


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """The run directories among `paths` (module docstring), in the order given (a folder's in job order); a
    path that holds none is refused, and so is a run reached twice, naming it."""
    found: list[Path] = []
    reached: dict[Path, Path] = {}
    for given in map(Path, paths):
        if not given.exists():
            raise DataError("no such directory", file=given)
        if not given.is_dir():
            raise DataError("a file, where a run directory or a folder of runs is expected", file=given)
        if is_run_dir(given) or is_decoded(given):
            runs = [given]
        else:
            runs = _runs_below(given)
            if not runs:
                raise DataError(f"neither a run directory ({HYDRA}/, {METRICS}, {RUN_CONFIG}) nor a folder holding "
                                "any (a sweep)", file=given)
        for run in runs:
            key = run.resolve()
            if key in reached:
                how = "given twice" if reached[key] == given else f"given itself and inside {reached[key]}" \
                    if reached[key] == run or given == run else f"inside both {reached[key]} and {given}"
                raise DataError(f"this run is {how}: each run is counted once, so give it once", file=run)
            reached[key] = given
            found.append(run)
    return found


def read_runs(paths: Iterable[str | Path]) -> list[RunDir]:
    return [read_run(p) for p in find_runs(paths)]
