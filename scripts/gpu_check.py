"""GPU checks for et_tensorrt, run by scripts/gpu_check.sh after the wheels and the build.

Prints one table: check | result | detail. Every check runs on its own (a failure or a missing package
skips only the checks that depend on it). Results: PASS, FAIL, SKIP (with why). Exit 0 when nothing
FAILed, 1 otherwise. Writes the rows as JSON with --json.

    python scripts/gpu_check.py [--json out.json] [--build "ok"] [--cpu-smoke]
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
import time
import traceback

ROWS: list[tuple[str, str, str]] = []


def row(check: str, result: str, detail: str = "") -> None:
    ROWS.append((check, result, detail.replace("\n", " | ")[:300]))
    print(f"  {result:4}  {check}: {detail[:200]}", flush=True)


class Skip(Exception):
    pass


def run(check: str, fn, *needs) -> object:
    """Run ``fn()``; PASS when it returns (its value is the detail), FAIL on AssertionError/exception."""
    missing = [n for n in needs if n is None]
    if missing:
        row(check, "SKIP", "an earlier step it needs did not succeed")
        return None
    try:
        value = fn()
    except Skip as e:
        row(check, "SKIP", str(e))
        return None
    except AssertionError as e:
        row(check, "FAIL", f"assertion: {e}")
        return None
    except Exception as e:  # report and go on
        row(check, "FAIL", f"{type(e).__name__}: {e} @ {traceback.format_exc(limit=-1).strip().splitlines()[-2]}")
        return None
    detail, result = value if isinstance(value, tuple) else (str(value), value)
    row(check, "PASS", detail)
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--build", default="unknown")
    ap.add_argument("--cpu-smoke", action="store_true",
                    help="no GPU: run the checks anyway to exercise this script (the CUDA ones then FAIL)")
    args = ap.parse_args()
    t0 = time.time()

    import torch

    log_buffer = io.StringIO()
    handler = logging.StreamHandler(log_buffer)
    logging.getLogger("et_tensorrt").addHandler(handler)
    logging.getLogger("et_tensorrt").setLevel(logging.INFO)

    def env():
        assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
        p = torch.cuda.get_device_properties(0)
        return f"torch {torch.__version__} (CUDA {torch.version.cuda}), {p.name}, sm{p.major}{p.minor}, {torch.cuda.device_count()} GPU(s)"

    cuda = run("CUDA torch", env) or (True if args.cpu_smoke else None)
    row("extension build", "PASS" if args.build == "ok" else "SKIP" if "skipped" in args.build else "FAIL", args.build)

    def import_pkg():
        import et_tensorrt

        return f"et_tensorrt from {et_tensorrt.__file__}", et_tensorrt

    et = run("import et_tensorrt", import_pkg, cuda)

    def describe():
        x = torch.randn(2, 8, device="cuda:0")
        d = et.describe(x)
        assert d.device == et.translate_device("cuda:0"), d
        assert d.data_ptr == x.data_ptr(), (d.data_ptr, x.data_ptr())
        return repr(d)

    run("describe a cuda tensor -> descriptor on cuda:0", describe, et)

    def trt_runtime():
        from et_tensorrt import trt

        mod = trt.module()
        return f"{trt.flavour()} {getattr(mod, '__version__', '?')}", mod

    trt_mod = run("TensorRT Python runtime imports", trt_runtime, et)

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    x_host = torch.randn(2, 8)

    def lower():
        t = time.time()
        pte = et.lower(model, (x_host,), min_block_size=1)
        report = et.lower.last_report
        return f"{len(pte)} B in {time.time() - t:.1f} s; {len(report.delegated)} nodes delegated, {len(report.host_nodes)} on host", pte

    pte = run("lower an MLP (export -> ONNX -> TensorRT engine)", lower, et)

    def engine_in_blob():
        from et_tensorrt import _C
        from et_tensorrt.inspection import delegate_blobs

        parsed = _C.parse_blob(delegate_blobs(pte)[0])
        engine_size = len(parsed["engine"]) if parsed["engine"] is not None else 0
        assert engine_size > 0, "the blob carries no engine (the build was left to PyTorch)"
        return f"engine {engine_size} B, exec device {parsed['execution_device']}, metadata {bytes(parsed['metadata'])[:120]!r}"

    run("delegate blob carries an engine", engine_in_blob, pte)

    def runner():
        return "Runner created", et.Runner(pte)

    r = run("et_tensorrt.Runner(pte)", runner, pte)

    with torch.no_grad():
        expected = model(x_host)

    def executor_choice():
        x = x_host.cuda()
        log_buffer.truncate(0)
        r.run([x])
        plan = r.last_plan
        why = log_buffer.getvalue().strip().replace("\n", " ")
        assert plan.executor == "tensorrt", f"executor {plan.executor} on {plan.execution_device}: {why or 'no log line'}"
        return f"executor tensorrt on {plan.execution_device}", plan

    run("TensorRT executor chosen (not the PyTorch fallback)", executor_choice, r)

    def share_cuda():
        x = x_host.cuda()
        out = r.run([x])[0]
        p = r.last_plan
        assert p.inputs[0].action == "share", repr(p)
        assert p.inputs[0].data_ptr == x.data_ptr(), (hex(p.inputs[0].data_ptr), hex(x.data_ptr()))
        return f"input 0 share, pointer {hex(x.data_ptr())} == plan's; plan: {p!r}"

    run("zero copy: CUDA input shared (pointer equality)", share_cuda, r)

    def h2d():
        x = x_host.clone()
        r.run([x])
        p = r.last_plan
        assert p.inputs[0].action == "copy h2d", repr(p)
        assert p.inputs[0].bytes == x.numel() * x.element_size()
        return f"input 0 copy h2d, {p.inputs[0].bytes} B; bytes_copied {p.bytes_copied}"

    run("host input copied host -> device", h2d, r)

    def prealloc():
        x = x_host.cuda()
        out = torch.full((2, 4), float("nan"), device="cuda:0")
        res = r.run([x], outputs=[out])
        assert res[0] is out, "the Runner did not return the caller's tensor"
        torch.cuda.synchronize()
        err = (out.cpu() - expected).abs().max().item()
        assert err < 1e-3, f"max abs error {err}"
        return f"returned out itself on cuda:0; written in place: {r.outputs_written_in_place}; output plan {r.last_plan.outputs[0]!r}"

    run("outputs preallocated on the GPU", prealloc, r)

    def parity():
        x = x_host.cuda()
        got = r.run([x])[0]
        err = (got.cpu() - expected).abs().max().item()
        # TensorRT may pick TF32 / other kernels: not bit-exact, report the error.
        assert err < 1e-3, f"max abs error {err}"
        return f"max abs error vs eager fp32 {err:.3g} (executor {r.last_plan.executor})"

    run("parity vs eager PyTorch", parity, r)

    def executorch_runtime():
        from executorch.runtime import Runtime

        from et_tensorrt import _C

        x = x_host.cuda()
        try:
            program = Runtime.get().load_program(pte)  # a Method does not keep its Program alive
            out = program.load_method("forward").execute([x])[0]
        except RuntimeError as e:
            raise AssertionError(f"{e}; delegate: {_C.last_delegate_error()}")
        plan = _C.last_plan()
        err = (out.cpu() - expected).abs().max().item()
        assert err < 1e-3, f"max abs error {err}"
        return f"err {err:.3g}; input 0 {plan.inputs[0].action} (ptr equal: {plan.inputs[0].data_ptr == x.data_ptr()}), executor {plan.executor}"

    run("executorch.runtime with a CUDA input", executorch_runtime, pte)

    print()
    widths = [max(len(r_[i]) for r_ in ROWS + [("check", "result", "detail")]) for i in range(2)]
    print(f"{'check':<{widths[0]}}  {'result':<{widths[1]}}  detail")
    print(f"{'-' * widths[0]}  {'-' * widths[1]}  ------")
    for check, result, detail in ROWS:
        print(f"{check:<{widths[0]}}  {result:<{widths[1]}}  {detail}")
    failed = sum(1 for _, res, _ in ROWS if res == "FAIL")
    passed = sum(1 for _, res, _ in ROWS if res == "PASS")
    skipped = sum(1 for _, res, _ in ROWS if res == "SKIP")
    print(f"\ngpu_check: {passed} passed, {failed} failed, {skipped} skipped in {time.time() - t0:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": [dict(zip(("check", "result", "detail"), r_)) for r_ in ROWS]}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
