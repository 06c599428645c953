"""The dtype codes of the blob format: ExecuTorch ScalarType codes, as every section stores them (and as the format
layer's dataclasses hold them). Named and sized by the one table (extension/format/scalar_types.h) without torch;
translated to and from torch dtypes by the C++ translator, which loads torch.
"""

from __future__ import annotations

from et_tensorrt.errors import BlobFormatError, UnsupportedDtypeError
from et_tensorrt.format import _reader


def scalar_type_name(code: int) -> str:
    """ExecuTorch ScalarType code -> torch's name for it (``6`` -> ``"float32"``); ``"ScalarType(N)"`` for a code
    torch lacks. Needs no torch."""
    name = _reader.scalar_type_name(int(code))
    return f"ScalarType({int(code)})" if name is None else name


def element_size(code: int) -> int:
    """ExecuTorch ScalarType code -> its element size in bytes (UnsupportedDtypeError for a code torch lacks)."""
    size = _reader.scalar_type_size(int(code))
    if not size:
        raise UnsupportedDtypeError(f"ExecuTorch ScalarType code {int(code)} has no torch dtype")
    return size


def scalar_type_code(dtype) -> int:
    """``torch.float32`` (or ``"float32"``) -> ExecuTorch ScalarType code (the C++ translator's table)."""
    import torch

    from et_tensorrt import _C

    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.replace("torch.", ""), None)
    if not isinstance(dtype, torch.dtype):
        raise BlobFormatError(f"{dtype!r} is not a torch dtype")
    try:
        return _C.scalar_type_code(dtype)
    except UnsupportedDtypeError as e:
        raise BlobFormatError(f"dtype {dtype} has no ExecuTorch ScalarType code in the blob format ({e})") from e


def scalar_type_dtype(code: int):
    """ExecuTorch ScalarType code -> torch dtype (raises UnsupportedDtypeError for a code torch lacks)."""
    from et_tensorrt import _C

    return _C.scalar_type_dtype(int(code))
