"""What one exported lmms-eval task is: a `TaskSpec`, the data config of a multiple-choice task of the harness (the
`_target_` of its factory and the factory's keyword arguments, as `conf/data/<name>.yaml` and a run's
config.resolved.yaml hold it) with lmms-eval's name for it, the numbers lmms-eval reports and how its --limit
maps onto the task. The benchmarks declare their tasks in their registration (`Benchmark.lmms_eval`,
spacewalk/benchmarks/registry.py); nothing here names a benchmark.

The spec is written into the exported task folder (spacewalk_task.json, read by the folder's utils.py, and the
YAML's `metadata`, which lmms-eval copies into its results file), so the task that lmms-eval runs, the one that
scores its replies and the one `import` rebuilds are built by the same call: `build_task(spec.data)`.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from spacewalk.core.errors import ConfigError, DataError

SETTINGS_FILE = "spacewalk_task.json"
# the data keys every data config shares (spacewalk/benchmarks/release_or_synthetic.py)
SHARED_KEYS = ("root", "synthetic_root", "seed", "synthetic")


@dataclass(frozen=True)
class TaskSpec:
    """An exported task: lmms-eval's `name`, the `benchmark` it belongs to, `data` (`_target_` and the factory's
    keyword arguments), `limit` (the factory's "first N items" argument), `metrics` (metrics.json's numbers lmms-eval
    reports: name -> higher is better), `data_config` (the conf/data config of the same task under evaluate.py),
    `cluster` (the item meta key of lmms-eval's clustered standard error) and `group` (the lmms-eval group that runs
    it with its siblings)."""

    name: str
    benchmark: str
    data: Mapping[str, Any]
    limit: str | None
    metrics: Mapping[str, bool]
    data_config: str = ""
    cluster: str | None = None
    group: str | None = None
    notes: str = field(default="", compare=False)

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "benchmark": self.benchmark, "data": dict(self.data), "limit": self.limit,
                "metrics": dict(self.metrics), "data_config": self.data_config, "cluster": self.cluster,
                "group": self.group}

    @classmethod
    def from_json(cls, raw: Any, where: str | Path) -> TaskSpec:
        keys = ("name", "benchmark", "data", "limit", "metrics", "cluster")
        if not isinstance(raw, Mapping) or any(k not in raw for k in keys):
            raise DataError(f"not a spacewalk task spec (needs {', '.join(keys)})", file=where)
        if not isinstance(raw["data"], Mapping) or "_target_" not in raw["data"]:
            raise DataError("has no data config with a _target_", file=where, field="data")
        return cls(str(raw["name"]), str(raw["benchmark"]), dict(raw["data"]), raw["limit"], dict(raw["metrics"]),
                   str(raw.get("data_config") or ""), raw["cluster"], raw.get("group"))

    def limited(self, n: int | None) -> TaskSpec:
        """The spec of the task's first `n` items (lmms-eval's --limit n); None: the spec as it is."""
        if n is None:
            return self
        if self.limit is None:
            raise ConfigError(f"task {self.name} cannot be limited to its first {n} items (its factory has no "
                              "such argument): run every item")
        current = self.data.get(self.limit)
        if current is not None and current < n:
            raise ConfigError(f"task {self.name}: {n} items asked for, but its {self.limit} is {current}")
        return replace(self, data={**self.data, self.limit: n})


def read_spec(path: str | Path) -> TaskSpec:
    from spacewalk.core.io import load_json

    return TaskSpec.from_json(load_json(path), path)


def build_task(data: Mapping[str, Any]):
    """The harness task of a data config: its `_target_` called with the other keys (what Hydra's instantiate
    does for evaluate.py, without Hydra: the library imports none)."""
    target = str(data["_target_"])
    module_name, _, function = target.rpartition(".")
    try:
        factory = getattr(importlib.import_module(module_name), function)
    except (ImportError, AttributeError, ValueError):
        raise ConfigError(f"data _target_ {target!r} is not an importable function") from None
    return factory(**{k: v for k, v in data.items() if k != "_target_"})


def registered() -> dict[str, TaskSpec]:
    """Every lmms-eval task the benchmarks register, by name, its data as the factory's defaults leave it (no
    release root, no synthetic root yet: `for_export` fills them)."""
    from spacewalk.benchmarks.registry import discover

    out = {}
    for benchmark in discover().values():
        for task in benchmark.lmms_eval:
            out[task.name] = TaskSpec(task.name, benchmark.name, {"_target_": task.factory, **task.settings},
                                      task.limit, dict(task.metrics), task.data_config, task.cluster, task.group,
                                      task.notes)
    return out


def factory_parameters(spec: TaskSpec) -> list[str]:
    """The keyword arguments the task's factory takes."""
    module_name, _, function = str(spec.data["_target_"]).rpartition(".")
    return list(inspect.signature(getattr(importlib.import_module(module_name), function)).parameters)


