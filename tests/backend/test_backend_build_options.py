"""BuildOptions: the one description of engine build options (checked values, compile-spec round trip), and
`lower` checking every option before any work."""

from __future__ import annotations

import pytest
import torch

import et_tensorrt
from et_tensorrt import compile_specs as cs
from et_tensorrt.compile_specs import BuildOptions
from et_tensorrt.errors import OptionError


def test_defaults_and_spec_round_trip():
    default = BuildOptions()
    assert (default.precision, default.target_archs, default.validate) == ("fp32", (), False)
    assert default.pass_through_build_failures is True and default.workspace_bytes is None
    assert default.unbounded_max_factor == 2
    options = BuildOptions(precision="FP16", target_archs="sm80, SM86", validate=True, workspace_bytes=1 << 20)
    assert options.precision == "fp16" and options.target_archs == ("sm80", "sm86")
    specs = options.to_specs()
    assert specs[cs.PRECISION] == "fp16" and specs[cs.TARGET_ARCHS] == "sm80,sm86" and specs[cs.VALIDATE] == "1"
    assert cs.WORKSPACE_BYTES in specs and cs.WORKSPACE_BYTES not in default.to_specs()
    assert BuildOptions.from_specs(specs) == options
    assert BuildOptions.from_specs(cs.encode({**specs, cs.EXECUTION_DEVICE: "cuda:0"})) == options  # CompileSpecs
    assert set(BuildOptions.keys().values()) | set(cs.PARTITIONER_KEYS) == cs.KNOWN_KEYS


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"precision": "fp8"}, "precision 'fp8' is not one of fp32, fp16, bf16"),
        ({"target_archs": ["sm80", "gpu"]}, "['gpu'] are not architecture names"),
        ({"validate": "maybe"}, "validate must be true or false"),
        ({"workspace_bytes": 0}, "workspace_bytes must be an integer >= 1"),
        ({"unbounded_max_factor": "two"}, "unbounded_max_factor must be an integer >= 1"),
    ],
)
def test_bad_values_are_option_errors(changes, message):
    with pytest.raises(OptionError, match=message.replace("[", r"\[").replace("]", r"\]")):
        BuildOptions(**changes)
    specs = {**BuildOptions().to_specs(), **{BuildOptions.keys()[k]: str(v) for k, v in changes.items()}}
    with pytest.raises(OptionError):
        BuildOptions.from_specs(specs)


class _ExportWouldFail(torch.nn.Module):
    def forward(self, x):
        raise AssertionError("the model was exported: options were not checked first")


@pytest.mark.parametrize(
    "options, error",
    [
        ({"precision": "fp8"}, OptionError),
        ({"et_tensorrt.precision": "fp8"}, OptionError),
        ({"min_block_size": 0}, ValueError),
        ({"target_device": "cpu"}, ValueError),
        ({"precison": "fp16"}, TypeError),
        ({"et_tensorrt.not_an_option": 1}, TypeError),
        ({"target_archs": ["sm90"]}, OptionError),  # TensorRT-RTX 1.7.1 names no SM90: judged against the builder
    ],
)
def test_lower_checks_options_before_any_work(options, error):
    with pytest.raises(error):
        et_tensorrt.lower(_ExportWouldFail(), (torch.randn(2, 2),), **options)


def test_keywords_override_build_options_fields():
    from et_tensorrt.lowering import _split_options

    partitioner, build = _split_options({"precision": "fp16", "min_block_size": 3}, BuildOptions(validate=True))
    assert partitioner == {"min_block_size": 3}
    assert build == BuildOptions(precision="fp16", validate=True)


def test_a_model_already_in_fp16_lowers_with_precision_fp16():
    """Its partition's results are fp16: the engine returns them as they are (not widened to fp32), and no weight
    is copied to be cast (they already are)."""
    from et_tensorrt.format.blob import read_blob
    from et_tensorrt.inspection import delegate_blobs

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval().half()
    x = torch.randn(4, 16, dtype=torch.float16)
    pte = et_tensorrt.lower(model, (x,), min_block_size=1, precision="fp16", cache=False)
    (blob,) = [read_blob(b) for b in delegate_blobs(pte)]
    assert [e.dtype for e in blob.io] == [5, 5]  # Half in, Half out
    got = et_tensorrt.Runner(pte).run([x])[0]
    torch.testing.assert_close(got, model(x), rtol=1e-2, atol=1e-2)
