"""The order in which `make test`'s two processes (pytest-xdist, `--dist loadscope`) take the test modules: the
heaviest first.

loadscope hands out whole modules (a module's fixtures are built once, in one process), by default the modules with
the most tests first. But the slowest modules are the end-to-end ones with a few long tests each, so they came last,
and one process ran the last of them while the other sat idle. Handing out the longest work first (the classic
"longest processing time first" rule) leaves the short modules to fill in at the end. A module's weight is the
number of its tests marked `slow` (each an end-to-end run: a command or a model, tens of seconds), then its number
of tests; pytest-xdist takes the modules in the order the workers collected them (its own reordering by count is
turned off in tests/conftest.py), and every worker sorts alike, so they agree on the collection.
"""

from __future__ import annotations

from collections import Counter


def module_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


def heaviest_modules_first(items: list) -> None:
    """Sort `items` in place: modules by (slow tests, tests) descending; the sort is stable, so each module's tests
    stay together in their own order, and modules of equal weight in the order collected."""
    slow, tests = Counter(), Counter()
    for item in items:
        tests[module_of(item)] += 1
        slow[module_of(item)] += item.get_closest_marker("slow") is not None
    items.sort(key=lambda item: (-slow[module_of(item)], -tests[module_of(item)]))
