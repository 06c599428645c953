"""Bad input for every command: exactly one `error:` line on stderr, nothing on stdout when the command line
is wrong, and the documented exit status: 2 for a bad command line (checked before any work), 1 for a
file that cannot be used.

The real command runs in a subprocess for each case the front door must get right; the rest run
in-process through `cli.main` (same code path, without a new interpreter per case).
"""

from __future__ import annotations

import argparse
import zipfile

import pytest
import torch

import et_tensorrt
from et_tensorrt import cli
from et_tensorrt.cli.parser import build_parser


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A real program (and lowered: net.pte), a junk file, and a program recorded on cuda (as a GPU machine saves
    it)."""
    tmp = tmp_path_factory.mktemp("files")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).eval()
    program = torch.export.export(model, (torch.randn(2, 4),))
    torch.export.save(program, tmp / "net.pt2")
    (tmp / "net.pte").write_bytes(et_tensorrt.lower(program))  # nothing delegated (min_block_size 5): no build
    (tmp / "junk.pt2").write_bytes(b"PK\x03\x04 not a zip archive" * 8)
    with zipfile.ZipFile(tmp / "net.pt2") as src, zipfile.ZipFile(tmp / "cuda.pt2", "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            if info.filename.endswith(".json"):
                data = data.replace(
                    b'"device": {"type": "cpu", "index": null}', b'"device": {"type": "cuda", "index": 0}'
                )
            dst.writestr(info, data)
    (tmp / "m.pte").write_bytes(b"\0" * 64)
    return tmp


USAGE_ERRORS = {
    "output folder missing": (("lower", "net.pt2", "-o", "missing/dir/x.pte"), "the folder", "does not exist"),
    "min-block-size -1": (("lower", "net.pt2", "-o", "x.pte", "--min-block-size", "-1"), "--min-block-size", ">= 1"),
    "repeat 0": (("run", "m.pte", "--repeat", "0"), "--repeat", ">= 1"),
    "atol -1": (("check", "net.pt2", "--atol", "-1"), "--atol", ">= 0"),
    "target-device gpu": (("lower", "net.pt2", "-o", "x.pte", "--target-device", "gpu"), "'gpu'", "cuda[:N]"),
    "target-device cpu": (("demo", "--target-device", "cpu"), "TensorRT engines run on a cuda device", ""),
    "op without namespace": (
        ("lower", "net.pt2", "-o", "x.pte", "--torch-executed-op", "relu"),
        "'relu' is not a torch op",
        "did you mean aten.relu.default",
    ),
    "op that does not exist": (
        ("check", "net.pt2", "--torch-executed-op", "aten.not_an_op.default"),
        "'aten.not_an_op.default' is not a torch op",
        "",
    ),
    "precision fp8": (("lower", "net.pt2", "-o", "x.pte", "--precision", "fp8"), "invalid choice: 'fp8'", ""),
    "missing program": (("lower", "absent.pt2", "-o", "x.pte"), "'absent.pt2' does not exist", ""),
    "no command": ((), "COMMAND", "see 'et-tensorrt --help'"),
    # issue 44, row 5: judged against the builder installed (TensorRT-RTX names no SM90) before any work
    "target-arch sm90": (("lower", "net.pt2", "-o", "x.pte", "--target-arch", "sm90"), "cannot build for 'sm90'", ""),
    "check of a method the programs lack": (("check", "a=net.pt2", "b=net.pt2", "--method", "c"), "no method 'c'", ""),
}
if not torch.cuda.is_available():  # judged against the device present
    USAGE_ERRORS["weights refit without a GPU"] = (
        ("lower", "net.pt2", "-o", "x.pte", "--weights", "refit"),
        "cannot build a weight-stripped (refittable) engine without a GPU",
        "with 'refit' on a machine with a GPU",
    )
    USAGE_ERRORS["target-arch current without a GPU"] = (
        ("check", "net.pt2", "--target-arch", "current"),
        "target 'current' is this machine's GPU, and it has none",
        "",
    )


@pytest.mark.parametrize("case", list(USAGE_ERRORS))
def test_usage_error_is_one_line_and_status_2(run_cli, files, case):
    args, *expected = USAGE_ERRORS[case]
    result = run_cli(*args, cwd=files)
    assert result.status == cli.EXIT_USAGE, result.stderr
    line = result.error_line
    assert all(text in line for text in expected), line
    assert result.stdout == ""
    assert not (files / "x.pte").exists()


def test_bogus_fallback_policy_is_a_usage_error(run_cli, files):
    result = run_cli("check", "net.pt2", cwd=files, env={"ET_TENSORRT_FALLBACK": "bogus"})
    assert result.status == cli.EXIT_USAGE
    assert "ET_TENSORRT_FALLBACK='bogus' is not one of pytorch, error" in result.error_line
    assert result.stdout == ""


def test_junk_program_is_one_line(run_cli, files):
    result = run_cli("lower", "junk.pt2", "-o", "x.pte", cwd=files)
    assert result.status == cli.EXIT_ERROR
    assert "'junk.pt2' is not a torch.export.save program" in result.error_line  # no torch.export traceback first


@pytest.mark.skipif(torch.cuda.is_available(), reason="the message for a CPU-only torch")
def test_cuda_program_on_cpu_torch_says_so(run_cli, files):
    result = run_cli("check", "cuda.pt2", cwd=files)
    assert result.status == cli.EXIT_ERROR
    line = result.error_line
    assert "holds tensors saved on a cuda device" in line and "torch.cuda.is_available() is False" in line


def test_version(run_cli, files):
    result = run_cli("--version", cwd=files)
    assert result.status == 0 and result.stderr == ""
    import et_tensorrt

    assert result.stdout.startswith(f"et-tensorrt {et_tensorrt.__version__} (torch {torch.__version__}")


def test_every_option_and_command_has_help():
    parser = build_parser(cli.COMMANDS)
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(sub.choices) == set(cli.COMMANDS)
    assert all(choice.help for choice in sub._choices_actions)
    for name, command in [("et-tensorrt", parser), *sub.choices.items()]:
        undocumented = [a.dest for a in command._actions if not a.help]
        assert not undocumented, f"{name}: {undocumented}"


# ------------------------------------------------------------------------------------------ in-process


def main_err(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return code, lines[0]


@pytest.mark.parametrize("device", ["cpu", "tpu", "cuda:x", "cuda:-1", "CUDA:0", "cuda:0:1"])
def test_lower_refuses_device_strings(files, device):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lower", str(files / "net.pt2"), "-o", str(files / "o.pte"), "--target-device", device])
    assert exc.value.code == cli.EXIT_USAGE


def test_debug_raises_instead_of_one_line(files):
    with pytest.raises(cli.CliError, match="is not a torch.export.save program"):
        cli.main(["--debug", "lower", str(files / "junk.pt2"), "-o", str(files / "o.pte")])


def test_inspect_corrupt_pte(files, capsys):
    code, line = main_err(capsys, "inspect", files / "m.pte")
    assert code == cli.EXIT_ERROR and "is not an ExecuTorch program" in line


def test_output_that_is_a_folder(files, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["lower", str(files / "net.pt2"), "-o", str(files)])
    assert exc.value.code == cli.EXIT_USAGE
    assert "is a folder" in capsys.readouterr().err


def test_input_that_is_a_folder(files, capsys):
    with pytest.raises(SystemExit):
        cli.main(["inspect", str(files)])
    assert "is not a file" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_run_cuda_without_cuda(files, capsys):
    code, line = main_err(capsys, "run", files / "net.pte", "--device", "cuda:0")
    assert code == cli.EXIT_ERROR and "CUDA is not available on this machine" in line


def test_inputs_file_must_hold_tensors_and_python_values(files, capsys):
    torch.save(["x", 1], files / "in.pt")
    code, line = main_err(capsys, "check", files / "net.pt2", "--inputs", files / "in.pt")
    assert code == cli.EXIT_ERROR
    assert "must hold a tensor, a list/tuple of tensors and Python values (bool, int, float)" in line
    assert line.endswith("it holds a list with str item(s)")


@pytest.mark.parametrize(
    "name, make, expected",
    [
        ("notes.txt", lambda p: p.write_text("hello"), "is not a torch.export.save program (not a zip archive)"),
        ("state.pt", lambda p: torch.save({"w": torch.ones(2)}, p), "is a torch.save file (a state dict, tensors"),
    ],
)
def test_a_file_that_is_not_a_program_says_what_it_is(files, capsys, name, make, expected):
    make(files / name)
    code, line = main_err(capsys, "explain", files / name)
    assert code == cli.EXIT_ERROR and expected in line
    assert "torch.export.save(torch.export.export(model, args, kwargs), 'model.pt2')" in line


def test_a_program_torch_cannot_load_names_why(files, capsys):
    """torch.export.load logs its reason and raises "check the warnings above": the error carries the reason."""
    with zipfile.ZipFile(files / "net.pt2") as src, zipfile.ZipFile(files / "broken.pt2", "w") as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            dst.writestr(info, b'{"graph_module": 1}' if info.filename.endswith("models/model.json") else data)
    code, line = main_err(capsys, "explain", files / "broken.pt2")
    assert code == cli.EXIT_ERROR
    assert "broken.pt2' could not be loaded by torch.export.load (" in line and "warnings above" not in line


class _Frames(torch.nn.Module):
    """Audio in frames of 20 samples (as Wav2Vec2's feature extractor reads it): its length a multiple of 20."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(1, 4, kernel_size=20, stride=20)

    def forward(self, x):
        return torch.relu(self.conv(x.unsqueeze(1)))


def test_a_saved_program_with_a_derived_dim_says_what_to_do(files, capsys):
    """Issue 54 row 2: torch.export.load rebuilds a derived dim (``20 * Dim``) so that decomposing the program fails
    ("AssertionError: expected sympy.Symbol"); the command says why and what to do instead. The same range as a
    dim of its own loads."""
    from torch.export import Dim

    example = (torch.randn(1, 8000),)
    derived = {"x": {1: 20 * Dim("_samples", min=200, max=1600)}}
    torch.export.save(torch.export.export(_Frames(), example, dynamic_shapes=derived), files / "frames.pt2")
    code, line = main_err(capsys, "lower", files / "frames.pt2", "-o", files / "frames.pte")
    assert code == cli.EXIT_ERROR and "expected sympy.Symbol" in line and "Traceback" not in line
    assert line.startswith(
        f"error: {files / 'frames.pt2'} has a derived dynamic dim (x dim 1 = 20*s"
    ) and line.endswith(
        "lower the ExportedProgram torch.export.export returns from Python (et_tensorrt.save('model.pte', program)), "
        "or export that dim directly (Dim('samples', min=4000, max=32000), not a multiple of another Dim) and save "
        "again"
    )
    direct = {"x": {1: Dim("samples", min=4000, max=32000)}}
    torch.export.save(torch.export.export(_Frames(), example, dynamic_shapes=direct), files / "direct.pt2")
    assert cli.main(["lower", str(files / "direct.pt2"), "-o", str(files / "direct.pte")]) in (
        0,
        4,
    )  # 4: none delegated
