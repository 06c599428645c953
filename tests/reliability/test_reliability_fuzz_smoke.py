"""Bounded fuzz smoke (hypothesis) of the C++ blob parser and of describe over strided views.

The contracts are the ones scripts/fuzz_blob.py and scripts/fuzz_describe.py run at scale (this file
loads those scripts so both use one definition): every byte string either parses or raises
BlobFormatError; every strided view either describes, with fields consistent with torch, or raises
LayoutError / UnsupportedDtypeError / UnsupportedDeviceError exactly as an independent oracle predicts.
"""

import importlib.util
import struct
from pathlib import Path

import blob_fixtures as F
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from et_tensorrt.errors import BlobFormatError
from et_tensorrt.format import _reader

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"_reliability_{name}", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FB = _load("fuzz_blob")
FD = _load("fuzz_describe")
SEEDS = FB.seeds()
VALID = F.valid_blob()
FAST = settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)


# ------------------------------------------------------------------------------------------ blob parser


@settings(FAST, max_examples=1500)
@given(st.binary(max_size=700))
def test_random_bytes_parse_or_raise_blob_format_error(data):
    FB.check_one(data)


@st.composite
def mutated_seed(draw):
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "field"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] = draw(st.integers(0, 255))
        elif op == "cut" and data:
            i = draw(st.integers(0, len(data)))
            del data[i : i + draw(st.integers(1, 40))]
        elif op == "insert":
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(min_size=1, max_size=24))
        elif op == "field" and len(data) >= 8:
            # Overwrite an aligned 4- or 8-byte field (counts, offsets, lengths) with an extreme value.
            width = draw(st.sampled_from([4, 8]))
            i = draw(st.integers(0, (len(data) - width) // 4)) * 4
            value = draw(st.sampled_from([0, 1, 2, 16, 17, 32, 0x7FFFFFFF, 0xFFFFFFFF, 2**63 - 1, 2**64 - 1]))
            data[i : i + width] = (value & (2 ** (8 * width) - 1)).to_bytes(width, "little")
    return bytes(data)


@settings(FAST, max_examples=2500)
@given(mutated_seed())
def test_mutated_fixture_blobs_parse_or_raise_blob_format_error(data):
    # check_one also parses a header-fixed copy, so mutations reach the section table and IO_TABLE.
    FB.check_one(data)


def test_every_damaged_fixture_is_refused_and_the_next_valid_parse_succeeds():
    for name, (data, _) in F.damaged_blobs().items():
        with pytest.raises(BlobFormatError):
            _reader.parse_blob(data)
        assert _reader.parse_blob(VALID)["version"] == 3, name


def _blob_with_name(name: bytes) -> bytes:
    io = struct.pack("<I", 1) + struct.pack("<BBbbHH", 0, 6, 0, 0, len(name), 1) + name + struct.pack("<qqq", 1, 1, 1)
    from et_tensorrt.format import blob as B

    return B.write_sections([(B.SECTION_IO_TABLE, io), (B.SECTION_ENGINE, F.ENGINE)], 1, 0)


def test_non_utf8_io_name_is_a_blob_format_error():
    """Finding F1 (found by scripts/fuzz_blob.py): the C++ reader accepts a name that is not UTF-8 and
    parse_blob then raised UnicodeDecodeError from the str conversion. Both entry points refuse it now."""
    from et_tensorrt.format import blob as B

    bad = _blob_with_name(b"x\xa4y")
    with pytest.raises(BlobFormatError):
        B.read_blob(bad)
    with pytest.raises(BlobFormatError):
        _reader.parse_blob(bad)
    assert _reader.parse_blob(_blob_with_name("ünï".encode()))["inputs"][0]["name"] == "ünï"


def test_non_contiguous_buffers_are_read_in_logical_order_or_refused():
    """Finding F2: parse_blob reads `size * itemsize` bytes from the buffer's first element's address
    whatever its strides. A reversed view (negative stride) makes it read past the end of the buffer
    (heap-buffer-overflow under ASan); a stepped view of a valid blob is misread. Here the reversed view
    sits in a buffer twice its size so the overread stays in bounds without ASan."""
    backing = np.frombuffer(VALID[::-1] + VALID, dtype=np.uint8)
    reversed_view = backing[: len(VALID)][::-1]  # logical content == VALID, starts at backing[len-1]
    stepped = np.frombuffer(bytes(b for c in VALID for b in (c, 0)), dtype=np.uint8)[::2]
    for view in (reversed_view, stepped):
        assert bytes(view) == VALID
        try:
            parsed = _reader.parse_blob(view)
        except BufferError:
            continue  # refusing a non-contiguous buffer is fine
        assert parsed["version"] == 3 and len(parsed["inputs"]) == 2
    assert _reader.parse_blob(memoryview(VALID))["version"] == 3


# ------------------------------------------------------------------------------------ describe(view)

dims = st.tuples(
    st.one_of(st.integers(0, 5), st.just(1), st.sampled_from([2**31, 2**16])),
    st.one_of(st.integers(0, 40), st.sampled_from([0, 1, 2**16, 2**32])),
)


@st.composite
def strided_view(draw):
    rank = draw(st.integers(0, 18))
    pairs = draw(st.lists(dims, min_size=rank, max_size=rank))
    if draw(st.booleans()):
        # Bias towards dense layouts: strides of a random permutation of the sizes (contiguous,
        # channels-last, transposed...) so the "ok" branch gets real coverage.
        sizes = [p[0] % 6 for p in pairs]
        perm = draw(st.permutations(range(rank)))
        strides = [0] * rank
        step = 1
        for d in reversed(perm):
            strides[d] = step
            step *= max(sizes[d], 1)
    else:
        sizes = [p[0] for p in pairs]
        strides = [p[1] for p in pairs]
    device = draw(st.sampled_from(["cpu"] * 15 + ["meta"]))
    dtype = draw(st.sampled_from(FD.DTYPES))
    modifier = draw(st.sampled_from([FD.PLAIN] * 8 + [FD.CONJ, FD.NEG]))
    return device, dtype, sizes, strides, draw(st.integers(0, 9)), modifier


@settings(FAST, max_examples=2500)
@given(strided_view())
def test_strided_views_describe_consistently_or_raise_a_typed_error(view):
    FD.check_view(*view)


def test_describe_fuzz_reaches_every_outcome():
    """The generator is not vacuous: each outcome the oracle knows is produced and checked."""
    seen = set()
    cases = [
        ("cpu", torch.float32, [2, 3], [3, 1], 0, FD.PLAIN),  # ok
        ("cpu", torch.float32, [2, 3], [1, 2], 1, FD.PLAIN),  # ok: transposed
        ("cpu", torch.float32, [2, 3], [6, 2], 0, FD.PLAIN),  # layout: gaps
        ("cpu", torch.float32, [2, 3], [0, 1], 0, FD.PLAIN),  # layout: expanded
        ("cpu", torch.float32, [2, 3], [1, 1], 0, FD.PLAIN),  # layout: overlapping
        ("cpu", torch.complex64, [3], [1], 0, FD.CONJ),  # layout: conj bit
        ("cpu", torch.float32, [3], [1], 0, FD.NEG),  # layout: neg bit
        ("cpu", torch.float32, [1] * 17, [1] * 17, 0, FD.PLAIN),  # layout: rank 17
        ("cpu", torch.uint4, [4], [1], 0, FD.PLAIN),  # dtype
        ("meta", torch.float32, [4], [1], 0, FD.PLAIN),  # device
        ("cpu", torch.float32, [0, 2**16, 2**16], [1, 1, 1], 0, FD.PLAIN),  # empty; int32 stride limit
        ("cpu", torch.float32, [], [], 3, FD.PLAIN),  # 0-d with an offset
    ]
    for case in cases:
        seen.add(FD.check_view(*case))
        assert FD.check_view("cpu", torch.float32, [2, 3], [3, 1]) == "ok"  # and the next call works
    assert seen == {"ok", "layout", "dtype", "device"}
