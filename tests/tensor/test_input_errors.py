"""describe_inputs(): an error names the input index, the method and the problem."""

import pytest
import torch

from et_tensorrt import LayoutError, UnsupportedDeviceError, UnsupportedDtypeError, describe_inputs


def test_all_inputs_described_in_order():
    xs = [torch.zeros(2), torch.ones(3, dtype=torch.int64), torch.tensor(1.0)]
    descs = describe_inputs(xs, method="forward")
    assert [d.sizes for d in descs] == [(2,), (3,), ()]
    assert [d.data_ptr for d in descs] == [x.data_ptr() for x in xs]


def test_accepts_tuples_and_defaults_to_forward():
    assert len(describe_inputs((torch.zeros(1),))) == 1


def test_unmodelled_device_names_index_method_and_device():
    xs = [torch.zeros(2), torch.zeros(2), torch.empty(2, device="meta")]
    with pytest.raises(UnsupportedDeviceError) as e:
        describe_inputs(xs, method="forward")
    assert str(e.value).startswith(
        "input 2 of method 'forward' is on device meta, which the ExecuTorch runtime does not model (only cpu and cuda)"
    )


def test_bad_layout_names_index_method_and_device():
    with pytest.raises(LayoutError, match=r"^input 1 of method 'decode' \(device cpu\): layout is not dense"):
        describe_inputs([torch.zeros(2), torch.randn(3, 1).expand(3, 4)], method="decode")


def test_bad_dtype_names_index_and_method():
    bad = torch.zeros(4, dtype=torch.uint8).view(torch.int4)
    with pytest.raises(UnsupportedDtypeError, match=r"^input 0 of method 'forward': dtype Int4"):
        describe_inputs([bad])


@pytest.mark.parametrize("item, type_name", [("x", "str"), (3, "int"), (None, "NoneType"), ([1.0], "list")])
def test_non_tensor_items_get_a_type_error(item, type_name):
    with pytest.raises(TypeError, match=rf"input 1 of method 'forward' is a {type_name}, not a torch.Tensor"):
        describe_inputs([torch.zeros(1), item])


def test_process_survives_and_next_call_works():
    with pytest.raises(UnsupportedDeviceError):
        describe_inputs([torch.empty(1, device="meta")])
    assert describe_inputs([torch.zeros(1)])[0].numel == 1
