"""Loads and resets hold no memory once they are gone (issue 45): what torch keeps of every partition program the
PyTorch executor loads (fx's generated source and its linecache entry, the deserializer's ShapeEnv with its
fake-tensor cache) is dropped again (et_tensorrt/runtime/load_residue.py). A few loads of a dynamic-batch program
(its sizes are symbolic, so its ShapeEnv is used); scripts/leak_check.py measures 10,000 resets and 1,000 loads."""

from __future__ import annotations

import gc
import linecache
import tracemalloc

import pytest
import torch
from torch.fx import graph_module
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from et_tensorrt import Runner

WARM, LOADS = 12, 20
KEPT_SHAPE_ENVS = 12
RESETS = 150


def held() -> dict[str, int]:
    """What the process keeps of fx loads: generated sources, their linecache entries, live ShapeEnvs."""
    gc.collect()
    return {
        "fx sources": len(graph_module._loader.eval_cache),
        "linecache entries": sum(key.startswith("<eval_with_key>") for key in linecache.cache),
        "ShapeEnvs": sum(type(o) is ShapeEnv for o in gc.get_objects()),
    }


@pytest.fixture
def program(dynamic_tester):
    return dynamic_tester.pte, torch.randn(4, 8)


@pytest.mark.parametrize("how", ["reset", "load"])
def test_each_load_keeps_nothing(program, how):
    pte, x = program
    runner = Runner(pte)

    def load():
        nonlocal runner
        if how == "reset":
            runner.reset()
        else:
            runner = Runner(pte)
        runner.run([x])

    # Traced from before the warm-up: what torch keeps of the last few loads (a bounded cache, about ten ShapeEnvs
    # held from C++) is then allocated before the first measure, and only growth per load is left between the two.
    tracemalloc.start(1)
    try:
        for _ in range(WARM):
            load()
        before, start = held(), tracemalloc.get_traced_memory()[0]
        for _ in range(LOADS):
            load()
        after, grown = held(), tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    assert after["fx sources"] == before["fx sources"], (before, after)
    assert after["linecache entries"] == before["linecache entries"], (before, after)
    # Before the fix every load's ShapeEnv stayed (one per load, 20 here); torch's C++ keeps a few (0-10) for a while.
    # Counted over the process: a worker that lowered models before holds their ShapeEnvs; only growth is this test's.
    assert after["ShapeEnvs"] - before["ShapeEnvs"] <= KEPT_SHAPE_ENVS, (before, after)
    # Before the fix: 14-15 KiB per load of this one-op program, 200-470 KiB for a Llama; after: 0.4-1.2 KiB, of which
    # CPython's part is about 140 bytes (it keeps every file name compile() was given, two per load).
    assert grown / LOADS < 4096, f"{grown / LOADS:.0f} bytes kept per {how}"


def test_closing_drops_the_source_kept_for_tracebacks(program):
    pte, x = program
    before = held()
    runner = Runner(pte)
    runner.run([x])
    assert held()["fx sources"] == before["fx sources"] + 1  # the running module's own, for tracebacks
    runner.close()
    after = held()
    assert (after["fx sources"], after["linecache entries"]) == (before["fx sources"], before["linecache entries"])


def test_resets_leave_no_cycles_for_the_collector(program):
    """What each reset leaves of the old methods' programs (fx GraphModules with their generated classes, graphs and
    fake-tensor metadata: reference cycles) is freed by the reset itself, not left for a full collection while later
    loads fill fresh pymalloc arenas around it (10,000 resets grew RSS by 6.3 MB, issue 45)."""
    pte, x = program
    runner = Runner(pte)
    runner.run([x])
    gc.collect()
    # The collector's own passes off: what the worker's heap holds from earlier tests sets when Python runs a full
    # collection by itself (seen: none in 150 resets after the suite's large models), and only reset's passes count.
    gc.disable()
    try:
        for _ in range(RESETS):
            runner.reset()
            runner.run([x])
    finally:
        gc.enable()
    left = gc.collect()  # what waited for a full collection: the garbage of up to RESETS loads
    # Before: 10,500 objects after 150 resets of this program (the loads the collector had promoted, with their
    # fake tensors and ShapeEnvs), growing with the resets; after: about 300 (the last load's own), for any number.
    assert left < 1500, f"{left} objects of earlier loads left for a full collection after {RESETS} resets"
