"""Testing et_tensorrt: one fluent :class:`Tester` on ExecuTorch's backend test harness, used by the tests and
by conformance (the backend suite's flow); blob checks and a test-only partitioner for the backend tests.

    Tester(model, (x,)).lower(min_block_size=1).check_partitions(1).run_both().check_parity()

Importing :mod:`.tester` imports ExecuTorch's ``exir`` and the harness; this package itself imports nothing.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "Tester": ".tester",
    "run_executorch": ".tester",
    "eager": ".tester",
    "check_blob": ".blob_checks",
    "lowered_blobs": ".blob_checks",
    "run_program": ".blob_checks",
    "SplitPartitioner": ".split_partitioner",
}

__all__ = list(_LAZY)


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'et_tensorrt.testing' has no attribute {name!r}")
