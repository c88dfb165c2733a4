"""A report's spec: the layout of its tables, data rather than code (docs/tables/*.yaml). A spec file is a YAML list
of tables, each a mapping: one with `compare` is a table of paired comparisons (`ComparisonSpec`: comparisons.py's
docstring shows its keys), the others a table of numbers (`TableSpec`: command.py's docstring shows its keys).

Checked when read, each error naming the file, the table and the key: unknown keys, empty lists, a seed as a row
or column key, a malformed quoted row, and two tables with one title (each title is its block's name in a
document: the second would overwrite the first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spacewalk.core.errors import ConfigError, DataError
from spacewalk.results.compare import NEW_RECORDINGS, NEW_UNITS, RECIPES, THESE_RECORDINGS, options_from
from spacewalk.results.layout import DECODED, read_yaml
from spacewalk.results.selection import where_mapping

METRIC_COLUMNS = "metric"  # `columns: [metric]`: the numbers of `metrics` are the columns


def check_spec_keys(values: Any, keys: Sequence[str], where: str, what: str) -> None:
    """A spec table is a mapping of known keys; anything else is refused naming `where` (file and table)."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: {what} must be a mapping with keys {', '.join(keys)}")
    unknown = sorted(set(values) - set(keys))
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; {what} has {', '.join(keys)}")


@dataclass(frozen=True)
class QuotedRow:
    label: str
    cells: dict[str, str]  # column label's value (as in column_order) -> the quoted text
    after: str | None = None  # the row label (or row value) it follows; None: at the end
    before: str | None = None  # or the one it precedes (a paper's chance level above the runs)


@dataclass(frozen=True)
class TableSpec:
    """One table's layout (command.py's docstring). `metrics` None: the headline numbers its runs' benchmark
    declares for their task (spacewalk.benchmarks.registry)."""

    metrics: tuple[str, ...] | None = None
    rows: tuple[str, ...] = ("model",)
    columns: tuple[str, ...] = ("context",)
    title: str | None = None
    where: dict[str, Any] = field(default_factory=dict)
    row_header: str | None = None
    row_labels: dict[str, str] = field(default_factory=dict)
    column_label: str = "{}"
    column_labels: dict[str, str] = field(default_factory=dict)
    row_order: tuple[str, ...] = ()
    column_order: tuple[str, ...] = ()
    quoted: tuple[QuotedRow, ...] = ()
    digits: int = 2
    place: str = "the table"  # where the spec came from (file and table), for errors

    KEYS = ("title", "metrics", "rows", "columns", "where", "row_header", "row_labels", "column_label", "column_labels",
            "row_order", "column_order", "quoted", "digits")

    @classmethod
    def from_mapping(cls, values: Any, where: str) -> TableSpec:
        """From a spec file's mapping; `where` names it in errors (file and table)."""
        check_spec_keys(values, cls.KEYS, where, "a table spec")

        def names(key: str, default: tuple | None) -> tuple[str, ...] | None:
            if key not in values and default is None:
                return None
            value = values.get(key, default)
            value = [value] if isinstance(value, str) else value
            if not isinstance(value, (list, tuple)) or not value and key in ("metrics", "rows", "columns") \
                    or not all(isinstance(v, (str, int, float)) for v in value):
                raise ConfigError(f"{where}: {key} must be a non-empty list of names, got {value!r}")
            return tuple(str(v) for v in value)

        def mapping(key: str) -> dict[str, str]:
            value = values.get(key) or {}
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}: {key} must be a mapping, got {value!r}")
            return {str(k): str(v) for k, v in value.items()}

        quoted = []
        for i, q in enumerate(values.get("quoted") or []):
            if not isinstance(q, Mapping) or "label" not in q or not isinstance(q.get("cells", {}), Mapping) or \
                    set(q) - {"label", "cells", "after", "before"} or q.get("after") is not None and \
                    q.get("before") is not None:
                raise ConfigError(f"{where}: quoted[{i}] must be a mapping with label, cells (column -> text) and "
                                  f"optionally after or before, got {q!r}")
            quoted.append(QuotedRow(str(q["label"]), {str(k): str(v) for k, v in (q.get("cells") or {}).items()},
                                    None if q.get("after") is None else str(q["after"]),
                                    None if q.get("before") is None else str(q["before"])))
        digits = values.get("digits", 2)
        if isinstance(digits, bool) or not isinstance(digits, int) or digits < 0:
            raise ConfigError(f"{where}: digits must be a non-negative integer, got {digits!r}")
        title = values.get("title")
        if title is not None and (not isinstance(title, str) or not title.strip() or '"' in title):
            raise ConfigError(f"{where}: title must be text without a double quote (it names the table's block), "
                              f"got {title!r}")
        spec = cls(metrics=names("metrics", None), rows=names("rows", cls.rows),
                   columns=names("columns", cls.columns), title=title,
                   where=where_mapping(values.get("where"), f"{where}: where"),
                   row_header=values.get("row_header"), row_labels=mapping("row_labels"),
                   column_label=str(values.get("column_label", "{}")),
                   column_labels=mapping("column_labels"), row_order=names("row_order", ()),
                   column_order=names("column_order", ()), quoted=tuple(quoted), digits=digits, place=where)
        if "seed" in spec.rows + spec.columns:
            raise ConfigError(f"{where}: seed cannot be a row or column key: runs that differ only in their seed "
                              "are one cell (mean ± std over the seeds)")
        if METRIC_COLUMNS in spec.rows or METRIC_COLUMNS in spec.columns and len(spec.columns) > 1:
            raise ConfigError(f"{where}: `{METRIC_COLUMNS}` stands alone as `columns: [{METRIC_COLUMNS}]` (one column "
                              "per number of `metrics`), never a row key or beside another column key")
        if spec.metric_columns and spec.metrics is None:
            raise ConfigError(f"{where}: `columns: [{METRIC_COLUMNS}]` needs its `metrics`, one per column")
        return spec

    @property
    def metric_columns(self) -> bool:
        """One column per number (`columns: [metric]`), one number per cell."""
        return self.columns == (METRIC_COLUMNS,)

    @property
    def name(self) -> str:
        return f"table {self.title!r}" if self.title else self.place


