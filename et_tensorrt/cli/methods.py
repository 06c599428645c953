"""Which method of a program a command runs (``run``, ``check``: ``--method``, default ``forward``), told before any
work: a program without it is refused with its methods listed. A ``.pte``'s methods are read from its flatbuffer
(format/pte_tables.py), without ExecuTorch or torch."""

from __future__ import annotations

from collections.abc import Sequence

from .common import CliError, UsageError


def pte_methods(path: str):
    """The method tables of a .pte (format/pte_tables.py), from its flatbuffer only: no ExecuTorch load."""
    from ..format.pte_tables import PteTableError, read_tables
    from ..inspection import NotAProgramError, read_flatbuffer

    try:
        return read_tables(read_flatbuffer(path)).plans
    except NotAProgramError as e:
        raise CliError(str(e)) from e
    except PteTableError as e:
        raise CliError(f"{path!r} could not be parsed as an ExecuTorch program ({e})") from e


def is_constant_method(plan) -> bool:
    """An ExecuTorch constant method (``get_max_seq_len``): no inputs, values out (what LLM runners read)."""
    return not plan.inputs and all(plan.values[i].kind != "Tensor" for i in plan.outputs)


def choose_method(path: str, method: str | None, plans) -> object:
    """The plan of ``method`` (default ``forward``); a UsageError listing the methods when there is none."""
    wanted = method or "forward"
    for plan in plans:
        if plan.name == wanted:
            return plan
    runnable = [p.name for p in plans if not is_constant_method(p)]
    constants = [p.name for p in plans if is_constant_method(p)]
    listed = f"its methods: {', '.join(runnable) or 'none'}"
    if constants:
        listed += f"; constant methods: {', '.join(constants)}"
    hint = f"name one with --method (e.g. --method {runnable[0]})" if runnable else "it has nothing to run"
    raise UsageError(f"{path} has no method {wanted!r} ({listed}): {hint}")


def method_to_check(named: Sequence[tuple[str | None, str]], method: str | None) -> str:
    """The method ``check`` runs: ``--method``, else ``forward``; a UsageError listing the methods the programs
    make when it is not one of them."""
    names = ["forward"] if len(named) == 1 and named[0][0] is None else [name for name, _ in named]
    wanted = method or "forward"
    if wanted in names:
        return wanted
    hint = (
        "a .pt2 given alone is the method forward; name methods as METHOD=PROGRAM.pt2"
        if names == ["forward"]
        else f"name one with --method (e.g. --method {names[0]})"
    )
    raise UsageError(f"the program has no method {wanted!r} (its methods: {', '.join(names)}): {hint}")
