"""What lower/save are given (issue 54 row 7): a module without its example inputs, a tensor for the tuple, or
something that is no model, is one TypeError saying what they take and how; nothing is exported or written."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt

HOW = (
    r"takes an ExportedProgram, or a torch.nn.Module with its example inputs: et_tensorrt\.save\(path, model, \(x,\)\)"
)


def test_save_of_a_module_without_example_inputs_says_what_save_takes(tmp_path):
    with pytest.raises(
        TypeError, match=r"^Linear\.forward takes \(input\) and was given no example inputs: et_tensorrt\.save " + HOW
    ):
        et_tensorrt.save(tmp_path / "z.pte", torch.nn.Linear(4, 4))
    assert list(tmp_path.iterdir()) == []


def test_lower_names_itself_and_counts_what_it_was_given():
    with pytest.raises(TypeError, match=r"takes \(x, y\) and was given 1 example input\(s\): et_tensorrt\.lower takes"):
        et_tensorrt.lower(_TwoInputs(), (torch.ones(2),))


@pytest.mark.parametrize(
    "args, says",
    [
        ((torch.nn.Linear(4, 4), torch.ones(2, 4)), "the example inputs are one tensor, not a tuple of them"),
        (("model.pt2",), "the model is a str"),
    ],
)
def test_a_tensor_for_the_tuple_or_a_model_that_is_none_is_one_line(tmp_path, args, says):
    with pytest.raises(TypeError, match=f"^{says}: et_tensorrt.save {HOW}"):
        et_tensorrt.save(tmp_path / "z.pte", *args)


class _TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x + y
