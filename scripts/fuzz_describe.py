"""Fuzz `et_tensorrt.describe` over random strided views (shapes, strides, storage offsets, dtypes).

    python scripts/fuzz_describe.py -runs=60000            # atheris / libFuzzer flags

Every view is ``torch.as_strided`` over a base big enough for it, so it is a real tensor torch itself
accepts. ``check_view`` is the contract (the hypothesis smoke test in tests/reliability runs the same
function): ``describe`` either returns a descriptor whose fields agree with torch, or raises
LayoutError / UnsupportedDtypeError / UnsupportedDeviceError — and which of those is decided by an
oracle written here in Python, independently of the C++ (dense = the dims of size > 1, sorted by
stride, each step exactly over the block inside it). A crash, another exception, or a disagreement
with the oracle is a finding.
"""

from __future__ import annotations

import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from dtypes import ACCEPTED_DTYPES, REFUSED_DTYPES  # noqa: E402  (tests/dtypes.py, shared with the tests)

INT32_MAX = 2**31 - 1
MAX_ELEMENTS = 1 << 20  # skip views whose base would be larger (the fuzzer's memory, not a limit of ours)

DTYPES = ACCEPTED_DTYPES + REFUSED_DTYPES

# View modifiers: none, a lazy conjugate bit, a lazy negative bit.
PLAIN, CONJ, NEG = 0, 1, 2


