"""Issue 44: programs exported the way users export them, through every command on the first export.

A new user's HF model (DistilBERT, random init: an architecture no other test uses) exported as HF users do (keyword
inputs, a ``SequenceClassifierOutput`` out, ``torch.export.save``) goes through explain -> lower -> inspect -> run ->
check as the real command, which never imports transformers (a user's shell does not): the output dataclass's pytree
node is read without it; its keyword inputs are given by name (``run``) or in order (``check``). A program that kept a
Python value as a keyword input (``return_sum=True``) runs and checks with that value generated or given, and refuses
another one clearly.
"""

from __future__ import annotations

import json
import re

import pytest
import torch

import et_tensorrt
from et_tensorrt import cli


@pytest.fixture(scope="module")
def distilbert(tmp_path_factory):
    """distilbert.pt2, its inputs by name (named.pt, in another order) and in order (ordered.pt), and the eager
    logits on them."""
    transformers = pytest.importorskip("transformers")
    tmp = tmp_path_factory.mktemp("user_model")
    config = transformers.DistilBertConfig(
        vocab_size=64, dim=32, n_layers=1, n_heads=2, hidden_dim=64, max_position_embeddings=32, num_labels=3
    )
    torch.manual_seed(0)
    model = transformers.DistilBertForSequenceClassification(config).eval()
    ids = torch.randint(0, 64, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, 6:] = 0
    torch.export.save(torch.export.export(model, (), {"input_ids": ids, "attention_mask": mask}), tmp / "model.pt2")
    torch.save({"attention_mask": mask, "input_ids": ids}, tmp / "named.pt")
    torch.save([ids, mask], tmp / "ordered.pt")
    with torch.no_grad():
        return tmp, model(input_ids=ids, attention_mask=mask).logits


def _sum(stdout: str, label: str) -> float:
    return float(re.search(rf"{label}: .*? on cpu\s+sum=(\S+)", stdout).group(1))


def test_a_users_hf_model_goes_through_every_command_on_the_first_export(distilbert, run_cli):
    tmp, logits = distilbert
    explained = run_cli("explain", "model.pt2", cwd=tmp)
    assert explained.status == 0 and explained.noise == [], explained.stderr
    assert "model.pt2: input_ids int64(2, 8), attention_mask int64(2, 8)" in explained.stdout
    lowered = run_cli("lower", "model.pt2", "-o", "model.pte", cwd=tmp)
    assert lowered.status == 0 and lowered.noise == [], lowered.stderr
    assert "1 delegate(s)" in lowered.stdout
    shown = run_cli("inspect", "model.pte", cwd=tmp)
    assert shown.status == 0 and "input  0: int64(2, 8)" in shown.stdout
    ran = run_cli("run", "model.pte", "--inputs", "named.pt", cwd=tmp)  # by name: the .pte records its keywords
    assert ran.status == 0 and ran.noise == [], ran.stderr
    assert _sum(ran.stdout, "output 0") == pytest.approx(float(logits.sum()), abs=1e-4)
    checked = run_cli("check", "model.pt2", "--inputs", "ordered.pt", "--json", cwd=tmp)  # in the program's order
    assert checked.status == 0, checked.stderr
    assert json.loads(checked.stdout)["passed"] is True


class Flagged(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, return_sum: bool = False):
        y = torch.relu(self.fc(x)) * 2 + 1
        return (y, y.sum(dim=1)) if return_sum else y


@pytest.fixture(scope="module")
def flagged(tmp_path_factory):
    """A program that kept ``return_sum=True`` as an input (ExecuTorch takes exactly that value), lowered."""
    tmp = tmp_path_factory.mktemp("value_input")
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    program = torch.export.export(Flagged().eval(), (x,), {"return_sum": True})
    torch.export.save(program, tmp / "flagged.pt2")
    et_tensorrt.save(tmp / "flagged.pte", program, min_block_size=1)
    torch.save([x, True], tmp / "given.pt")
    torch.save([x, False], tmp / "other.pt")
    return tmp, x


def test_a_python_value_input_is_generated_given_or_refused(flagged, run_cli, capsys):
    tmp, _ = flagged
    ran = run_cli("run", "flagged.pte", cwd=tmp)
    assert ran.status == 0 and ran.noise == [], ran.stderr
    assert "input  1: bool True" in ran.stdout and "output 1: float32(2)" in ran.stdout
    assert cli.main(["run", str(tmp / "flagged.pte"), "--inputs", str(tmp / "given.pt")]) == 0
    assert cli.main(["run", str(tmp / "flagged.pte"), "--inputs", str(tmp / "other.pt")]) == cli.EXIT_ERROR
    assert capsys.readouterr().err.splitlines()[-1] == (
        "error: input 1 of method 'forward' is a value the program was exported with (bool True), which it takes as "
        "it is; got bool False: export again with the value you need"
    )
    checked = run_cli("check", "flagged.pt2", cwd=tmp)  # random inputs, the keyword value as exported
    assert checked.status == 0 and checked.noise == [], checked.stderr
    assert "check passed" in checked.stdout


def test_runner_takes_the_value_and_names_a_wrong_one(flagged):
    tmp, x = flagged
    runner = et_tensorrt.Runner(tmp / "flagged.pte")
    y, total = runner.run([x, True])
    assert torch.allclose(total, y.sum(dim=1))
    assert runner.last_plan.inputs[1].action == "value"
    with pytest.raises(
        ValueError,
        match=r"^input 1 of method 'forward' is the value the program was exported with, "
        r"True, which it takes as it is; got False",
    ):
        runner.run([x, False])
    with pytest.raises(
        ValueError,
        match=r"^input 1 of method 'forward' is a bool the program was exported with "
        r"\(True\); got a tensor: pass the value",
    ):
        runner.run([x, torch.tensor(True)])
