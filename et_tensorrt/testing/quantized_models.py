"""Quantized models as ExecuTorch users make them (the cases of issue 28), for the tests and
``scripts/bench_quantized.py``: one place that says how each case is quantized.

* ``pt2e_xnnpack``: PT2E with ExecuTorch's ``XNNPACKQuantizer`` and ``get_symmetric_quantization_config(
  is_per_channel=True)`` (int8 weights per channel; int8 activations per tensor *with a zero point*).
* ``pt2e_tensorrt``: PT2E with :class:`et_tensorrt.quantization.TensorRTQuantizer` (symmetric int8 activations
  per tensor, weights per channel: every Q/DQ stays in the engine).
* ``int8_weight_only``: torchao ``IntxWeightOnlyConfig(int8, PerAxis(0))`` (ExecuTorch's LLM mode ``int8``).
* ``int4_weight_only``: torchao ``IntxWeightOnlyConfig(int4, PerGroup(32))`` (the LLM mode ``4w``).
* ``8da4w``: torchao ``Int8DynamicActivationIntxWeightConfig(int4, PerGroup(32))`` (the LLM mode ``8da4w``:
  dynamic per-token int8 activations, which TensorRT cannot express; its *weight-only reading*,
  :func:`weight_only_reading`, is what the engine computes).

Nothing is downloaded: the models are random-initialized, calibrated on random inputs (seeded).
"""

from __future__ import annotations

import copy

import torch

PT2E_CASES = ("pt2e_xnnpack", "pt2e_tensorrt")
TORCHAO_CASES = ("int8_weight_only", "int4_weight_only", "8da4w")
GROUP_SIZE = 32


class ConvNet(torch.nn.Module):
    """Strided 3x3 convolutions, then a linear classifier over the channel means. ``widths``: the channels
    (the bench's is the issue's 9 MB of fp32 weights)."""

    def __init__(self, widths=(16, 32)):
        super().__init__()
        channels = (3, *widths)
        self.convs = torch.nn.ModuleList(
            torch.nn.Conv2d(a, b, 3, stride=2 if i else 1, padding=1)
            for i, (a, b) in enumerate(zip(channels, channels[1:]))
        )
        self.head = torch.nn.Linear(channels[-1], 10)

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
        return self.head(x.mean(dim=(2, 3)))


class Mlp(torch.nn.Module):
    """``layers`` linear layers of ``width`` with ReLU between (the bench's: 4 x 1024, the issue's 17 MB)."""

    def __init__(self, width: int = 128, layers: int = 2):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


def torchao_config(case: str):
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    if case == "int8_weight_only":
        return IntxWeightOnlyConfig(weight_dtype=torch.int8, granularity=PerAxis(0))
    if case == "int4_weight_only":
        return IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(GROUP_SIZE))
    if case == "8da4w":
        return Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4, weight_granularity=PerGroup(GROUP_SIZE))
    raise ValueError(f"unknown torchao case {case!r}; expected one of {TORCHAO_CASES}")


def quantize_torchao(model: torch.nn.Module, case: str) -> torch.nn.Module:
    """A quantized copy of ``model`` as the torchao case quantizes it."""
    return quantize_torchao_with(model, torchao_config(case))


def quantize_torchao_with(model: torch.nn.Module, config) -> torch.nn.Module:
    """A copy of ``model`` quantized with the torchao ``config`` (torchao's ``quantize_``, as ExecuTorch's LLM
    export does it)."""
    from torchao.quantization import quantize_

    model = copy.deepcopy(model).eval().requires_grad_(False)
    quantize_(model, config)
    return model


def weight_only_reading(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of a torchao-quantized model whose weights keep their quantization and whose activations are not
    quantized (what TensorRT runs for 8da4w: its dynamic per-token activations are dropped)."""
    model = copy.deepcopy(model)
    for module in model.modules():
        weight = getattr(module, "weight", None)
        if hasattr(weight, "activation_quantization"):
            weight.activation_quantization = None
    return model


def pt2e_quantizer(case: str):
    """The PT2E case's quantizer."""
    if case == "pt2e_xnnpack":
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )

        return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    if case == "pt2e_tensorrt":
        from et_tensorrt.quantization import TensorRTQuantizer

        return TensorRTQuantizer()
    raise ValueError(f"unknown PT2E case {case!r}; expected one of {PT2E_CASES}")


def quantize_pt2e(model: torch.nn.Module, inputs: tuple, case: str) -> torch.nn.Module:
    """The PT2E case's quantized model (:func:`quantize_pt2e_with` the case's quantizer)."""
    return quantize_pt2e_with(model, inputs, pt2e_quantizer(case))


def quantize_pt2e_with(model: torch.nn.Module, inputs: tuple, quantizer) -> torch.nn.Module:
    """PT2E: export, ``prepare_pt2e`` with ``quantizer``, calibrate on ``inputs``, ``convert_pt2e``. The result (a
    GraphModule of Q/DQ ops) is the quantized eager model; export it to lower it."""
    from torchao.quantization.pt2e import allow_exported_model_train_eval
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    with torch.no_grad():
        prepared = prepare_pt2e(torch.export.export(model.eval(), inputs).module(), quantizer)
        prepared(*inputs)
        converted = convert_pt2e(prepared)
    allow_exported_model_train_eval(converted)  # the harness calls .eval() on the module it is given
    return converted


def quantize(case: str, model: torch.nn.Module, inputs: tuple) -> torch.nn.Module:
    """The case's quantized model (see the module doc)."""
    if case in PT2E_CASES:
        return quantize_pt2e(model, inputs, case)
    return quantize_torchao(model, case)


def reference(case: str, quantized: torch.nn.Module) -> torch.nn.Module:
    """What an engine of this case computes in eager PyTorch: the quantized model itself, or for 8da4w its
    weight-only reading."""
    return weight_only_reading(quantized) if case == "8da4w" else quantized


def refused_before_any_work(model: torch.nn.Module, inputs: tuple, match: str | None = None, **options):
    """Lower ``model`` (``min_block_size=1`` unless ``options`` say otherwise), expecting a
    :class:`~et_tensorrt.QuantizationError` (its message matching ``match``) raised before any partition was
    preprocessed; returns pytest's ``ExceptionInfo``."""
    import pytest

    import et_tensorrt
    from et_tensorrt.backend import stages

    before = stages.job.stats["partitions"]
    with pytest.raises(et_tensorrt.QuantizationError, match=match) as info:
        et_tensorrt.lower(model, inputs, **{"min_block_size": 1, **options})
    assert stages.job.stats["partitions"] == before, "a partition was preprocessed before the refusal"
    return info