def dense(sizes, strides) -> bool:
    """The oracle: do these strides address every element exactly once, with no gaps?"""
    if any(s == 0 for s in sizes):
        return True  # an empty tensor addresses nothing
    expected = 1
    for stride, size in sorted((st, sz) for sz, st in zip(sizes, strides) if sz != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def expected_outcome(device: str, dtype, sizes, strides, modifier: int) -> set[str]:
    """The outcomes the oracle allows: {"ok"}, {"device"}, {"dtype"}, {"layout"} or {"ok", "layout"}."""
    if modifier != PLAIN:
        return {"layout"}
    if device != "cpu":
        return {"device"}
    if dtype in REFUSED_DTYPES:
        return {"dtype"}
    if len(sizes) > 16 or any(s > INT32_MAX for s in sizes) or not dense(sizes, strides):
        return {"layout"}
    # ExecuTorch strides are int32: the stride of an outer dim of an *empty* tensor may not fit.
    span = 1
    for s in sizes:
        span *= max(s, 1)
    return {"ok"} if span <= INT32_MAX else {"ok", "layout"}


def make_view(device: str, dtype, sizes, strides, offset: int, modifier: int):
    """The view, or None when its base would be too big for the fuzzer (or torch cannot make it)."""
    if any(s == 0 for s in sizes):
        needed = offset + 1
    else:
        needed = offset + 1 + sum((sz - 1) * st for sz, st in zip(sizes, strides))
    if needed > MAX_ELEMENTS:
        return None
    base = torch.empty(needed, dtype=dtype, device=device)
    try:
        view = torch.as_strided(base, sizes, strides, offset)
    except RuntimeError:  # torch itself refuses (e.g. "numel: integer multiplication overflow")
        return None
    if modifier == CONJ:
        if not view.is_complex():
            return None
        view = view.conj()
    elif modifier == NEG:
        if (
            view.dtype in REFUSED_DTYPES
            or view.dtype in (torch.bool, torch.bits8, torch.bits16)
            or "float8" in str(view.dtype)
            or view.dtype in (torch.uint16, torch.uint32, torch.uint64)
        ):
            return None
        view = torch._neg_view(view)
    return view


def check_view(device: str, dtype, sizes, strides, offset: int = 0, modifier: int = PLAIN) -> str:
    """Describe one view; returns the outcome ("ok", "layout", "dtype", "device", "skipped").

    Raises AssertionError when describe disagrees with the oracle or with torch.
    """
    from et_tensorrt import LayoutError, UnsupportedDeviceError, UnsupportedDtypeError, describe

    view = make_view(device, dtype, list(sizes), list(strides), offset, modifier)
    if view is None:
        return "skipped"
    allowed = expected_outcome(device, dtype, list(sizes), list(strides), modifier)
    try:
        d = describe(view)
    except LayoutError as e:
        assert "layout" in allowed, f"LayoutError for {_what(view)}, oracle says {allowed}: {e}"
        return "layout"
    except UnsupportedDtypeError as e:
        assert "dtype" in allowed, f"UnsupportedDtypeError for {_what(view)}, oracle says {allowed}: {e}"
        return "dtype"
    except UnsupportedDeviceError as e:
        assert "device" in allowed, f"UnsupportedDeviceError for {_what(view)}, oracle says {allowed}: {e}"
        return "device"
    assert "ok" in allowed, f"described {_what(view)}, oracle says {allowed}: {d!r}"
    check_fields(view, d)
    return "ok"


def check_fields(view: torch.Tensor, d) -> None:
    """A descriptor's fields agree with torch's view of the same tensor."""
    rank = view.dim()
    assert d.sizes == tuple(view.shape), (d.sizes, view.shape)
    assert d.dtype == view.dtype and d.device == view.device
    assert d.data_ptr == view.data_ptr()
    assert d.numel == view.numel()
    assert d.nbytes == view.numel() * view.element_size(), (d.nbytes, view.numel(), view.element_size())
    assert sorted(d.dim_order) == list(range(rank)), d.dim_order
    # ExecuTorch's rule: strides follow the dim order, innermost 1, a size-0 dim multiplies by 1.
    stride = 1
    for k in reversed(d.dim_order):
        assert d.strides[k] == stride, (d.strides, d.dim_order, d.sizes)
        stride *= max(d.sizes[k], 1)
    # ... and address exactly the elements torch's strides address.
    if view.numel() > 0:
        for i in range(rank):
            if view.shape[i] != 1:
                assert d.strides[i] == view.stride(i), (i, d.strides, view.stride())


def _what(view) -> str:
    return f"{view.dtype} sizes={tuple(view.shape)} strides={view.stride()} offset={view.storage_offset()}"


def from_fuzzed_data(data: bytes):
    """Decode fuzzer bytes into (device, dtype, sizes, strides, offset, modifier)."""
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    device = "meta" if fdp.ConsumeIntInRange(0, 31) == 0 else "cpu"
    dtype = DTYPES[fdp.ConsumeIntInRange(0, len(DTYPES) - 1)]
    modifier = fdp.ConsumeIntInRange(0, 15)
    modifier = modifier if modifier < 3 else PLAIN
    rank = fdp.ConsumeIntInRange(0, 18)
    sizes, strides = [], []
    for _ in range(rank):
        kind = fdp.ConsumeIntInRange(0, 15)
        sizes.append(2 ** fdp.ConsumeIntInRange(15, 33) if kind == 0 else fdp.ConsumeIntInRange(0, 6))
        skind = fdp.ConsumeIntInRange(0, 15)
        strides.append(2 ** fdp.ConsumeIntInRange(10, 34) if skind == 0 else fdp.ConsumeIntInRange(0, 64))
    offset = fdp.ConsumeIntInRange(0, 16)
    return device, dtype, sizes, strides, offset, modifier


STATS: dict[str, int] = {}


def fuzz_one(data: bytes) -> None:
    outcome = check_view(*from_fuzzed_data(data))
    STATS[outcome] = STATS.get(outcome, 0) + 1
    if sum(STATS.values()) % 1000 == 0:
        _write_stats()


def _write_stats() -> None:
    # libFuzzer leaves through _exit: the outcome counts go to a file as they change.
    path = os.environ.get("FUZZ_STATS_FILE")
    if path:
        with open(path, "w") as f:
            for k, v in sorted(STATS.items()):
                f.write(f"{v}\t{k}\n")


def main() -> None:
    import atheris

    import et_tensorrt  # noqa: F401  (loads torch and the extension before fuzzing starts)

    # Python-side coverage feedback (the C++ is not instrumented): the oracle's and checker's branches.
    module = sys.modules[__name__]
    for name in ("dense", "expected_outcome", "make_view", "check_view", "check_fields", "from_fuzzed_data"):
        setattr(module, name, atheris.instrument_func(getattr(module, name)))
    atheris.Setup(sys.argv, fuzz_one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
