"""Runner-level reliability: closed runner, mismatched inputs at run, a damaged delegate segment in a
.pte, TensorRT missing through the whole stack, threads (separate and shared runners), and that
outputs/plans never alias memory the runner reuses or frees. Each failure case ends with a valid call.

One tiny MLP is lowered per session; the .pte is cached under build/reliability-cache keyed by the
et_tensorrt sources and library versions (lowering costs 10 s to minutes on a loaded CPU).
"""

import gc
import hashlib
import os
import struct
import threading
import weakref
from pathlib import Path

import pytest
import torch

import et_tensorrt
from et_tensorrt import _C
from et_tensorrt.errors import LayoutError, RunnerError, UnsupportedDeviceError
from et_tensorrt.format import _reader
from et_tensorrt.inspection import delegate_blobs
from et_tensorrt.runtime.runner import Runner

ROOT = Path(__file__).resolve().parents[2]


def make_model():
    """Deterministic weights (no RNG), so a cached .pte and this process agree."""
    torch.manual_seed(1234)
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3)).eval()
    with torch.no_grad():
        for i, p in enumerate(m.parameters()):
            p.copy_(torch.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1) / 3)
    return m


EXAMPLE = torch.linspace(-2, 2, 8).reshape(2, 4)


def lowered_pte() -> bytes:
    import executorch

    h = hashlib.sha256()
    for path in sorted((ROOT / "et_tensorrt").rglob("*.py")):
        h.update(path.read_bytes())
    h.update(f"{torch.__version__} {getattr(executorch, '__version__', '')} mlp-v1".encode())
    cache = ROOT / "build" / "reliability-cache" / f"mlp-{h.hexdigest()[:20]}.pte"
    if cache.exists():
        return cache.read_bytes()
    with torch.no_grad():
        pte = et_tensorrt.lower(make_model(), (EXAMPLE,), min_block_size=1)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(pte)
    tmp.replace(cache)
    return pte


@pytest.fixture(scope="module")
def pte():
    return lowered_pte()


@pytest.fixture(scope="module")
def model():
    return make_model()


def expect(model, x):
    with torch.no_grad():
        return model(x)


def check_valid_run(runner, model):
    x = torch.randn(2, 4)
    (y,) = runner.run([x])
    torch.testing.assert_close(y, expect(model, x))


def delegate_blob_span(pte: bytes) -> tuple[int, int]:
    (blob,) = delegate_blobs(pte)
    return pte.index(blob), len(blob)


# -------------------------------------------------------------------------------- error rows


def test_closed_runner_raises_runner_error(pte, model):
    runner = Runner(pte)
    check_valid_run(runner, model)
    runner.close()
    with pytest.raises(RunnerError, match="closed"):
        runner.run([EXAMPLE])
    with pytest.raises(RunnerError, match="closed"):
        _ = runner.method_names
    with Runner(pte) as again:
        check_valid_run(again, model)
    with pytest.raises(RunnerError, match="closed"):
        again.run([EXAMPLE])


@pytest.mark.parametrize(
    "bad, error",
    [
        # Checked against the program's method metadata before ExecuTorch sees them:
        (torch.zeros(3, 4), ValueError),  # shape outside the (static) program
        (torch.zeros(2, 5), ValueError),
        (torch.zeros(2, 4, dtype=torch.float64), et_tensorrt.UnsupportedDtypeError),  # dtype
        (torch.zeros(2, 8)[:, ::2], LayoutError),  # stepped: refused before ExecuTorch sees it
        (torch.zeros(2, 4, device="meta"), UnsupportedDeviceError),
    ],
    ids=["rows", "cols", "float64", "stepped", "meta"],
)
def test_bad_inputs_at_run_raise_and_the_runner_still_works(pte, model, bad, error):
    runner = Runner(pte)
    with pytest.raises(error):
        runner.run([bad])
    check_valid_run(runner, model)


def test_dense_permuted_input_is_computed_correctly_or_refused(pte, model):
    """Finding F4: a transposed (dense, dim order (1, 0)) input is described correctly, but ExecuTorch's
    Method::set_input shares only the data pointer into the method's own contiguous tensor, so the
    program reads the memory as row-major and returns wrong numbers without an error."""
    runner = Runner(pte)
    x = torch.linspace(-1, 1, 8).reshape(4, 2).t()  # sizes (2, 4), strides (1, 2)
    assert et_tensorrt.describe(x).dim_order == (1, 0)
    try:
        (y,) = runner.run([x])
    except LayoutError:
        pass  # refusing is fine; a wrong answer is not
    else:
        torch.testing.assert_close(y, expect(model, x), msg="transposed input gave a wrong result, no error")
    check_valid_run(runner, model)


def test_wrong_input_count(pte, model):
    runner = Runner(pte)
    with pytest.raises(
        ValueError, match=r"takes 1 input \(input 0: float32\(2, \d+\)\), got 2: pass one tensor per input"
    ):
        runner.run([EXAMPLE, EXAMPLE])
    check_valid_run(runner, model)


@pytest.mark.parametrize(
    "patch, message",
    [
        ((4, "<H", 4), "format version 4 is not supported"),
        ((0, "<4s", b"XTRT"), "wrong magic"),
        ((16, "<Q", 7), "truncated or padded"),
        ((12, "<I", 17), "too many sections"),
        ((32 + 8, "<Q", 2**40), "lies outside the blob"),
    ],
    ids=["version", "magic", "total_size", "section_count", "section_offset"],
)
def test_damaged_delegate_segment_in_a_pte(pte, model, patch, message):
    start, _ = delegate_blob_span(pte)
    offset, fmt, value = patch
    bad = bytearray(pte)
    struct.pack_into(fmt, bad, start + offset, value)
    with pytest.raises(RunnerError, match=message):
        Runner(bytes(bad)).run([EXAMPLE])
    check_valid_run(Runner(pte), model)


