"""A finished run directory as the tables read it: which config it ran (the config keys a table groups by), its
headline numbers with their intervals, and the command and commit that produced it.

A run directory is what train.py and evaluate.py write (`.hydra/` with `overrides.yaml`, `config.yaml`,
`hydra.yaml`; `metrics.json`; `provenance.json`, spacewalk/results/provenance.py); a sweep directory holds one per job
(`0/`, `1/`, ...), and evaluate.py's multiple-choice runs lie deeper (`<data>/<model>/<hash>/`). `find_runs` takes a
run directory or any folder holding runs.

**Headline numbers.** Every task's metrics.json holds `"intervals"` (spacewalk/results/bootstrap.py): for each headline
number an interval dict (estimate, low, high, level, unit, ...), at the top level (step recognition, intra-video
retrieval, the multiple-choice tasks, where a group of them, e.g. `per_type` or `per_domain`, is a dict of interval
dicts) or beside each HiREST task's numbers (`{split: {task: {..., "intervals": {...}}}}`). The headline numbers of
a run are exactly those, named by their path with "/" (`Accuracy`, `per_domain/surgery`,
`test/moment_retrieval/R@0.5`), with the interval's `estimate` (the official number) as the value. Beside them,
numbers that have no interval: HiREST captioning's overall corpus metrics (`test/step_captioning/CIDEr`, from
its `"all"`), `best_val_loss`, intra-video retrieval's `val/Accuracy`, and the plan decoding's `decoded/Accuracy`,
`mAP`, `IoU` of a run decoded before its decoded numbers had intervals (they are under `decoded/intervals` since). A
run
written with `metrics.bootstrap.n_resamples=0` (or before the intervals) falls back to its top-level `Accuracy`,
`mAP`, `IoU`, `accuracy`, without intervals. Any other number of metrics.json can still be asked for by its path
(`metric_value`).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.core.io import load_json
from spacewalk.results.provenance import command_line, read_provenance

METRICS_FILE = "metrics.json"
# numbers reported beside the intervals' ones, without an interval (the decoded ones: of runs decoded before theirs)
WITHOUT_INTERVALS = ("best_val_loss", "val/Accuracy", "decoded/Accuracy", "decoded/mAP", "decoded/IoU")
# a run without "intervals" (n_resamples=0, or written before them): its top-level headline numbers
FALLBACK = ("Accuracy", "mAP", "IoU", "accuracy")


@dataclass(frozen=True)
class Metric:
    """One headline number: the value, its interval (None without one) and the interval's unit and level."""

    value: float
    low: float | None = None
    high: float | None = None
    unit: str | None = None
    level: float | None = None
    # how many units (questions, recordings) the interval resampled: a table's column header can say it ("when
    # task (67)"); not part of the number, so two Metrics that differ only in it are equal
    n: int | None = field(default=None, compare=False)


def _is_interval(x: Any) -> bool:
    return isinstance(x, Mapping) and "estimate" in x and "low" in x and "high" in x


def _number(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return None if math.isnan(x) else float(x)


def _intervals(node: Any, prefix: str, out: dict[str, Metric]) -> None:
    """The interval dicts under an "intervals" mapping (nested groups of them too), by path."""
    for key, value in node.items():
        name = f"{prefix}{key}"
        if _is_interval(value):
            estimate = _number(value["estimate"])
            if estimate is not None:
                n = value.get("n")
                out[name] = Metric(estimate, _number(value["low"]), _number(value["high"]), value.get("unit"),
                                   value.get("level"), n if isinstance(n, int) and not isinstance(n, bool) else None)
        elif isinstance(value, Mapping):
            _intervals(value, f"{name}/", out)


def _numbers(node: Mapping, prefix: str, out: dict[str, Metric]) -> None:
    for key, value in node.items():
        if isinstance(value, Mapping):
            _numbers(value, f"{prefix}{key}/", out)
        elif _number(value) is not None:
            out[f"{prefix}{key}"] = Metric(_number(value))


def _walk(node: Mapping, prefix: str, out: dict[str, Metric]) -> None:
    """Every "intervals" mapping in metrics.json, with the path of the dict that holds it as prefix; and a HiREST
    task's overall numbers (`"all"`) where it has no intervals (captioning's corpus metrics), without one."""
    if prefix and "intervals" not in node and isinstance(node.get("all"), Mapping):
        _numbers(node["all"], prefix, out)
    for key, value in node.items():
        if key == "intervals" and isinstance(value, Mapping):
            _intervals(value, prefix, out)
        elif isinstance(value, Mapping) and key != "all":
            _walk(value, f"{prefix}{key}/", out)


def metric_value(metrics: Mapping, path: str) -> float | None:
    """The number at `path` ("decoded/Accuracy", "val/Accuracy") in metrics.json, None where there is none."""
    node: Any = metrics
    for part in path.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return _number(node)


def headline_metrics(metrics: Mapping) -> dict[str, Metric]:
    """The run's headline numbers (module docstring): those with an interval, then the ones without."""
    out: dict[str, Metric] = {}
    _walk(metrics, "", out)
    if not out:
        for name in FALLBACK:
            value = metric_value(metrics, name)
            if value is not None:
                out[name] = Metric(value)
    for name in WITHOUT_INTERVALS:
        value = metric_value(metrics, name)
        if value is not None and name not in out:
            out[name] = Metric(value)
    return out


def _yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise DataError(f"not valid YAML ({e})", file=path) from e


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

    def matches(self, where: Mapping[str, Any]) -> bool:
        """Whether the run's config keys have the values `where` asks for (a table's or a comparison's filter):
        None, the key is not set; a list, any of its values; text, a shell-style pattern of the value as text
        (`data.questions: "*.json"`; text without `*?[` is the value itself)."""
        return all(_matches(self.value(key), wanted) for key, wanted in where.items())

    @property
    def seed(self) -> Any:
        return self.value("seed")

    @property
    def command(self) -> str | None:
        """The job's command: the one provenance.json records, else rebuilt from .hydra/overrides.yaml (the same
        words; a run written before provenance.json existed)."""
        if self.provenance and self.provenance.get("command"):
            return self.provenance["command"]
        return command_line(self.entry, self.overrides) if self.entry else None

    @property
    def commit(self) -> str | None:
        """The commit the run's code was at ("+dirty" when tracked files differed), None where not recorded."""
        if not self.provenance or not self.provenance.get("commit"):
            return None
        return self.provenance["commit"] + ("+dirty" if self.provenance.get("dirty") else "")


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, (list, tuple)):
        return any(_matches(value, w) for w in wanted)
    if wanted is None:
        return value is None
    return value is not None and fnmatch.fnmatchcase(str(value), str(wanted))


