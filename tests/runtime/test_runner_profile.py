"""Runner(..., profile=True): the delegates' phase events per call, as a table and as an ETDump that
executorch.devtools.Inspector reads; the same table from ExecuTorch's own runtime's ETDump (issue 52 item 4)."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt.errors import OptionError, RunnerError
from et_tensorrt.runtime.profiling import ProfileTable

PHASES = ["init", "input copies", "pytorch fallback", "output copies"]  # no GPU here: the PyTorch fallback runs


def _copied(plans, side: str) -> int:
    return sum(e.bytes for p in plans for e in getattr(p, side))


def test_three_calls_give_one_row_per_phase_with_calls_and_bytes(mlp_tester):
    runner = et_tensorrt.Runner(mlp_tester.pte, profile=True)
    for _ in range(3):
        runner.run([torch.randn(2, 8)])
    table = runner.profile_table()
    assert table.names == PHASES
    assert table.row("init").calls == 1
    for name in PHASES[1:]:
        row = table.row(name)
        assert row.calls == 3 and 0 < row.median_us <= row.total_us
    # the same calls, the same plans: the bytes the phases logged are the bytes the plans say were copied
    assert table.row("output copies").bytes == 3 * _copied(runner.last_plans, "outputs")
    assert table.row("input copies").bytes == 3 * _copied(runner.last_plans, "inputs")
    assert table.row("pytorch fallback").bytes is None


def test_the_profile_goes_on_across_reset_and_starts_over_after_each_etdump(mlp_tester, tmp_path):
    runner = et_tensorrt.Runner(mlp_tester.pte, profile=True)
    runner.run([torch.randn(2, 8)])
    runner.reset()  # the methods load again: a second init, into the same profile
    runner.run([torch.randn(2, 8)])
    assert runner.profile_table().row("init").calls == 2
    assert runner.profile_table().row("input copies").calls == 2
    first = runner.write_etdump(tmp_path / "first.etdump")
    assert first == (tmp_path / "first.etdump").stat().st_size > 0
    assert runner.profile_table().rows == ()
    runner.run([torch.randn(2, 8)])
    assert runner.profile_table().row("output copies").calls == 1
    assert runner.write_etdump(tmp_path / "second.etdump") > 0


def test_without_profile_nothing_is_traced_and_asking_says_so(mlp_tester):
    runner = et_tensorrt.Runner(mlp_tester.pte)
    runner.run([torch.randn(2, 8)])
    with pytest.raises(RunnerError, match="without profile=True"):
        runner.profile_table()
    with pytest.raises(OptionError, match="profile='everything'"):
        et_tensorrt.Runner(mlp_tester.pte, profile="everything")


def test_layers_without_tensorrt_give_the_phases_only(mlp_tester):
    runner = et_tensorrt.Runner(mlp_tester.pte, profile="layers")
    runner.run([torch.randn(2, 8)])
    assert runner.profile_table().names == PHASES


def _inspector_events(path):
    from executorch.devtools import Inspector

    inspector = Inspector(etdump_path=str(path))
    return {e.name: e for block in inspector.event_blocks for e in block.events if e.is_delegated_op}


@pytest.mark.slow  # executorch.devtools imports executorch.exir (~5 s)
def test_runner_etdump_is_read_by_inspector_with_every_call(mlp_tester, tmp_path):
    runner = et_tensorrt.Runner(mlp_tester.pte, profile=True)
    for _ in range(3):
        runner.run([torch.randn(2, 8)])
    table = runner.profile_table()
    runner.write_etdump(tmp_path / "run.etdump")
    events = _inspector_events(tmp_path / "run.etdump")
    assert sorted(events) == sorted(PHASES)
    for name in PHASES[1:]:
        assert len(events[name].perf_data.raw) == 3
    assert (
        events["output copies"].raw_delegate_debug_metadatas
        == [f"bytes={table.row('output copies').bytes // 3}".encode()] * 3
    )
    # the file gives the table the Runner gave
    from_file = ProfileTable.from_etdump(str(tmp_path / "run.etdump"))
    assert [(r.name, r.calls, r.bytes) for r in from_file.rows] == [(r.name, r.calls, r.bytes) for r in table.rows]


@pytest.mark.slow  # executorch.devtools imports executorch.exir (~5 s)
def test_executorch_runtime_etdump_gives_the_same_table(mlp_tester, tmp_path):
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(mlp_tester.pte, enable_etdump=True)
    method = program.load_method("forward")
    for _ in range(3):
        method.execute([torch.randn(2, 8)])
    program.write_etdump_result_to_file(str(tmp_path / "rt.etdump"), str(tmp_path / "debug.bin"))
    table = ProfileTable.from_etdump(str(tmp_path / "rt.etdump"))
    assert table.names == PHASES
    assert [table.row(n).calls for n in PHASES] == [1, 3, 3, 3]


class _WithLayerTimes:
    """The PyTorch fallback with what a layer-profiled TensorRT executor adds (``take_layer_times``), so the delegate's
    C++ logging of layer events runs here without a GPU; ``native`` None: every call through ``run`` in Python."""

    native = None

    def __init__(self, executor, layers):
        self._executor, self._layers = executor, layers

    def __getattr__(self, name):
        return getattr(self._executor, name)

    def take_layer_times(self):
        return list(self._layers)


def test_layer_times_become_one_event_per_layer_inside_the_executor_event(mlp_tester, monkeypatch):
    from et_tensorrt.runtime import executors

    layers = [("conv1 + relu", 0.5), ("gemm", 0.25)]  # milliseconds, as TensorRT's IProfiler reports them
    real = executors.pytorch_executor
    monkeypatch.setattr(executors, "pytorch_executor", lambda *a: _WithLayerTimes(real(*a), layers))
    runner = et_tensorrt.Runner(mlp_tester.pte, profile=True)
    for _ in range(3):
        runner.run([torch.randn(2, 8)])
    table = runner.profile_table()
    assert table.names == ["init", "input copies", "conv1 + relu", "gemm", "pytorch fallback", "output copies"]
    assert table.row("conv1 + relu").calls == 3 and table.row("gemm").calls == 3
    assert table.row("conv1 + relu").median_us == pytest.approx(500, abs=0.01)
    assert table.row("gemm").median_us == pytest.approx(250, abs=0.01)
    events = runner._profile.events()
    layer, executor = [e for e in events if e[0] == "gemm"][0], [e for e in events if e[0] == "pytorch fallback"][0]
    assert layer[3] == b"layer=2/2"
    assert executor[1] <= layer[1] < layer[2]  # laid out from the run's start, in the executor's event


def test_layer_times_are_not_taken_without_a_tracer(mlp_tester, monkeypatch):
    from et_tensorrt.runtime import executors

    taken = []
    real = executors.pytorch_executor

    class Counting(_WithLayerTimes):
        def take_layer_times(self):
            taken.append(1)
            return []

    monkeypatch.setattr(executors, "pytorch_executor", lambda *a: Counting(real(*a), []))
    et_tensorrt.Runner(mlp_tester.pte).run([torch.randn(2, 8)])
    assert taken == []


def test_a_runner_without_profile_gets_no_layer_profiler_whatever_the_environment(mlp_tester, monkeypatch):
    from et_tensorrt.runtime import executors, layer_profile

    seen = []
    real = executors.pytorch_executor
    monkeypatch.setattr(executors, "pytorch_executor", lambda *a: seen.append(layer_profile.enabled()) or real(*a))
    monkeypatch.setenv(layer_profile.LAYER_PROFILE_ENV, "1")
    et_tensorrt.Runner(mlp_tester.pte).run([torch.randn(2, 8)])
    et_tensorrt.Runner(mlp_tester.pte, profile=True).run([torch.randn(2, 8)])
    assert seen == [False, True]
