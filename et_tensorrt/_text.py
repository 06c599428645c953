"""The one text-table printer (partition report, ``inspect``, the command line's plans and comparisons)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

_MIN_LAST = 24  # narrower than this, the last column goes on lines of its own


def table(rows: Sequence[Sequence[object]], *, indent: str = "", width: int | None = None) -> list[str]:
    """``rows[0]`` is the header. Columns are padded to their widest cell, with a dashed line under the
    header. With ``width``, the last column (the free text: a decision, a reason) wraps so that lines fit:
    continuation lines start under that column, or, when the other columns leave it fewer than 24
    characters, it goes on lines of its own, indented under the row."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    start = len(indent) + sum(w + 2 for w in widths[:-1])
    room = None if width is None else width - start
    last_width = widths[-1] if room is None else max(min(widths[-1], room), len(cells[0][-1]))
    dashes = ["-" * w for w in widths[:-1]] + ["-" * last_width]
    lines = []
    for row in [cells[0], dashes, *cells[1:]]:
        lead = indent + "".join(c.ljust(w + 2) for c, w in zip(row[:-1], widths[:-1], strict=True))
        last = row[-1]
        if room is None or len(lead) + len(last) <= width:
            lines.append((lead + last).rstrip())
        elif room >= _MIN_LAST:
            first, *rest = textwrap.wrap(last, room, break_on_hyphens=False) or [""]
            lines.append((lead + first).rstrip())
            lines.extend(" " * start + chunk for chunk in rest)
        else:
            lines.append(lead.rstrip())
            pad = indent + "    "
            lines.extend(pad + chunk for chunk in textwrap.wrap(last, max(width - len(pad), _MIN_LAST)))
    return lines
