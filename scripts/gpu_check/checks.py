"""The GPU-only claims of et_tensorrt, checked on the runtime-only install that device.py builds.

    python checks.py --programs DIR --json OUT [--require-gpu]

DIR holds the bundle's .pte files, programs.json and refs.pt (inputs, eager CPU fp32 outputs, weights).
Only torch, et_tensorrt's runtime and TensorRT-RTX are imported: never executorch.exir (a row checks it).
Each row is PASS, FAIL or SKIP with its detail and data; rows that need a GPU say "skipped: no GPU" where
there is none, unless --require-gpu (the device machine), where a missing GPU is a failure. Exit 0 when no
row failed. The JSON holds every row and a summary.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

import check_models
import torch

ROWS: list[dict] = []
NO_GPU = "skipped: no GPU"
# The refit row on a bundle lowered without a GPU (the only skip besides NO_GPU that --local accepts).
REFIT_NOT_BUNDLED = (
    "no weights='refit' program in the bundle: TensorRT-RTX 1.7.1 builds weight-stripped engines "
    "only with a GPU and the bundle is lowered on a CPU machine (check_models.REFIT_PROGRAMS)"
)
LATENCY_WARMUP, LATENCY_ITERS = 20, 200


class Skip(Exception):
    pass


def row(check: str, result: str, detail: str = "", **data) -> None:
    ROWS.append({"check": check, "result": result, "detail": detail, **({"data": data} if data else {})})
    print(f"  {result:4}  {check}: {detail[:300]}", flush=True)


def run(check: str, fn: Callable[[], object], *needs, gpu: bool = False):
    """``fn()`` returns a detail string or (detail, data dict[, value]); PASS then, FAIL on any exception."""
    if gpu and not State.gpu:
        row(
            check,
            "FAIL" if State.require_gpu else "SKIP",
            "no GPU on a machine that should have one" if State.require_gpu else NO_GPU,
        )
        return None
    if any(n is None for n in needs):
        row(check, "SKIP", "an earlier row it needs did not pass")
        return None
    try:
        value = fn()
    except Skip as e:
        row(check, "SKIP", str(e))
        return None
    except Exception as e:
        where = traceback.format_exc(limit=-1).strip().splitlines()
        row(check, "FAIL", f"{type(e).__name__}: {e}", where=where[-3:] if len(where) >= 3 else where)
        return None
    if isinstance(value, tuple):
        detail, data, *rest = value
        row(check, "PASS", detail, **data)
        return rest[0] if rest else True
    row(check, "PASS", str(value))
    return True


class State:
    gpu = False
    require_gpu = False


class LogCapture(logging.Handler):
    """The et_tensorrt logger's lines (the executor says why it fell back to PyTorch)."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(record.getMessage())


class ExecutorSpy:
    """Records what each executor's ``run`` receives from the C++ delegate (and, when timing, how long it takes).

    The delegate hands ``run`` the tensors the executor reads and writes: the caller's own memory when it
    shares, its staging buffers when it copies. Their addresses show sharing and staging reuse directly.
    """

    def __init__(self):
        self.calls: list[dict] = []
        self.timing = False

    def install(self) -> None:
        from et_tensorrt.runtime import executors

        spy = self
        # The PyTorch executor's C++ interpreter is called without Python: take its Python path to observe it.
        os.environ[executors.INTERPRETER_ENV] = "0"
        for cls in (executors.TensorRTExecutor, executors.PyTorchExecutor):
            original = cls.run

            def run(executor, inputs, outputs, _original=original):
                record = {
                    "executor": executor.kind,
                    "inputs": [(t.data_ptr(), str(t.device)) for t in inputs],
                    "outputs": [None if o is None else o.data_ptr() for o in outputs],
                }
                if spy.timing:
                    torch.cuda.synchronize()
                    t = time.perf_counter()
                result = _original(executor, inputs, outputs)
                if spy.timing:
                    torch.cuda.synchronize()
                    record["seconds"] = time.perf_counter() - t
                spy.calls.append(record)
                return result

            cls.run = run

    def take(self) -> list[dict]:
        calls, self.calls = self.calls, []
        return calls


def max_error(actual: list[torch.Tensor], expected: list[torch.Tensor]) -> float:
    if len(actual) != len(expected):
        raise AssertionError(f"{len(actual)} outputs, expected {len(expected)}")
    worst = 0.0
    for a, e in zip(actual, expected):
        if tuple(a.shape) != tuple(e.shape):
            raise AssertionError(f"output shape {tuple(a.shape)}, expected {tuple(e.shape)}")
        worst = max(worst, (a.detach().float().cpu() - e.float()).abs().max().item())
    return worst


def within(actual: list[torch.Tensor], expected: list[torch.Tensor], tol: dict) -> tuple[bool, float]:
    err = max_error(actual, expected)
    ok = all(
        torch.allclose(a.detach().float().cpu(), e.float(), atol=tol["atol"], rtol=tol["rtol"])
        for a, e in zip(actual, expected)
    )
    return ok, err


def median_seconds(fn: Callable[[], object]) -> float:
    for _ in range(LATENCY_WARMUP):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(LATENCY_ITERS):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def us(seconds: float) -> float:
    return round(seconds * 1e6, 1)