PREDICTIONS = "predictions"  # a side's key that is not a config key: `decoded` (module docstring)
# `claim:` -> the claims it takes, in order of preference
CLAIMS = {"widest": (RECIPES, NEW_RECORDINGS, THESE_RECORDINGS, NEW_UNITS), "recipes": (RECIPES,),
          "recordings": (NEW_RECORDINGS,), "samples": (THESE_RECORDINGS, NEW_UNITS)}
SHORT = {RECIPES: "recipes", NEW_RECORDINGS: "new recordings", THESE_RECORDINGS: "these recordings",
         NEW_UNITS: "new units"}


@dataclass(frozen=True)
class Comparison:
    label: str
    a: dict[str, Any]
    b: dict[str, Any]
    a_decoded: bool = False  # the side's decoded predictions, not the runs' own
    b_decoded: bool = False


def _side_keys(values: Any, where: str) -> tuple[dict[str, Any], bool]:
    """A side's config keys and whether it compares decoded predictions (`predictions: decoded`)."""
    if not isinstance(values, Mapping) or PREDICTIONS not in values:
        return where_mapping(values, where), False
    if values[PREDICTIONS] != DECODED:
        raise ConfigError(f"{where}: {PREDICTIONS} must be {DECODED!r} (the runs' plan-decoded predictions) or left "
                          f"out (their own), got {values[PREDICTIONS]!r}")
    keys = {k: v for k, v in values.items() if k != PREDICTIONS}
    if not keys:
        raise ConfigError(f"{where}: a side needs config keys besides {PREDICTIONS}")
    return where_mapping(keys, where), True


