"""Notices: what the command is doing or assuming, on stderr, so that stdout holds only its results
(``run ... > out.txt``)."""

from __future__ import annotations

import sys


def notice(text: str) -> None:
    print(f"note: {text}", file=sys.stderr, flush=True)