# ------------------------------------------------------------------------------------------ the checks
class Checks:
    def __init__(self, programs_dir: Path):
        self.dir = programs_dir
        self.table = {p["name"]: p for p in json.loads((programs_dir / "programs.json").read_text())}
        self.refs = torch.load(programs_dir / "refs.pt", weights_only=True)
        self.log = LogCapture()
        self.spy = ExecutorSpy()
        self.runners: dict = {}
        self.executor: dict[str, str] = {}  # program -> executor kind its delegate(s) chose
        self.engines: dict[str, bool] = {}  # program -> every engine deserialized
        self.deserialize_messages: dict[str, str] = {}  # program -> TensorRT's log when one did not
        self.et = None

    def device(self) -> str:
        return "cuda:0" if State.gpu else "cpu"

    def inputs(self, name: str, device: str | None = None) -> list[torch.Tensor]:
        return [t.to(device or self.device()) for t in self.refs["programs"][name]["inputs"]]

    def expected(self, name: str) -> list[torch.Tensor]:
        return self.refs["programs"][name]["expected"]

    def tolerance(self, name: str) -> dict:
        # The fp16 tolerance only where TensorRT computed in fp16; the PyTorch fallback runs the fp32 program.
        spec = self.table[name]
        return spec["tolerance"] if self.executor.get(name) == "tensorrt" else spec["fp32_tolerance"]

    def blobs(self, name: str) -> list[bytes]:
        data = (self.dir / self.table[name]["pte"]).read_bytes()
        return [data[d["offset"] : d["offset"] + d["size"]] for d in self.table[name]["delegates"]]

    # -- environment and imports -------------------------------------------------------------------
    def environment(self):
        data = {
            "torch": torch.__version__,
            "torch_cuda": torch.version.cuda,
            "python": sys.version.split()[0],
            "cuda_available": torch.cuda.is_available(),
        }
        if not State.gpu:
            if State.require_gpu:
                raise AssertionError(f"torch {torch.__version__} sees no CUDA device")
            return f"torch {torch.__version__}, no CUDA device ({NO_GPU} for the GPU rows)", data
        p = torch.cuda.get_device_properties(0)
        data.update(
            gpu=p.name,
            capability=f"sm{p.major}{p.minor}",
            gpus=torch.cuda.device_count(),
            memory_gib=round(p.total_memory / 2**30, 1),
        )
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}), {p.name}, sm{p.major}{p.minor}", data

    def import_runtime(self):
        import et_tensorrt
        from et_tensorrt.runtime import runner

        runner.load_kernels()
        logging.getLogger("et_tensorrt").addHandler(self.log)
        logging.getLogger("et_tensorrt").setLevel(logging.INFO)
        self.spy.install()
        self.et = et_tensorrt
        loaded = sorted(m for m in sys.modules if m.startswith("executorch"))
        if any(m.startswith("executorch.exir") for m in loaded):
            raise AssertionError(f"importing the runtime imported executorch.exir: {loaded}")
        return (
            f"et_tensorrt from {Path(et_tensorrt.__file__).parent}; ExecuTorch modules imported: {loaded}",
            {"executorch_modules": loaded, "kernels": runner.KERNELS_LIBRARY},
            et_tensorrt,
        )

    def tensorrt_import(self):
        from et_tensorrt import trt

        mod = trt.module()
        caps = list(mod.ComputeCapability.__members__) if hasattr(mod, "ComputeCapability") else []
        return (
            f"{trt.flavour()} {trt.version()}; build targets it knows: {caps}",
            {"flavour": trt.flavour(), "version": trt.version(), "compute_capabilities": caps},
            mod,
        )

    # -- per program --------------------------------------------------------------------------------
    def blob(self, name: str):
        from et_tensorrt.format import _reader
        from et_tensorrt.format.blob import read_blob

        out = []
        for raw in self.blobs(name):
            parsed = _reader.parse_blob(raw)  # the C++ reader the delegate uses
            blob = read_blob(raw)
            engine = parsed["engine"]
            if blob.engine is None or engine is None or len(engine) == 0:
                raise AssertionError("the blob carries no engine")
            program_bytes = sum(
                len(parsed[k]) for k in ("graph", "weights_section", "program") if parsed[k] is not None
            )
            metadata = parsed["metadata"]
            out.append(
                {
                    "version": parsed["version"],
                    "engine_bytes": len(engine),
                    "program_bytes": program_bytes,
                    "execution_device": blob.execution_device,
                    "metadata": json.loads(bytes(metadata) if metadata is not None else b"{}"),
                }
            )
        engines = ", ".join(f"{b['engine_bytes']} B" for b in out)
        return f"{len(out)} blob(s), format v{out[0]['version']}, engine(s) {engines}", {"blobs": out}

    def deserialize(self, name: str, trt_mod):
        from et_tensorrt import trt

        results = []
        for i, raw in enumerate(self.blobs(name)):
            from et_tensorrt.format.blob import read_blob

            logger = trt.CollectingLogger.create()
            engine = trt_mod.Runtime(logger).deserialize_cuda_engine(read_blob(raw).engine)
            messages = [str(m) for _, m in logger.messages]
            results.append({"delegate": i, "ok": engine is not None, "messages": messages})
        self.engines[name] = all(r["ok"] for r in results)
        if not self.engines[name]:
            why = "; ".join(m for r in results for m in r["messages"]) or "deserialize_cuda_engine returned None"
            self.deserialize_messages[name] = why
            raise AssertionError(f"TensorRT did not deserialize the engine on this GPU: {why}")
        return f"{len(results)} engine(s) deserialized", {"engines": results}

    def runner(self, name: str):
        self.log.lines.clear()
        self.spy.take()
        r = self.et.Runner(str(self.dir / self.table[name]["pte"]))
        outputs = r.run(self.inputs(name))  # the first run loads the method: the delegates choose executors here
        calls = self.spy.take()
        kinds = sorted({c["executor"] for c in calls})
        self.executor[name] = kinds[0] if len(kinds) == 1 else "mixed"
        self.runners[name] = r
        ok, err = within(outputs, self.expected(name), self.tolerance(name))
        reasons = [line for line in self.log.lines if "runs with PyTorch" in line]
        data = {
            "executor": self.executor[name],
            "delegate_calls": len(calls),
            "max_abs_error": err,
            "tolerance": self.tolerance(name),
            "fallback_reasons": reasons,
            "plan": repr(r.last_plan),
        }
        if not ok:
            raise AssertionError(f"max abs error {err:.3g} vs eager fp32 exceeds {self.tolerance(name)}")
        return (
            f"executor {self.executor[name]} ({len(calls)} delegate call(s)); max abs error {err:.3g} within "
            f"{self.tolerance(name)}" + (f"; fallback: {reasons[0]}" if reasons else ""),
            data,
            r,
        )

    def tensorrt_chosen(self, name: str):
        if self.executor.get(name) != "tensorrt":
            reasons = [line for line in self.log.lines if "runs with PyTorch" in line]
            raise AssertionError(f"executor {self.executor.get(name)}: {reasons[0] if reasons else 'no log line'}")
        return "every delegate runs its TensorRT engine"

    # -- placement on a real GPU --------------------------------------------------------------------
    def cuda_input_shared(self, name: str):
        r = self.runners[name]
        x = self.inputs(name, "cuda:0")
        out = [torch.empty_like(e, device="cuda:0") for e in self.expected(name)]
        self.spy.take()
        r.run(x, outputs=out)
        plan, seen = r.last_plan, self.spy.take()[-1]
        entry = plan.inputs[0]
        assert entry.action == "share", f"input 0: {entry.action} ({entry.reason})"
        assert entry.data_ptr == x[0].data_ptr(), f"plan saw {entry.data_ptr:#x}, caller's {x[0].data_ptr():#x}"
        assert seen["inputs"][0][0] == x[0].data_ptr(), f"executor read {seen['inputs'][0][0]:#x}"
        assert entry.bytes == 0, f"input 0 copies {entry.bytes} B"
        return (
            f"input 0 shared: caller, plan and executor all at {x[0].data_ptr():#x}, 0 B copied",
            {"plan": repr(plan)},
        )

    def host_input_staged(self, name: str):
        r = self.runners[name]
        out = [torch.empty_like(e, device="cuda:0") for e in self.expected(name)]
        self.spy.take()
        host_ptrs, plans = [], []
        for _ in range(5):
            x = self.inputs(name, "cpu")  # fresh host memory each call
            host_ptrs.append(x[0].data_ptr())
            result = r.run(x, outputs=out)
            plans.append(r.last_plan)
        seen = self.spy.take()
        staged = [c["inputs"][0] for c in seen]
        entry = plans[-1].inputs[0]
        assert entry.action == "copy h2d", f"input 0: {entry.action}"
        assert entry.bytes == x[0].numel() * x[0].element_size(), f"{entry.bytes} B copied"
        assert all(dev.startswith("cuda") for _, dev in staged), f"executor read {staged}"
        assert len({p for p, _ in staged}) == 1, f"staging addresses changed between calls: {staged}"
        assert staged[0][0] not in host_ptrs, "the executor read the host pointer"
        ok, err = within(result, self.expected(name), self.tolerance(name))
        assert ok, f"max abs error {err:.3g}"
        return (
            f"5 calls, 5 host buffers -> one staging buffer {staged[0][0]:#x} on {staged[0][1]}; "
            f"{entry.bytes} B h2d per call; max abs error {err:.3g}",
            {"staging": staged},
        )

    def output_in_place(self, name: str):
        r = self.runners[name]
        x = self.inputs(name, "cuda:0")
        out = [torch.full_like(e, float("nan"), device="cuda:0") for e in self.expected(name)]
        self.spy.take()
        result = r.run(x, outputs=out)
        torch.cuda.synchronize()
        seen = self.spy.take()[-1]
        assert result[0] is out[0], "the Runner did not return the caller's tensor"
        assert r.outputs_written_in_place[0], "ExecuTorch did not bind the caller's output memory"
        ok, err = within(result, self.expected(name), self.tolerance(name))
        assert ok, f"max abs error {err:.3g}"
        entry = r.last_plan.outputs[0]
        executor = self.executor[name]
        if executor == "tensorrt":
            assert entry.action == "share", f"output 0: {entry.action} ({entry.reason})"
            assert seen["outputs"][0] == out[0].data_ptr(), "TensorRT wrote elsewhere"
            how = "TensorRT wrote into it directly (share)"
        else:
            how = f"the {executor} executor's result was copied into it ({entry.action}: {entry.reason})"
        return f"caller's CUDA tensor returned, {how}; max abs error {err:.3g}", {"plan": repr(r.last_plan)}

    def host_pointer_refused(self):
        from et_tensorrt import _C
        from et_tensorrt.errors import PlacementError

        host = torch.zeros(4, 8)
        device = torch.zeros(4, 8, device="cuda:0")
        pinned = torch.zeros(4, 8).pin_memory()
        residence = {
            k: _C._pointer_residence(t.data_ptr()) for k, t in (("host", host), ("cuda", device), ("pinned", pinned))
        }
        assert residence["host"] == "host" and residence["cuda"] == "cuda:0", residence
        refusals = {}
        for label, t in (("host", host), ("pinned", pinned)):
            lying = _C._relabel(self.et.describe(t), torch.device("cuda", 0))
            try:
                _C._check_argument(lying)
            except PlacementError as e:
                refusals[label] = str(e)
            else:
                raise AssertionError(f"{label} memory labelled cuda:0 was accepted")
        corrected_device, note = _C._check_argument(_C._relabel(self.et.describe(device), torch.device("cpu")))
        assert str(corrected_device) == "cuda:0" and note, (corrected_device, note)
        return (
            f"driver says {residence}; host memory labelled cuda:0 refused ({refusals['host']}); device memory "
            f"labelled cpu taken as cuda:0 ({note.strip()})",
            {"residence": residence, "refusals": refusals},
        )

    def d2h_output(self, name: str):
        r = self.runners[name]
        x = self.inputs(name, "cuda:0")
        result = r.run(x)
        entry = r.last_plan.outputs[0]
        assert entry.action == "copy d2h", f"output 0: {entry.action} ({entry.reason})"
        assert result[0].device.type == "cpu", result[0].device
        ok, err = within(result, self.expected(name), self.tolerance(name))
        assert ok, f"max abs error {err:.3g}"
        return f"output planned on the host: copy d2h, {entry.bytes} B; max abs error {err:.3g}", {}

    # -- stateful decode (issue 24) ---------------------------------------------------------------------
    def decode(self, name: str):
        """DECODE_TOKENS one per call through one fresh Runner, inputs on the execution device: each call
        matches eager, moves only the logits, and updates the caches in place (0 B)."""
        r = self.et.Runner(str(self.dir / self.table[name]["pte"]))
        self.spy.take()
        errors, moved, seconds, tol = [], [], [], self.tolerance(name)
        for position, step in enumerate(self.refs["programs"][name]["steps"]):
            x = [t.to(self.device()) for t in step["inputs"]]
            t = time.perf_counter()
            out = r.run(x)
            if State.gpu:
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - t)
            (plan,) = r.last_plans
            caches = [s for s in plan.states if "cache" in s.name]
            if len(caches) != 2 or any(s.update != "in place" or s.bytes for s in caches):
                raise AssertionError(f"position {position}: caches not updated in place: {plan.states}")
            ok, err = within(out, step["expected"], tol)
            if not ok:
                raise AssertionError(f"position {position}: max abs error {err:.3g} vs eager exceeds {tol}")
            moved.append(plan.bytes_copied)
            errors.append(err)
        kinds = sorted({c["executor"] for c in self.spy.take()})
        err = max(errors)
        if State.gpu and kinds != ["tensorrt"]:
            raise AssertionError(f"executor {kinds}: the KV-cache layer did not run")
        data = {
            "executor": kinds,
            "tokens": len(errors),
            "max_abs_error": err,
            "bytes_copied_per_token": moved,
            "state_placement": repr(plan.states),
            "tokens_per_second_after_first": round((len(seconds) - 1) / sum(seconds[1:]), 1),
        }
        return (
            f"{len(errors)} tokens, executor {'/'.join(kinds)}: max abs error {err:.3g}; caches in place on "
            f"{plan.states[0].device}, {max(moved)} B copied per token (the logits); "
            f"{data['tokens_per_second_after_first']} tokens/s after the first",
            data,
        )

    # -- several methods, one cache and one engine (issue 34) ------------------------------------------
    def methods(self, name: str):
        """The prompt through ``prefill``, then one token a call through ``decode``, one fresh Runner, inputs on the
        execution device: decode reads what prefill wrote (each call matches eager), both methods bind the one
        cache (in place, 0 B; ``methods``), a decode call moves only the logits; the decode step's latency."""
        spec = self.refs["methods"][name]
        # The baseline: decode is lowered with cuda_graph; run without (a method's delegates load on its first call).
        with environment(ET_TENSORRT_CUDA_GRAPH="off"):
            return self._methods(name, spec)

    def _methods(self, name: str, spec: dict):
        r = self.et.Runner(str(self.dir / spec["pte"]))
        self.spy.take()
        errors, moved, decode_seconds = [], [], []
        for i, step in enumerate(spec["steps"]):
            x = [t.to(self.device()) for t in step["inputs"]]
            t = time.perf_counter()
            out = r.run(x, method=step["method"])
            if State.gpu:
                torch.cuda.synchronize()
            if step["method"] == "decode":
                decode_seconds.append(time.perf_counter() - t)
            (plan,) = r.last_plans
            caches = [s for s in plan.states if "cache" in s.name]
            if not caches or any(s.update != "in place" or s.bytes or list(s.methods) != ["decode", "prefill"]
                                 for s in caches):  # fmt: skip
                raise AssertionError(f"call {i} ({step['method']}): the cache is not the methods' one: {plan.states}")
            ok, err = within(out, step["expected"], spec["tolerance"])
            if not ok:
                raise AssertionError(f"call {i} ({step['method']}): max abs error {err:.3g} vs eager")
            errors.append(err)
            moved.append(plan.bytes_copied)
        kinds = sorted({c["executor"] for c in self.spy.take()})
        if State.gpu and kinds != ["tensorrt"]:
            raise AssertionError(f"executor {kinds}: the engine did not run")
        if State.gpu:  # both methods' delegates hold the one engine, deserialized once
            from et_tensorrt.runtime import executors

            held = sorted(executors._engines.holders().values())
            if held != [2]:
                raise AssertionError(f"the methods hold {len(held)} engine(s) ({held} delegates each), not one")
        steady = decode_seconds[1:] or decode_seconds  # the first decode call loads the method
        data = {
            "executor": kinds,
            "calls": len(errors),
            "max_abs_error": max(errors),
            "bytes_copied_per_decode": moved[1:],
            "decode_step_us": round(statistics.median(steady) * 1e6, 1),
            "tokens_per_second": round(len(steady) / sum(steady), 1),
        }
        return (
            f"prefill + {len(errors) - 1} decode calls, executor {'/'.join(kinds)}: max abs error {max(errors):.3g}; "
            f"{max(moved[1:])} B per decode call; decode step {data['decode_step_us']} us "
            f"({data['tokens_per_second']} tokens/s)",
            data,
        )

    def decode_steps(self, runner, spec) -> tuple[float, list]:
        """The bundle's calls through ``runner`` (each within tolerance of eager), then the decode step's median
        latency over LATENCY_ITERS more calls at the last position (the same cache row written again)."""
        plans = []
        for i, step in enumerate(spec["steps"]):
            x = [t.to(self.device()) for t in step["inputs"]]
            out = runner.run(x, method=step["method"])
            ok, err = within(out, step["expected"], spec["tolerance"])
            if not ok:
                raise AssertionError(f"call {i} ({step['method']}): max abs error {err:.3g} vs eager")
            plans.append(runner.last_plans[0])
        last = [t.to(self.device()) for t in spec["steps"][-1]["inputs"]]
        return median_seconds(lambda: runner.run(last, method="decode")), plans

    def methods_graph(self, name: str):
        """The decode method replayed as a CUDA graph (lowered with ``cuda_graph="decode"``): every call still
        matches eager, the decode delegate stages its inputs into fixed buffers (plan: ``copy fixed``) and replays
        one graph; its step latency against the same program run without the graph (ET_TENSORRT_CUDA_GRAPH=off)."""
        from et_tensorrt.runtime import cuda_graph

        spec = self.refs["methods"][name]
        with environment(ET_TENSORRT_CUDA_GRAPH="off"):  # read when each method loads: at its first call
            eager = self.et.Runner(str(self.dir / spec["pte"]))
            without, _ = self.decode_steps(eager, spec)
        del eager
        graphed = self.et.Runner(str(self.dir / spec["pte"]))
        with_graph, plans = self.decode_steps(graphed, spec)
        decode_plan = plans[-1]
        if "replayed as a CUDA graph" not in decode_plan.executor_detail:
            raise AssertionError(f"the decode delegate is not graphed: {decode_plan.executor_detail}")
        if any(p.action not in ("copy fixed", "value") for p in decode_plan.inputs):
            raise AssertionError(f"decode inputs not staged for the graph: {decode_plan!r}")
        held = [g for g in gc.get_objects() if isinstance(g, cuda_graph.GraphedExecutor)]
        states = [g.graph_state for g in held]
        if not any(g.replays for g in held):
            raise AssertionError(f"no graph replayed: {states}")
        data = {
            "executor": decode_plan.executor,
            "decode_step_us_without_graph": us(without),
            "decode_step_us_with_graph": us(with_graph),
            "speedup": round(without / with_graph, 2),
            "graph_state": states,
            "bytes_copied_per_decode": decode_plan.bytes_copied,
        }
        return (
            f"executor {decode_plan.executor}: decode step {data['decode_step_us_without_graph']} us without the "
            f"graph, {data['decode_step_us_with_graph']} us with it ({data['speedup']}x); {states[0]}; "
            f"{decode_plan.bytes_copied} B per decode call (inputs staged, logits copied)",
            data,
        )

    # -- the profile: per-layer engine time (issue 52) ---------------------------------------------------------
    def layer_profile(self, name: str):
        """``Runner(..., profile="layers")``: every call's engine layers, one event each named by the layer (TensorRT's
        IProfiler), beside the delegate's phases, in the table and in the ETDump it writes."""
        calls = 3
        runner = self.et.Runner(str(self.dir / self.table[name]["pte"]), profile="layers")
        for _ in range(calls):
            runner.run(self.inputs(name))
        executors = sorted({p.executor for p in runner.last_plans})
        if executors != ["tensorrt"]:
            raise AssertionError(f"executor {executors}: no engine ran, so no layer was timed")
        table = runner.profile_table()
        phases = {"input copies", "tensorrt", "output copies"}
        layers = [r for r in table.rows if r.name not in phases and not r.name.startswith("init")]
        if not layers or any(r.calls != calls for r in layers):
            raise AssertionError(f"layer rows {[(r.name, r.calls) for r in layers]}: expected each {calls} times")
        with tempfile.TemporaryDirectory() as folder:
            size = runner.write_etdump(Path(folder) / "layers.etdump")
        layer_us, engine_us = sum(r.median_us for r in layers), table.row("tensorrt").median_us
        slowest = sorted(layers, key=lambda r: -r.median_us)[:5]
        data = {
            "layers": len(layers),
            "layers_median_us_sum": round(layer_us, 1),
            "tensorrt_median_us": round(engine_us, 1),
            "slowest": [(r.name, round(r.median_us, 1)) for r in slowest],
            "etdump_bytes": size,
            "table": str(table),
        }
        return (
            f"{len(layers)} layer events per call ({calls} calls), their medians summing to {layer_us:.1f} us of the "
            f"tensorrt event's {engine_us:.1f} us; slowest {slowest[0].name!r} {slowest[0].median_us:.1f} us; "
            f"ETDump {size:,} B",
            data,
        )

    def layer_profile_refused_with_graph(self, name: str):
        """Per-layer profiling and CUDA-graph replay together (decode is lowered with ``cuda_graph``): refused as the
        method loads, naming why."""
        runner = self.et.Runner(str(self.dir / self.refs["methods"][name]["pte"]), profile="layers")
        try:
            runner.load_method("decode")
        except self.et.RunnerError as e:
            if "cannot be combined with CUDA-graph replay" not in str(e):
                raise
            return f"refused: {str(e)[-200:]}"
        raise AssertionError("decode, lowered with cuda_graph, loaded with per-layer profiling on")

    # -- the next token chosen in the engine (issue 46) --------------------------------------------------------
    def _next_token_loop(self, runner, spec: dict, on_device: bool) -> tuple[list[int], list[float], list[int]]:
        """The prompt, then the decode steps of ``spec``, greedy, each token read by the host (8 bytes) to see it:
        ``on_device``, the token the program chose, left where it wrote it and fed to the next call as it is
        (et_tensorrt.llm.runner.token_loop, MethodsDriver's loop); else the logits handed to the host, which picks the
        token and hands it back. (tokens, seconds per decode step, bytes each decode call copied)."""
        from et_tensorrt.llm.runner.token_loop import Signature, TokenLoop
        from et_tensorrt.llm.sampling import Sampling

        head = Sampling(logits=True)
        loop = TokenLoop(runner, Signature(start_only=True, head=head), head)
        prompt, steps = spec["prompt"], len(spec["expected"]) - 1
        position = len(prompt)

        def host_step(tokens, start, method):
            logits = runner.run([tokens, torch.tensor([start])], method=method)[1]
            return logits.reshape(-1, logits.shape[-1])[-1].argmax().reshape(1, 1)  # the host's argmax

        if on_device:
            token = loop.first(prompt, 0)
        else:
            token = host_step(torch.tensor([prompt]), 0, "prefill")
        tokens, seconds, copied = [int(token)], [], []
        for _ in range(steps):
            began = time.perf_counter()
            token = loop.next(token, position) if on_device else host_step(token, position, "decode")
            tokens.append(int(token))  # the host reads the token: to stream its text and see the end
            seconds.append(time.perf_counter() - began)
            copied.append(runner.last_plan.bytes_copied)
            position += 1
        return tokens, seconds, copied

    def next_token(self):
        """The token chosen in the engine, each decode call's token fed to the next as it is (on a GPU it stays in
        the device buffer the program wrote it into): eager's greedy tokens; the bytes a decode call copies."""
        spec = self.refs["next_token"]
        runner = self.et.Runner(str(self.dir / spec["pte"]))
        tokens, _, copied = self._next_token_loop(runner, spec, on_device=True)
        if tokens != spec["expected"]:
            raise AssertionError(f"tokens {tokens} != eager greedy {spec['expected']}")
        detail = runner.last_plan.execution_device
        data = {"tokens": len(tokens), "bytes_copied_per_decode": copied, "executor_device": str(detail)}
        return f"{len(tokens)} tokens = eager greedy on {detail}; {max(copied)} B copied per decode call", data

    def next_token_speed(self):
        """Decode tokens/s of one program (it returns the token and the logits) two ways on this GPU: the token
        chosen in the engine and left on the device, the host reading its 8 bytes; the logits copied to the host,
        which picks the token and hands it back. Both give eager's greedy tokens; decode is a CUDA graph."""
        spec = self.refs["next_token"]
        results = {}
        for on_device in (False, True, False, True):  # alternated: neither way gets the warmer GPU
            runner = self.et.Runner(str(self.dir / spec["pte"]))
            tokens, seconds, copied = self._next_token_loop(runner, spec, on_device)
            if tokens != spec["expected"]:
                raise AssertionError(f"on_device={on_device}: tokens {tokens} != eager greedy {spec['expected']}")
            steady = seconds[2:]  # the first decode calls load the method and capture its graph
            results.setdefault(on_device, []).append((len(steady) / sum(steady), statistics.median(copied)))
            del runner
        host, device = (max(results[k]) for k in (False, True))
        data = {
            "tokens_per_s_logits_to_host": round(host[0], 1),
            "tokens_per_s_token_on_device": round(device[0], 1),
            "speedup": round(device[0] / host[0], 2),
            "bytes_copied_per_decode_logits_to_host": host[1],
            "bytes_copied_per_decode_token_on_device": device[1],
        }
        return (
            f"decode {data['tokens_per_s_token_on_device']} tokens/s with the token chosen on the device "
            f"({device[1]:.0f} B copied a call) vs {data['tokens_per_s_logits_to_host']} with the logits to the host "
            f"({host[1]:.0f} B): {data['speedup']}x; the same tokens as eager greedy",
            data,
        )

    def runtime_cache(self, name: str):
        """TensorRT-RTX's runtime cache kept on disk: a first load compiles the kernels and saves them (a
        ``.rtcache`` file per engine in the engine cache), a second load starts from that file; the first decode
        call's latency of each."""
        from et_tensorrt.runtime import executors

        spec = self.refs["methods"][name]
        with tempfile.TemporaryDirectory() as folder, environment(ET_TENSORRT_CACHE_DIR=folder):
            firsts, loaded = [], []
            for _ in range(2):
                runner = self.et.Runner(str(self.dir / spec["pte"]))
                step = spec["steps"][0]
                t = time.perf_counter()
                runner.run([x.to(self.device()) for x in step["inputs"]], method=step["method"])
                torch.cuda.synchronize()
                firsts.append(time.perf_counter() - t)
                held = [e for e in gc.get_objects() if isinstance(e, executors.TensorRTExecutor)]
                if not held:
                    raise Skip(f"no TensorRT executor ran here ({runner.last_plans[0].executor_reason})")
                caches = [  # this program's: the contexts made with this folder's files
                    e.runtime_cache
                    for e in held
                    if e.runtime_cache is not None and Path(folder) in e.runtime_cache.path.parents
                ]
                if not caches:
                    raise Skip("the engine has no runtime cache (full TensorRT: its engines carry their kernels)")
                loaded.append(max(c.loaded_bytes for c in caches))
                del runner, held, caches
                gc.collect()
            files = sorted(p.stat().st_size for p in (Path(folder) / "runtime").glob("*.rtcache"))
        if not files or loaded[1] == 0:
            raise AssertionError(f"the second load did not start from a saved runtime cache (files {files})")
        data = {"first_call_ms": [round(t * 1e3, 2) for t in firsts], "files_bytes": files, "loaded_bytes": loaded}
        return (
            f"first call {data['first_call_ms'][0]} ms with an empty runtime cache, {data['first_call_ms'][1]} ms "
            f"from the saved one ({len(files)} file(s), {sum(files)} B)",
            data,
        )

    def roofline(self, name: str):
        """A Llama-3.2-1B-shaped decoder's decode step (bundle.lower_roofline: random periodic weights, its .ptd
        gzipped to travel): the first tokens' logits against the bundle's eager bf16 ones, then ROOFLINE_STEPS decode
        calls timed, tokens/s against what this GPU's memory bandwidth allows for the bytes a step reads."""
        import gzip
        import shutil

        spec = self.refs["roofline"][name]
        ptd = self.dir / spec["ptd_gz"].removesuffix(".gz")
        t = time.perf_counter()
        if not ptd.exists():
            with gzip.open(self.dir / spec["ptd_gz"], "rb") as src, open(ptd, "wb") as dst:
                shutil.copyfileobj(src, dst, 64 * 2**20)
        unpacked = time.perf_counter() - t
        t = time.perf_counter()
        runner = self.et.Runner(str(self.dir / spec["pte"]), data_path=str(ptd))
        loaded = time.perf_counter() - t
        device = self.device()
        similarity = []
        for position, (token, expected) in enumerate(zip(check_models.ROOFLINE_CHECKED, spec["expected"])):
            inputs = [torch.tensor([[token]], device=device), torch.tensor([position], device=device)]
            logits = runner.run(inputs)[0].float().flatten().cpu()
            similarity.append(float(torch.nn.functional.cosine_similarity(logits, expected.flatten(), dim=0)))
        # bf16 through 16 layers on another device differs from the CPU's in the last bits, not in direction
        if min(similarity) < 0.99:
            raise AssertionError(f"logits of the first tokens off the bundle's eager bf16 (cosine {similarity})")
        plan = runner.last_plans[0]
        token = torch.tensor([[7]], device=device)
        positions = [torch.tensor([p], device=device) for p in range(len(similarity), check_models.ROOFLINE_CONTEXT)]
        steps = min(check_models.ROOFLINE_STEPS, len(positions))
        runner.run([token, positions[0]])  # a graph is captured on the second call of a signature
        torch.cuda.synchronize()
        t = time.perf_counter()
        for position in positions[1 : steps + 1]:
            runner.run([token, position])
        torch.cuda.synchronize()
        tokens_per_second = steps / (time.perf_counter() - t)
        gpu = torch.cuda.get_device_name()
        bandwidth = check_models.bandwidth(gpu)
        roof = bandwidth / spec["bytes_per_token"] if bandwidth else None
        data = {
            "shape": spec["shape"],
            "weights": spec["weights"],
            "executor": plan.executor,
            "executor_detail": plan.executor_detail,
            "executor_reason": plan.executor_reason,
            "tokens_per_second": round(tokens_per_second, 1),
            "roofline_tokens_per_second": round(roof, 1) if roof else None,
            "share_of_roofline": round(tokens_per_second / roof, 3) if roof else None,
            "bytes_per_token": spec["bytes_per_token"],
            "cosine_first_tokens": similarity,
            "ptd_bytes": spec["ptd_bytes"],
            "unpack_s": round(unpacked, 1),
            "load_s": round(loaded, 2),
            "bytes_copied_per_step": plan.bytes_copied,
        }
        against = f"{roof:.0f} tokens/s roofline on {gpu}" if roof else f"no bandwidth known for {gpu}"
        return (
            f"{spec['shape']} {spec['weights']}, executor {plan.executor}: {tokens_per_second:.1f} tokens/s against "
            f"{against}" + (f" ({tokens_per_second / roof:.0%})" if roof else ""),
            data,
        )

    # -- quantized engines (issue 28) -------------------------------------------------------------------
    def quantized_engine(self, name: str):
        """An int4 weight-only engine: its METADATA says int4 weights (legalize_quant), TensorRT deserialized it on
        this GPU and ran it (its parity with the quantized eager model was the "runs, matches eager" row);
        otherwise TensorRT's own reason, verbatim."""
        from et_tensorrt.format.blob import read_blob

        (raw,) = self.blobs(name)
        blob = read_blob(raw)
        meta = blob.metadata
        quantization = meta.get("quantization") or {}
        if "int4" not in (quantization.get("weights") or {}):
            raise AssertionError(f"the engine holds no int4 weights: METADATA quantization {quantization}")
        if not self.engines.get(name):
            why = self.deserialize_messages.get(name) or "its deserialize row did not run"
            raise AssertionError(f"TensorRT did not deserialize the int4 engine on this GPU: {why}")
        if self.executor.get(name) != "tensorrt":
            reasons = [line for line in self.log.lines if "runs with PyTorch" in line]
            raise AssertionError(f"executor {self.executor.get(name)}: {reasons[0] if reasons else 'no log line'}")
        data = {"quantization": quantization, "precision": meta.get("precision"), "engine_bytes": len(blob.engine)}
        return (
            f"TensorRT ran the int4 weight-only engine ({quantization['weights']['int4']} int4 weight(s), "
            f"{meta.get('precision')} activations, engine {data['engine_bytes']} B)",
            data,
        )

    # -- speed --------------------------------------------------------------------------------------
    def latency(self, name: str, trt_mod):
        spec = self.table[name]
        r = self.runners[name]
        x = self.inputs(name, "cuda:0")
        out = [torch.empty_like(e, device="cuda:0") for e in self.expected(name)]
        model = check_models.build_model(spec["model"], self.refs["models"][spec["model"]]).cuda()
        eager_x = x
        if spec["precision"] == "fp16":
            model, eager_x = model.half(), [t.half() for t in x]
        with torch.no_grad():
            eager = median_seconds(lambda: model(*eager_x))
        runner = median_seconds(lambda: r.run(x, outputs=out))
        # The delegate's own share: the same calls, with the executor timed inside (synchronized around it).
        self.spy.take()
        self.spy.timing = True
        try:
            runner_timed = []
            for _ in range(LATENCY_ITERS):
                t = time.perf_counter()
                r.run(x, outputs=out)
                torch.cuda.synchronize()
                runner_timed.append(time.perf_counter() - t)
        finally:
            self.spy.timing = False
        executor_times = [sum(c["seconds"] for c in calls) for calls in _group(self.spy.take(), len(spec["delegates"]))]
        overhead = [total - own for total, own in zip(runner_timed, executor_times)]
        data = {
            "executor": self.executor[name],
            "eager_cuda_us": us(eager),
            "runner_us": us(runner),
            "executor_us": us(statistics.median(executor_times)),
            "delegate_overhead_us": us(statistics.median(overhead)),
            "overhead_share": round(statistics.median(o / t for o, t in zip(overhead, runner_timed)), 3),
            "iterations": LATENCY_ITERS,
            "eager_precision": spec["precision"],
        }
        if self.executor[name] == "tensorrt" and trt_mod is not None and len(spec["delegates"]) == 1:
            data["tensorrt_alone_us"] = us(self.tensorrt_alone(name, trt_mod, x, out))
        return (
            f"{self.executor[name]}: runner {data['runner_us']} us vs eager CUDA {data['eager_cuda_us']} us; executor "
            f"{data['executor_us']} us, delegate overhead {data['delegate_overhead_us']} us "
            f"({data['overhead_share']:.0%})",
            data,
        )

    def tensorrt_alone(self, name: str, trt_mod, x, out) -> float:
        """The engine with nothing of ours around it: bind, enqueue on torch's stream."""
        from et_tensorrt import trt
        from et_tensorrt.format.blob import read_blob

        blob = read_blob(self.blobs(name)[0])
        engine = trt_mod.Runtime(trt.CollectingLogger.create()).deserialize_cuda_engine(blob.engine)
        context = engine.create_execution_context()
        for entry, t in zip(blob.inputs, x):
            context.set_input_shape(entry.name, tuple(t.shape))
            context.set_tensor_address(entry.name, t.data_ptr())
        for entry, t in zip(blob.outputs, out):
            context.set_tensor_address(entry.name, t.data_ptr())
        stream = torch.cuda.current_stream()
        return median_seconds(lambda: context.execute_async_v3(stream.cuda_stream))

    # -- engines built on the device (issue 25) ------------------------------------------------------
    def aot_targets(self, name: str):
        """The blob's RECIPE predicts whether its ahead-of-time (TensorRT-RTX) engine runs on this GPU, and the
        "engine deserializes" row found out: they must agree (on SM90 both say no)."""
        from et_tensorrt.format.blob import read_blob
        from et_tensorrt.runtime import device_build

        gpu = device_build.this_gpu(torch.device("cuda", 0))
        predictions = [device_build.aot_fit(read_blob(raw), gpu) for raw in self.blobs(name)]
        deserialized = self.engines.get(name)
        fits = not any(predictions)
        if deserialized is not None and deserialized != fits:
            raise AssertionError(f"predicted {'runs' if fits else predictions}, but deserialized={deserialized}")
        what = "runs here" if fits else f"refused as predicted: {predictions[0]}"
        return f"{gpu.name} ({gpu.sm}): the ahead-of-time engine {what}", {"gpu": gpu.sm, "predictions": predictions}

    def device_build(self, name: str):
        """Where the ahead-of-time engine does not run: a fresh Runner builds the engine for this GPU from the
        blob's RECIPE with the TensorRT builder that travelled (TensorRT-RTX; no standard TensorRT wheel can be
        carried), runs it against eager, and a second Runner takes it from the engine cache. Or says why not."""
        import tempfile

        from et_tensorrt.format.blob import read_blob
        from et_tensorrt.runtime import device_build

        gpu = device_build.this_gpu(torch.device("cuda", 0))
        blob = read_blob(self.blobs(name)[0])
        if not device_build.aot_fit(blob, gpu):
            raise Skip(f"the ahead-of-time engine runs on this GPU ({gpu.sm}): nothing to build")
        picked = device_build.pick_builder(gpu, "tensorrt_rtx")
        if isinstance(picked, str):
            raise Skip(f"no engine could be built on this machine: {picked}")
        with tempfile.TemporaryDirectory() as cache:
            os.environ["ET_TENSORRT_CACHE_DIR"] = cache
            origins, errors = [], []
            for _ in range(2):  # built, then from the engine cache
                r = self.et.Runner(str(self.dir / self.table[name]["pte"]), prepare="auto")
                outputs = r.run(self.inputs(name, "cuda:0"))
                (plan,) = r.last_plans
                if plan.executor != "tensorrt":
                    raise AssertionError(f"executor {plan.executor}: {plan.executor_reason}")
                ok, err = within(outputs, self.expected(name), self.table[name]["tolerance"])
                if not ok:
                    raise AssertionError(f"max abs error {err:.3g} vs eager ({plan.engine_origin})")
                origins.append(plan.engine_origin)
                errors.append(err)
        if not origins[0].startswith("built here") or not origins[1].startswith("from the engine cache"):
            raise AssertionError(f"engine origins {origins}")
        return f"executor tensorrt ({origins[0]}); max abs error {max(errors):.3g}; then {origins[1]}", {
            "origins": origins,
            "max_abs_error": errors,
        }

    # -- weights modes (issue 17) ---------------------------------------------------------------------
    def refit(self, name: str, both: str):
        """A weights="refit" program ran its engine, refitted at init from the embedded weights through the
        REFIT_MAP (its parity with eager was the "runs, matches eager" row), and its engine is smaller than the
        same model's weights="both" engine."""
        if self.executor.get(name) != "tensorrt":
            reasons = [line for line in self.log.lines if "runs with PyTorch" in line]
            raise AssertionError(f"executor {self.executor.get(name)}: {reasons[0] if reasons else 'no log line'}")
        from et_tensorrt.format.blob import read_blob

        stripped = [read_blob(raw) for raw in self.blobs(name)]
        full = [read_blob(raw) for raw in self.blobs(both)]
        if any(b.refit_map is None for b in stripped):
            raise AssertionError("the refit program's blob carries no REFIT_MAP")
        sizes = [(len(s.engine), len(f.engine)) for s, f in zip(stripped, full)]
        if any(s >= f for s, f in sizes):
            raise AssertionError(f"stripped engine not smaller than the full one: {sizes}")
        return (
            f"refitted engine ran (parity above); engine bytes stripped/full {sizes}",
            {"engine_bytes": sizes, "refit_entries": [len(b.refit_entries) for b in stripped]},
        )

    def refit_not_bundled(self):
        raise Skip(REFIT_NOT_BUNDLED)

    def no_exir(self):
        loaded = sorted(m for m in sys.modules if m.startswith("executorch"))
        if any(m.startswith("executorch.exir") for m in loaded):
            raise AssertionError(f"executorch.exir was imported during the checks: {loaded}")
        return f"after every check, ExecuTorch modules imported: {loaded}"