def check_spec_keys(values: Any, keys: Sequence[str], where: str, what: str) -> None:
    """A spec table is a mapping of known keys; anything else is refused naming `where` (file and table)."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: {what} must be a mapping with keys {', '.join(keys)}")
    unknown = sorted(set(values) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; {what} has {', '.join(keys)}")


def where_mapping(value: Any, where: str) -> dict[str, Any]:
    """A `where` filter (run_dirs.RunDir.matches): config key -> None (not set), a value or pattern (as text), or a
    list of them (any of); `where` names it in errors."""
    value = value or {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where} must be a mapping of config keys to values, got {value!r}")

    def one(v: Any) -> str | None:
        if v is not None and not isinstance(v, (str, int, float)):
            raise ConfigError(f"{where}: a value must be text, a number, null or a list of them, got {v!r}")
        return None if v is None else str(v)

    return {str(k): tuple(one(x) for x in v) if isinstance(v, list) else one(v) for k, v in value.items()}


def is_run_dir(path: Path) -> bool:
    return (path / ".hydra").is_dir() or (path / METRICS_FILE).is_file()


def read_run(path: str | Path) -> RunDir:
    """Read one run directory (module docstring)."""
    path = Path(path)
    if not is_run_dir(path):
        raise DataError("not a run directory (no .hydra/ and no metrics.json)", file=path)
    hydra_dir = path / ".hydra"
    overrides = _yaml(hydra_dir / "overrides.yaml") if (hydra_dir / "overrides.yaml").is_file() else []
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise DataError("expected a list of overrides", file=hydra_dir / "overrides.yaml")
    hydra_cfg = (_yaml(hydra_dir / "hydra.yaml") or {}).get("hydra", {}) if (hydra_dir / "hydra.yaml").is_file() \
        else {}
    config_file = hydra_dir / "config.yaml"
    if not config_file.is_file():
        config_file = path / "config.resolved.yaml"
    config = (_yaml(config_file) or {}) if config_file.is_file() else {}
    metrics = load_json(path / METRICS_FILE) if (path / METRICS_FILE).is_file() else None
    if metrics is not None and not isinstance(metrics, dict):
        raise DataError("expected a JSON object", file=path / METRICS_FILE)
    choices = {k: v for k, v in ((hydra_cfg.get("runtime") or {}).get("choices") or {}).items()
               if not k.startswith("hydra")}
    config = config if isinstance(config, dict) else {}
    return RunDir(path=path, overrides=overrides, entry=(hydra_cfg.get("job") or {}).get("name"), choices=choices,
                  config=config, metrics=metrics, provenance=read_provenance(path),
                  headline=headline_metrics(metrics) if metrics else {},
                  origin=_origin(path, config, (hydra_cfg.get("runtime") or {}).get("cwd")))


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


def _job_order(path: Path) -> tuple:
    return (0, int(path.name), "") if path.name.isdigit() else (1, 0, path.name)


def _runs_below(folder: Path) -> list[Path]:
    """The run directories inside `folder` at any depth (a run directory's own subfolders are not searched),
    each folder's in job order."""
    found: list[Path] = []
    for path in sorted((p for p in folder.iterdir() if p.is_dir()), key=_job_order):
        found += [path] if is_run_dir(path) else _runs_below(path)
    return found


def find_runs(paths: Iterable[str | Path]) -> list[Path]:
    """The run directories among `paths`: a run directory itself, or each run directory below a folder (a sweep
    directory's jobs in job order; a folder of runs such as evaluate.py's
    `outputs/evaluate/runs/multiple_choice/<data>/<model>/<hash>/`). A path that is neither is refused, naming it."""
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.is_dir():
            raise DataError("no such directory", file=path)
        if is_run_dir(path):
            found.append(path)
            continue
        jobs = _runs_below(path)
        if not jobs:
            raise DataError("neither a run directory (.hydra/, metrics.json) nor a folder holding any (a sweep)",
                            file=path)
        found.extend(jobs)
    return found


def read_runs(paths: Iterable[str | Path]) -> list[RunDir]:
    return [read_run(p) for p in find_runs(paths)]