def test_fallback_refused_through_the_runner(pte, model, monkeypatch):
    """The lowered blob carries an engine and executes on cuda:0. Where TensorRT cannot run it (this
    process's real CUDA device count and TensorRT runtime decide; the missing-runtime reason itself is
    tested through ``create_executor(cuda_devices=1)``) and ET_TENSORRT_FALLBACK=error, delegate init
    refuses with the reason instead of falling back silently."""
    from et_tensorrt.runtime import executors

    start, total = delegate_blob_span(pte)
    assert len(_reader.parse_blob(pte[start : start + total])["engine"]) > 0
    if _C.cuda_device_count() > 0:
        pytest.skip("a GPU with TensorRT runs this engine; there is nothing to refuse")
    with monkeypatch.context() as m:
        m.setenv(executors.FALLBACK_ENV, "error")
        with pytest.raises(
            RunnerError,
            match="TensorRT cannot execute this partition here: no CUDA device is "
            "available; ET_TENSORRT_FALLBACK=error refuses the PyTorch fallback",
        ):
            Runner(pte).run([EXAMPLE])
    check_valid_run(Runner(pte), model)


# ------------------------------------------------------------------------------------- threads

N_THREADS, M_CALLS = 4, 40


def _hammer(run_fn, model, n_threads=N_THREADS, m_calls=M_CALLS):
    """n threads x m calls, each with its own inputs; returns the list of failures."""
    failures, barrier = [], threading.Barrier(n_threads)

    def work(k):
        gen = torch.Generator().manual_seed(k)
        xs = [torch.randn(2, 4, generator=gen) for _ in range(m_calls)]
        barrier.wait()
        try:
            for i, x in enumerate(xs):
                (y,) = run_fn(k, x)
                want = expect(model, x)
                if not torch.allclose(y, want, atol=1e-5, rtol=1e-5):
                    failures.append(f"thread {k} call {i}: got {y.tolist()} want {want.tolist()}")
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(f"thread {k}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "deadlock: a thread did not finish"
    return failures


def test_threads_with_separate_runners(pte, model):
    runners = [Runner(pte) for _ in range(N_THREADS)]
    failures = _hammer(lambda k, x: runners[k].run([x]), model)
    assert not failures, "\n".join(failures[:10])
    check_valid_run(runners[0], model)


def test_threads_sharing_one_runner(pte, model):
    """Documented contract (docs/reliability.md): one Runner may be shared by threads; calls are
    serialized. Finding F3 when this fails: nothing serializes ProgramRunner::run, the GIL is released
    around it, and ExecuTorch's Method (inputs, planned buffers) is shared state."""
    runner = Runner(pte)
    check_valid_run(runner, model)  # method loaded before the threads start
    failures = _hammer(lambda k, x: runner.run([x]), model)
    assert not failures, f"{len(failures)} corrupted/failed calls of {N_THREADS * M_CALLS}:\n" + "\n".join(
        failures[:10]
    )
    check_valid_run(runner, model)


def test_threads_sharing_one_fresh_runner_first_call(pte, model):
    """The first call loads the method; concurrent first calls must not race on it."""
    for _ in range(3):
        runner = Runner(pte)
        failures = _hammer(lambda k, x, runner=runner: runner.run([x]), model, m_calls=3)
        assert not failures, "\n".join(failures[:10])


# ------------------------------------------------------------------------------------ lifetimes


def test_outputs_are_not_aliased_to_memory_the_runner_reuses_or_frees(pte, model):
    runner = Runner(pte)
    x1, x2 = torch.randn(2, 4), torch.randn(2, 4)
    (y1,) = runner.run([x1])
    first = y1.clone()
    (y2,) = runner.run([x2])  # ExecuTorch reuses its output buffer
    torch.testing.assert_close(y1, first)
    runner.close()
    del runner
    gc.collect()
    torch.testing.assert_close(y1, first)  # still valid after the runner (and its program) is gone
    torch.testing.assert_close(y2, expect(model, x2))


def test_runner_keeps_no_reference_to_inputs(pte, model):
    runner = Runner(pte)
    x = torch.randn(2, 4)
    storage = weakref.ref(x.untyped_storage())
    runner.run([x])
    del x
    gc.collect()
    assert storage() is None
    check_valid_run(runner, model)


def test_last_plan_outlives_inputs_and_runner(pte, model):
    runner = Runner(pte)
    x = torch.randn(2, 4)
    address = x.data_ptr()
    runner.run([x])
    plan = runner.last_plan
    assert plan is not None and plan.inputs[0].data_ptr == address
    del x, runner
    gc.collect()
    assert plan.inputs[0].data_ptr == address and plan.executor in ("pytorch", "tensorrt")
    assert "input  0" in repr(plan)


def test_caller_outputs_written_and_kept_alive_only_by_the_caller(pte, model):
    runner = Runner(pte)
    out = torch.full((2, 3), float("nan"))
    storage = weakref.ref(out.untyped_storage())
    x = torch.randn(2, 4)
    (y,) = runner.run([x], outputs=[out])
    assert y.data_ptr() == out.data_ptr()
    torch.testing.assert_close(out, expect(model, x))
    del y, out
    gc.collect()
    assert storage() is None
    check_valid_run(runner, model)
