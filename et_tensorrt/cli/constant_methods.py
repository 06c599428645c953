"""The constant methods ``lower`` and ``check`` add to the program: ``--constant-methods``, else those the ``.pt2``
files carry (et_tensorrt.llm's exporters record them, llm/constants.py ``carry``), said as they are taken; a
prefill/decode program left without the LLM methods gets a note that ``generate`` will refuse it."""

from __future__ import annotations

import sys

from .common import UsageError


def constant_methods(given: dict | None, programs, source: str) -> dict | None:
    """``given`` (``--constant-methods``), else what ``programs`` (one ExportedProgram or method -> ExportedProgram)
    carry; printed. A UsageError when the files carry methods of one name with different values."""
    from ..llm.constants import REQUIRED_METHODS, carried

    named = programs if isinstance(programs, dict) else {"forward": programs}
    if given is not None:
        methods, origin = given, "--constant-methods"
    else:
        methods, origin, owners = {}, f"carried by {source}", {}
        for method, program in named.items():
            for name, value in (carried(program) or {}).items():
                if name in methods and methods[name] != value:
                    raise UsageError(
                        f"the programs carry the constant method {name} with different values ({owners[name]}: "
                        f"{methods[name]!r}, {method}: {value!r}): export the methods from one model, or give the "
                        "values with --constant-methods"
                    )
                methods[name], owners[name] = value, method
    if methods:
        shown = ", ".join(f"{name}={_short(value)}" for name, value in methods.items())
        print(f"constant methods ({origin}): {shown}")
    if {"prefill", "decode"} <= set(named) and not set(REQUIRED_METHODS) <= set(methods):
        missing = ", ".join(n for n in REQUIRED_METHODS if n not in methods)
        print(
            f"note: no LLM constant methods ({missing}): `et-tensorrt generate` refuses such a program; give "
            "them with --constant-methods (et_tensorrt.llm.llm_methods says which), or export with "
            "et_tensorrt.llm.export_causal_lm, whose .pt2 files carry them",
            file=sys.stderr,
        )
    return methods or None


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."
