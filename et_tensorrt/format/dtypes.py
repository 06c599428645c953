"""The dtype codes of the blob format: a torch dtype <-> its ExecuTorch ScalarType code, by the C++ translator's
table (moved here from ``blob.py``, unchanged, so that every section's writer and reader reads them from below).
"""

from __future__ import annotations

import torch

from et_tensorrt import _C
from et_tensorrt.errors import BlobFormatError, UnsupportedDtypeError


def scalar_type_code(dtype: torch.dtype | str) -> int:
    """``torch.float32`` (or ``"float32"``) -> ExecuTorch ScalarType code (the C++ translator's table)."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.replace("torch.", ""), None)
    if not isinstance(dtype, torch.dtype):
        raise BlobFormatError(f"{dtype!r} is not a torch dtype")
    try:
        return _C.scalar_type_code(dtype)
    except UnsupportedDtypeError as e:
        raise BlobFormatError(f"dtype {dtype} has no ExecuTorch ScalarType code in the blob format ({e})") from e


def scalar_type_dtype(code: int) -> torch.dtype:
    """ExecuTorch ScalarType code -> torch dtype (raises UnsupportedDtypeError for a code torch lacks)."""
    return _C.scalar_type_dtype(int(code))
