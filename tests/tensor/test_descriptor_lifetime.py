"""A descriptor keeps its tensor's memory alive, and lets it go when the descriptor goes."""

import gc
import sys
import weakref

import torch

from et_tensorrt import describe, describe_inputs


def test_descriptor_keeps_the_tensor_alive_after_the_caller_drops_it():
    t = torch.arange(6, dtype=torch.float32)
    ref = weakref.ref(t)
    storage_ref = weakref.ref(t.untyped_storage())
    ptr = t.data_ptr()
    desc = describe(t)
    del t
    gc.collect()
    # The descriptor's deleter owns a reference: the tensor (torch preserves its Python object while
    # C++ holds it) and its storage are still alive, and the memory still holds the values.
    assert ref() is not None and storage_ref() is not None
    assert desc.data_ptr == ptr
    assert ref().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_storage_is_released_when_the_descriptor_goes():
    t = torch.arange(6, dtype=torch.float32)
    storage_ref = weakref.ref(t.untyped_storage())
    desc = describe(t)
    del t
    gc.collect()
    assert storage_ref() is not None
    del desc
    gc.collect()
    assert storage_ref() is None


def test_tensor_object_is_freed_once_descriptor_is_gone():
    t = torch.zeros(4)
    ref = weakref.ref(t)
    descs = describe_inputs([t, t])
    del t
    gc.collect()
    assert ref() is not None  # held by the descriptors' deleters
    del descs
    gc.collect()
    assert ref() is None


def test_no_growth_over_many_descriptors():
    t = torch.zeros(16)
    before = sys.getrefcount(t)
    for _ in range(1000):
        describe(t)
    gc.collect()
    assert sys.getrefcount(t) == before
