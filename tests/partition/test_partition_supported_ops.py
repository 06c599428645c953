"""The op table names real ops, and device handling is not the table's business."""

import operator

import executorch.exir.passes.dim_order_ops_registry  # noqa: F401  registers dim_order_ops
import pytest
import torch

from et_tensorrt.partition import TensorRTPartitioner
from et_tensorrt.partition.supported_ops import CAST_OPS, SUPPORTED_OPS, is_supported_op, op_name


def _resolve(name):
    if name.startswith("_operator."):  # Python's size arithmetic on SymInts
        return getattr(operator, name.split(".", 1)[1])
    if name.startswith("torch.sym_"):  # torch.sym_max / sym_min on SymInts
        return getattr(torch, name.split(".", 1)[1])
    namespace, op, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


@pytest.mark.parametrize("name", sorted(SUPPORTED_OPS - {"operator.getitem"}))
def test_every_entry_is_a_real_op(name):
    assert op_name(_resolve(name)) == name


def test_lookup_forms():
    from executorch.exir.dialects._ops import ops as exir_ops

    assert op_name(operator.getitem) == "operator.getitem"
    assert is_supported_op(exir_ops.edge.aten.mul.Tensor)
    assert is_supported_op(torch.ops.aten.mul.Tensor)
    assert not is_supported_op(torch.ops.aten.nonzero.default)
    assert CAST_OPS <= SUPPORTED_OPS


def test_engine_device_must_be_cuda():
    with pytest.raises(ValueError):
        TensorRTPartitioner(target_device="cpu")
    with pytest.raises(ValueError):
        TensorRTPartitioner(compile_specs={"et_tensorrt.execution_device": "cuda:1"})
    assert str(TensorRTPartitioner(target_device="cuda:1").target_device) == "cuda:1"