@contextlib.contextmanager
def environment(**values: str):
    """Environment variables set for the block (read by the delegate when it loads)."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _group(calls: list[dict], per_run: int) -> list[list[dict]]:
    return [calls[i : i + per_run] for i in range(0, len(calls), per_run)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--programs", type=Path, required=True)
    ap.add_argument("--json", type=Path, required=True)
    ap.add_argument("--require-gpu", action="store_true")
    args = ap.parse_args()
    State.gpu = torch.cuda.is_available()
    State.require_gpu = args.require_gpu
    if State.gpu:
        torch.cuda.init()  # loads the driver before any delegate call (its pointer check needs it)
    t0 = time.perf_counter()
    c = Checks(args.programs)
    print(f"gpu_check: {len(c.table)} programs from {args.programs}", flush=True)

    run("environment", c.environment)
    et = run("import et_tensorrt's runtime without executorch.exir", c.import_runtime)
    trt_mod = run("TensorRT runtime imports", c.tensorrt_import, et, gpu=True)
    for name in c.table:
        run(f"{name}: blob carries an engine", lambda n=name: c.blob(n), et)
        run(f"{name}: engine deserializes", lambda n=name: c.deserialize(n, trt_mod), trt_mod, gpu=True)
        r = run(f"{name}: runs, matches eager", lambda n=name: c.runner(n), et)
        run(f"{name}: TensorRT executor chosen", lambda n=name: c.tensorrt_chosen(n), r, gpu=True)
    first = "mlp_fp32"
    # issue 25: on a GPU outside TensorRT-RTX's targets (the H200 is SM90) the blob's engine is refused, as its
    # RECIPE predicts; then the engine is built on the device for this GPU, or the row says why none could be.
    run(
        f"{first}: ahead-of-time engine against this GPU (predicted = deserialized)",
        lambda: c.aot_targets(first),
        et,
        gpu=True,
    )
    run(f"{first}: engine built on the device and run (issue 25)", lambda: c.device_build(first), et, gpu=True)
    have = c.runners.get(first)
    run(f"{first}: CUDA input shared (pointer equality, 0 B)", lambda: c.cuda_input_shared(first), have, gpu=True)
    run(f"{first}: host input staged into one reused buffer", lambda: c.host_input_staged(first), have, gpu=True)
    run(f"{first}: caller-owned CUDA output written in place", lambda: c.output_in_place(first), have, gpu=True)
    run("host pointer labelled cuda refused (driver cross-check)", c.host_pointer_refused, et, gpu=True)
    run(f"{first}: per-layer engine time in the profile (issue 52)", lambda: c.layer_profile(first), have, gpu=True)
    planned = "mlp_fp32_planned"
    run(f"{planned}: device -> host output", lambda: c.d2h_output(planned), c.runners.get(planned), gpu=True)
    for name in (n for n, spec in c.table.items() if (spec.get("quantize") or "").startswith("int4")):
        run(f"{name}: int4 weight-only GEMM engine ran (issue 28)", lambda n=name: c.quantized_engine(n), et, gpu=True)
    for name in ("mlp_fp32", "mlp_fp16", "convnet_fp32", "mlp_int4_weight_only"):
        run(
            f"{name}: latency vs eager CUDA, delegate overhead",
            lambda n=name: c.latency(n, trt_mod),
            c.runners.get(name),
            gpu=True,
        )
    # weights="refit" programs and their weights="both" twins, when the bundle carries them (check_models.py says
    # why it does not today).
    refit_pairs = (("mlp_fp32_refit", "mlp_fp32"), ("convnet_fp32_refit", "convnet_fp32"))
    refit_programs = [(n, b) for n, b in refit_pairs if n in c.table]
    if not refit_programs:
        run("refit of weight-stripped engines (issue 17)", c.refit_not_bundled, et)
    for name, both in refit_programs:
        run(
            f"{name}: weight-stripped engine refitted and run (issue 17)",
            lambda n=name, b=both: c.refit(n, b),
            c.runners.get(name),
            gpu=True,
        )
    for name in (n for n, spec in c.table.items() if spec.get("decode")):
        run(f"{name}: decodes token by token, KV cache in place (issue 24)", lambda n=name: c.decode(n), et)
    for name in c.refs.get("methods", {}):
        run(
            f"{name}: decode reads what prefill wrote, one cache and one engine (issue 34)",
            lambda n=name: c.methods(n),
            et,
        )
        run(f"{name}: decode step as a CUDA graph, with vs without (issue 34)", lambda n=name: c.methods_graph(n), et,
            gpu=True)  # fmt: skip
        run(f"{name}: TensorRT-RTX runtime cache saved and reused (issue 34)", lambda n=name: c.runtime_cache(n), et,
            gpu=True)  # fmt: skip
        run(f"{name}: per-layer profiling refused with the CUDA graph (issue 52)",
            lambda n=name: c.layer_profile_refused_with_graph(n), et, gpu=True)  # fmt: skip
    if "next_token" in c.refs:
        run("next token chosen in the engine, fed back: eager greedy (issue 46)", c.next_token, et)
        run(
            "next token: decode tokens/s, token on the device vs logits to the host, same program (issue 46)",
            c.next_token_speed,
            et,
            gpu=True,
        )
    for name, spec in c.refs.get("roofline", {}).items():
        run(
            f"{name}: {spec['shape']}-shaped decode, tokens/s against the bandwidth roofline (issue 34)",
            lambda n=name: c.roofline(n),
            et,
            gpu=True,
        )
    run("no executorch.exir imported", c.no_exir, et)

    summary = {
        k: sum(1 for r_ in ROWS if r_["result"] == v)
        for k, v in (("passed", "PASS"), ("failed", "FAIL"), ("skipped", "SKIP"))
    }
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    args.json.write_text(json.dumps({"summary": summary, "gpu": State.gpu, "rows": ROWS}, indent=1, default=str))
    print(
        f"\ngpu_check: {summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped "
        f"in {summary['seconds']} s",
        flush=True,
    )
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
