"""Layouts ExecuTorch cannot express are refused with LayoutError (it would abort the process)."""

import pytest
import torch

from et_tensorrt import LayoutError, describe


def _refusals():
    base = torch.randn(4, 6)
    return {
        "expanded": (torch.randn(3, 1).expand(3, 4), r"expanded \(stride 0\) at dim 1"),
        "stepped-slice": (base[:, ::2], r"gaps between elements.*dim 1"),
        "column-slice": (base[:, 1:3], r"gaps between elements.*dim 0"),
        "transposed-slice": (base.t()[::2], r"gaps between elements"),
        "overlapping": (torch.randn(10).as_strided((3, 4), (2, 1)), r"overlapping elements.*dim 0"),
        "broadcast-scalar": (torch.tensor(1.0).expand(5), r"expanded"),
        "sparse": (torch.eye(3).to_sparse(), r"not strided.*to_dense"),
        "conj-view": (torch.randn(3, dtype=torch.complex64).conj(), r"resolve_conj"),
    }


@pytest.mark.parametrize("case", list(_refusals()))
def test_refused_with_a_fix_and_the_process_survives(case):
    tensor, pattern = _refusals()[case]
    with pytest.raises(LayoutError, match=pattern):
        describe(tensor)
    # The process lives on and the fix the message suggests works.
    if tensor.layout == torch.strided:
        fixed = describe(tensor.resolve_conj().contiguous())
        assert fixed.sizes == tuple(tensor.shape)


def test_message_says_what_to_do():
    with pytest.raises(LayoutError, match=r"call \.contiguous\(\)"):
        describe(torch.randn(4, 6)[:, ::2])


def test_layout_error_is_a_value_error():
    assert issubclass(LayoutError, ValueError)


def test_size_one_dims_with_odd_strides_are_dense():
    t = torch.randn(6).as_strided((1, 6), (100, 1))
    assert describe(t).sizes == (1, 6)


def test_expanded_size_one_dim_is_dense():
    t = torch.randn(1, 4).expand(1, 4)
    assert describe(t).strides == (4, 1)
