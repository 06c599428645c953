"""The torch dtypes the descriptor translator describes (they have an ExecuTorch ScalarType) and the ones it
refuses, as torch can make them (shared by tests/reliability and scripts/fuzz_describe.py)."""

import torch

ACCEPTED_DTYPES = [
    torch.float32,
    torch.float16,
    torch.bfloat16,
    torch.float64,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
    torch.complex128,
    torch.complex32,
    torch.float8_e4m3fn,
    torch.float8_e5m2,
    torch.float8_e4m3fnuz,
    torch.float8_e5m2fnuz,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.bits8,
    torch.bits16,
]
REFUSED_DTYPES = [
    getattr(torch, name)
    for name in [
        "uint1",
        "uint2",
        "uint3",
        "uint4",
        "uint5",
        "uint6",
        "uint7",
        "int1",
        "int2",
        "int3",
        "int4",
        "int5",
        "int6",
        "int7",
        "float4_e2m1fn_x2",
        "float8_e8m0fnu",
    ]
    if hasattr(torch, name)
]