@dataclass(frozen=True)
class ComparisonSpec:
    """One comparison table's layout (module docstring)."""

    comparisons: tuple[Comparison, ...]
    title: str | None = None
    metrics: tuple[str, ...] | None = None
    where: dict[str, Any] = field(default_factory=dict)
    claim: str = "widest"
    label_header: str = "comparison"
    a_header: str = "A"
    b_header: str = "B"
    resamples: int = 1000
    seed: int = 0
    level: float = 0.95
    digits: int = 2
    place: str = "the table"

    KEYS = ("title", "compare", "metrics", "where", "claim", "label_header", "a_header", "b_header", "resamples",
            "seed", "level", "digits")

    @property
    def name(self) -> str:
        return f"table {self.title!r}" if self.title else self.place

    @classmethod
    def from_mapping(cls, values: Any, where: str) -> ComparisonSpec:
        """From a spec file's mapping (one with `compare`); `where` names it in errors (file and table)."""
        check_spec_keys(values, cls.KEYS, where, "a comparison table")
        listed = values.get("compare")
        if not isinstance(listed, list) or not listed:
            raise ConfigError(f"{where}: compare must be a non-empty list of {{label, a, b}}, got {listed!r}")
        comparisons = []
        for i, c in enumerate(listed):
            if not isinstance(c, Mapping) or set(c) != {"label", "a", "b"} or not c["a"] or not c["b"]:
                raise ConfigError(f"{where}: compare[{i}] must be a mapping with label, a and b (each a mapping of "
                                  f"config keys to values, as `where`), got {c!r}")
            (a, a_decoded), (b, b_decoded) = (_side_keys(c[k], f"{where}: compare[{i}].{k}") for k in ("a", "b"))
            comparisons.append(Comparison(str(c["label"]), a, b, a_decoded, b_decoded))
        labels = [c.label for c in comparisons]
        if len(set(labels)) < len(labels):
            raise ConfigError(f"{where}: two comparisons with one label: {labels}")
        metrics = values.get("metrics")
        metrics = [metrics] if isinstance(metrics, str) else metrics
        if metrics is not None and (not isinstance(metrics, (list, tuple)) or not metrics
                                    or not all(isinstance(m, str) for m in metrics)):
            raise ConfigError(f"{where}: metrics must be a non-empty list of names, got {metrics!r}")
        digits = values.get("digits", cls.digits)
        if isinstance(digits, bool) or not isinstance(digits, int) or digits < 0:
            raise ConfigError(f"{where}: digits must be a non-negative integer, got {digits!r}")
        claim = values.get("claim", cls.claim)
        if claim not in CLAIMS:
            raise ConfigError(f"{where}: claim must be one of {', '.join(CLAIMS)}, got {claim!r}")
        title = values.get("title")
        if title is not None and (not isinstance(title, str) or not title.strip() or '"' in title):
            raise ConfigError(f"{where}: title must be text without a double quote (it names the table's block), "
                              f"got {title!r}")
        options = options_from(values.get("resamples", cls.resamples), values.get("level", cls.level),
                               values.get("seed", cls.seed), f"{where}: ")
        return cls(tuple(comparisons), title=title, metrics=None if metrics is None else tuple(metrics),
                   where=where_mapping(values.get("where"), f"{where}: where"), claim=claim,
                   label_header=str(values.get("label_header", cls.label_header)),
                   a_header=str(values.get("a_header", cls.a_header)),
                   b_header=str(values.get("b_header", cls.b_header)), resamples=options.n_resamples,
                   seed=options.seed, level=options.level, digits=digits, place=where)


Spec = TableSpec | ComparisonSpec


def load_specs(path: str | Path) -> list[Spec]:
    """The tables of a spec file: a YAML list of table mappings (or one mapping); one with `compare` is a table
    of paired comparisons (comparisons.py). Two tables with one title are refused."""
    path = Path(path)
    values = read_yaml(path)
    values = [values] if isinstance(values, Mapping) else values
    if not isinstance(values, list) or not values:
        raise DataError("a spec file is a list of tables (mappings)", file=path)
    specs = [(ComparisonSpec if isinstance(v, Mapping) and "compare" in v else TableSpec).from_mapping(
        v, f"{path}: table {i}") for i, v in enumerate(values)]
    check_titles(specs, str(path))
    return specs


def check_titles(specs: Sequence[Any], where: str) -> None:
    seen: dict[str, int] = {}
    for i, spec in enumerate(specs):
        if spec.title is None:
            continue
        if spec.title in seen:
            raise ConfigError(f"{where}: tables {seen[spec.title]} and {i} have one title, {spec.title!r}: a title "
                              "names the table's block in a document, so each must be its own")
        seen[spec.title] = i
