"""translate_device: cpu and cuda map through; every other torch device type is refused by name."""

import pytest
import torch

import et_tensorrt
from et_tensorrt import UnsupportedDeviceError, translate_device


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), "cpu:0"])
def test_cpu_is_the_host(device):
    d = translate_device(device)
    assert (d.type, d.index) == ("cpu", 0)


@pytest.mark.parametrize("index", [0, 1, 7])
def test_cuda_keeps_its_index(index):
    d = translate_device(f"cuda:{index}")
    assert (d.type, d.index) == ("cuda", index)
    assert d == translate_device(torch.device("cuda", index))


def test_bare_cuda_means_the_current_device():
    expected = torch.cuda.current_device() if torch.cuda.is_available() else 0
    d = translate_device("cuda")
    assert (d.type, d.index) == ("cuda", expected)


@pytest.mark.parametrize("device", ["meta", "mps", "xla", "xla:1", "privateuseone", "hip", "xpu", "ipu", "hpu"])
def test_unmodelled_devices_are_refused_never_reported_as_host(device):
    with pytest.raises(UnsupportedDeviceError, match=rf"device {device.split(':')[0]}.*only cpu and cuda"):
        translate_device(device)


def test_refusal_is_a_value_error_and_unknown_strings_too():
    assert issubclass(UnsupportedDeviceError, ValueError)
    with pytest.raises(UnsupportedDeviceError, match="not a device torch recognizes"):
        translate_device("gpu0")
    with pytest.raises(TypeError):
        translate_device(3)


def test_devices_compare_and_print():
    assert translate_device("cuda:1") != translate_device("cuda:0")
    assert repr(translate_device("cuda:2")) == "Device(type='cuda', index=2)"
    assert repr(translate_device("cpu")) == "Device(type='cpu')"
    assert isinstance(translate_device("cpu"), et_tensorrt.Device)