def data_settings(values: Sequence[str], specs: Sequence[TaskSpec]) -> dict[str, dict[str, Any]]:
    """`SCOPE.KEY=VALUE` command-line settings -> {task name: {key: value}} for `specs`, each value read as YAML (a
    number, null, a list, or text), as a Hydra override reads it. SCOPE is a task (the setting is its; a key its
    factory does not take is refused) or a benchmark (the setting goes to each of its tasks whose factory takes the
    key, `spacewalk18.root=R` to all of them, `spacewalk18.samples_per_video=N` to the step questions; refused when
    none does). A task's own setting wins over its benchmark's."""
    out: dict[str, dict[str, Any]] = {spec.name: {} for spec in specs}
    parameters = {spec.name: factory_parameters(spec) for spec in specs}
    by_task = {spec.name: spec for spec in specs}
    benchmarks = sorted({spec.benchmark for spec in specs})
    task_level = []
    for value in values:
        name, sep, text = value.partition("=")
        scope, dot, key = name.partition(".")
        if not sep or not dot or not key:
            raise ConfigError(f"--data {value!r}: write SCOPE.KEY=VALUE (SCOPE a benchmark or a task), e.g. "
                              "spacewalk18.root=/data/spacewalk18")
        try:
            parsed = yaml.safe_load(text) if text else None
        except yaml.YAMLError:
            parsed = text
        if scope in by_task:
            if key not in parameters[scope]:
                raise ConfigError(f"--data {value!r}: task {scope} ({by_task[scope].data['_target_']}) takes no {key}; "
                                  f"its settings: {', '.join(parameters[scope])}")
            task_level.append((scope, key, parsed))
        elif scope in benchmarks:
            takers = [spec.name for spec in specs if spec.benchmark == scope and key in parameters[spec.name]]
            if not takers:
                raise ConfigError(f"--data {value!r}: no exported task of {scope} takes {key}")
            for task in takers:
                out[task][key] = parsed
        else:
            raise ConfigError(f"--data {value!r}: {scope} is neither an exported task nor the benchmark of one (the "
                              f"benchmarks: {', '.join(benchmarks)}; the tasks: {', '.join(by_task)})")
    for task, key, parsed in task_level:
        out[task][key] = parsed
    return out


def for_export(spec: TaskSpec, settings: Mapping[str, Any], data_dir: Path) -> TaskSpec:
    """The spec with the user's settings (`data_settings`) over the registered ones, the synthetic set's root where no
    release is given (`<data dir>/synthetic_<benchmark>`, as every data config has it) and every path absolute, so
    lmms-eval finds the data from any directory."""
    data = {"_target_": spec.data["_target_"], "root": None, "seed": 0, "synthetic": {},
            "synthetic_root": str(data_dir / f"synthetic_{spec.benchmark}"),
            **{k: v for k, v in spec.data.items() if k != "_target_"}, **settings}
    for key in ("root", "synthetic_root", "frames_root", "answers", "questions"):
        if isinstance(data.get(key), str) and data[key]:
            data[key] = str(Path(os.path.expanduser(data[key])).absolute())
    return replace(spec, data=data)


def spec_json(spec: TaskSpec) -> str:
    return json.dumps(spec.as_json(), sort_keys=True, ensure_ascii=False)
