"""The .ptd a program's named data lives in: ``--data``, else ``X.ptd`` beside ``X.pte`` (what ``lower --named-data
ptd -o X.pte`` writes)."""

from __future__ import annotations

import os

from .progress import notice


def beside(pte: str) -> str:
    return os.path.splitext(pte)[0] + ".ptd"


def data_file(pte: str, given: str | None) -> str | None:
    """``given``, else the .ptd beside ``pte`` when there is one (said in one line on stderr), else None."""
    if given:
        return given
    path = beside(pte)
    if os.path.isfile(path):
        notice(f"named data from {path}, the .ptd beside the program (--data names another)")
        return path
    return None
