"""A markdown document whose tables the report writes (`--update`) and checks (`--verify`): each table lives in its
block, between `<!-- spacewalk.report table="TITLE" -->` and `<!-- /spacewalk.report -->`; the text around the
blocks is the author's and is never touched.

The document is read whole before anything is written: a block without its end marker (before the next block or
the end of the file), an end marker without a block, a title whose block appears twice, or a table of the spec
without a block, is refused naming the line, and the file stays as it was. Blocks of tables the spec does not
hold are left alone (another spec fills them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from spacewalk.core.errors import ConfigError, DataError

START = re.compile(r'<!-- spacewalk\.report table="([^"]*)" -->')
END = "<!-- /spacewalk.report -->"


def start_marker(title: str) -> str:
    return f'<!-- spacewalk.report table="{title}" -->'


@dataclass(frozen=True)
class Block:
    title: str
    begin: int  # the offset of the start marker
    end: int  # the offset of the end marker
    line: int  # the start marker's line (1-based)


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def blocks(text: str, name: str) -> dict[str, Block]:
    """Every block of the document by title, each checked whole (module docstring)."""
    markers = sorted([(m.start(), m.end(), m.group(1)) for m in START.finditer(text)]
                     + [(m.start(), m.end(), None) for m in re.finditer(re.escape(END), text)])
    found: dict[str, Block] = {}
    open_block: tuple[int, str] | None = None
    for offset, _, title in markers:
        if title is not None:
            if open_block is not None:
                raise DataError(f"line {_line(text, open_block[0])}: the block {open_block[1]!r} has no end marker "
                                f"{END} before the next block (line {_line(text, offset)}); nothing was written",
                                file=name)
            open_block = (offset, title)
            continue
        if open_block is None:
            raise DataError(f"line {_line(text, offset)}: an end marker {END} without its block's start; nothing was "
                            "written", file=name)
        begin, title = open_block
        if title in found:
            raise DataError(f"lines {found[title].line} and {_line(text, begin)}: the block {title!r} appears twice "
                            "(the second would go stale unnoticed); nothing was written", file=name)
        found[title] = Block(title, begin, offset, _line(text, begin))
        open_block = None
    if open_block is not None:
        raise DataError(f"line {_line(text, open_block[0])}: the block {open_block[1]!r} has no end marker {END} "
                        "before the end of the file; nothing was written", file=name)
    return found


def update_document(text: str, tables: Sequence[tuple[str | None, str]], made_by: str, name: str) -> str:
    """`text` with each table's block replaced by (title, the table's markdown): the lines between its markers
    become the table made now (the markers stay, so the next run replaces it again). Every table needs a title and
    its block, and every block must be whole, before anything changes."""
    found = blocks(text, name)
    for title, _ in tables:
        if not title:
            raise ConfigError(f"--update {name}: every table of the spec needs a title (its block's name)")
        if title not in found:
            raise DataError(f"no block for the table {title!r}: put the lines {start_marker(title)} and {END} where it "
                            "goes", file=name)
    made = {title: markdown for title, markdown in tables}
    out, at = [], 0
    for block in sorted(found.values(), key=lambda b: b.begin):
        if block.title not in made:
            continue
        body = made[block.title].replace(f"### {block.title}\n\n", "", 1)  # the document has its own heading
        out += [text[at:block.begin], f"{start_marker(block.title)}\n{made_by}\n\n{body}"]
        at = block.end
    return "".join(out) + text[at:]


def _table_lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.startswith("|")]


def stale_rows(text: str, tables: Sequence[tuple[str | None, str]], name: str) -> list[str]:
    """The table rows of `text` (a document made by `--update`) that the runs no longer give: one line per
    row, the document's and the runs' (`--verify`: the guard that no number in the document drifted from its
    runs, or was edited by hand). Only the table lines are compared: the made-by line and the commands may differ."""
    made = update_document(text, tables, "", name)
    have, want = blocks(text, name), blocks(made, name)
    stale = []
    for title, _ in tables:
        old_lines = _table_lines(text[have[title].begin:have[title].end])
        new_lines = _table_lines(made[want[title].begin:want[title].end])
        for i in range(max(len(old_lines), len(new_lines))):
            old = old_lines[i] if i < len(old_lines) else "(no row)"
            new = new_lines[i] if i < len(new_lines) else "(no row)"
            if old != new:
                stale.append(f"{name}, table {title!r}: the document has\n    {old}\n  its runs give\n    {new}")
    return stale
