"""One inputs format for every command (issue 54 row 5): the dict by input name that ``check --inputs`` takes for a
program (keywords by their keyword, positional inputs by their placeholder), ``run --inputs`` takes for the ``.pte``
lowered from it: the partitioner keeps the names in the program (``et_tensorrt.method_input_names``), since the
``.pte``'s own input spec names keyword inputs only."""

from __future__ import annotations

import re

import pytest
import torch


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x, y, *, bias):
        return torch.tanh(self.fc(x) * y + bias)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, run_cli):
    folder = tmp_path_factory.mktemp("named")
    torch.manual_seed(0)
    x, y, bias = torch.randn(2, 8), torch.randn(2, 4), torch.randn(4)
    torch.export.save(torch.export.export(Scaled().eval(), (x, y), {"bias": bias}), folder / "scaled.pt2")
    torch.save({"y": y, "bias": bias, "x": x}, folder / "named.pt")  # any order: by name
    torch.save([x, y, bias], folder / "listed.pt")
    lowered = run_cli("lower", "scaled.pt2", "-o", "scaled.pte", "--min-block-size", 1, cwd=folder)
    assert lowered.status == 0, lowered.stdout + lowered.stderr
    return folder


def _outputs(stdout: str) -> str:
    return stdout[stdout.index("outputs:") :].splitlines()[1]


def test_run_takes_the_dict_by_name_that_check_takes(folder, run_cli):
    checked = run_cli("check", "scaled.pt2", "--inputs", "named.pt", "--min-block-size", 1, cwd=folder)
    assert checked.status == 0, checked.stdout + checked.stderr
    by_name = run_cli("run", "scaled.pte", "--inputs", "named.pt", cwd=folder)
    assert by_name.status == 0, by_name.stdout + by_name.stderr
    in_order = run_cli("run", "scaled.pte", "--inputs", "listed.pt", cwd=folder)
    assert _outputs(by_name.stdout) == _outputs(in_order.stdout)  # the same tensors, in the program's order


def test_a_name_the_program_does_not_have_is_named_with_what_it_takes(folder, run_cli):
    torch.save({"x": torch.randn(2, 8), "z": torch.randn(2, 4), "bias": torch.randn(4)}, folder / "wrong.pt")
    line = run_cli("run", "scaled.pte", "--inputs", "wrong.pt", cwd=folder).error_line
    assert re.search(r"no input named 'z'; missing 'y'\): it takes x float32\(2, 8\), y float32\(2, 4\), bias", line)
