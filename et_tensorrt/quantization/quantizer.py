"""``TensorRTQuantizer``: PT2E quantization in TensorRT's convention.

TensorRT quantizes explicitly and symmetrically: a Q/DQ pair on each input of a layer it can run in int8, a
zero point of 0, activations per tensor, weights per output channel. XNNPACK's quantizer gives activations a
zero point (``per_tensor_affine``), which TensorRT cannot express (et_tensorrt then runs those activations in
float). This quantizer annotates what TensorRT fuses into int8 kernels — the input activation and the weight
of every convolution and linear layer — so ``convert_pt2e`` produces programs whose every Q/DQ goes into the
engine as TensorRT Q/DQ::

    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from et_tensorrt.quantization import TensorRTQuantizer

    prepared = prepare_pt2e(torch.export.export(model, args).module(), TensorRTQuantizer())
    prepared(*calibration_args)
    program = torch.export.export(convert_pt2e(prepared), args)
    et_tensorrt.lower(program)

Ranges are narrow ([-127, 127], scale = amax / 127, as TensorRT's own calibration computes it); TensorRT's
int8 Q saturates at [-128, 127], so an activation beyond the calibrated range differs by one step at most.
``get_fp8_config`` quantizes the same tensors to FP8 E4M3 per tensor (scale = amax / 448): TensorRT-RTX runs it
on compute capability 8.9 and later (lower with ``target_archs=["sm89"]`` or ``["sm120"]``). PT2E's reference
``quantize_per_tensor`` rounds to integers before its FP8 cast; TensorRT does not round, so FP8 engines are
closer to the float model than PT2E's eager FP8 reference is.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.observer import (
    HistogramObserver,
    MinMaxObserver,
    PerChannelMinMaxObserver,
)
from torchao.quantization.pt2e.quantizer import (
    QuantizationAnnotation,
    QuantizationConfig,
    QuantizationSpec,
    Quantizer,
)

aten = torch.ops.aten

# op -> (the activation's argument position, the weight's, the weight's output-channel axis)
_ANNOTATED = {
    aten.conv1d.default: (0, 1, 0),
    aten.conv2d.default: (0, 1, 0),
    aten.conv3d.default: (0, 1, 0),
    aten.linear.default: (0, 1, 0),
}
INT8_RANGE = (-127, 127)
FP8_RANGE = (-448, 448)


def get_symmetric_config(is_per_channel: bool = True) -> QuantizationConfig:
    """int8, symmetric: activations per tensor (histogram-calibrated), weights per output channel (or per
    tensor)."""
    activation = QuantizationSpec(
        dtype=torch.int8,
        quant_min=INT8_RANGE[0],
        quant_max=INT8_RANGE[1],
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=HistogramObserver.with_args(eps=2**-12),
    )
    weight = QuantizationSpec(
        dtype=torch.int8,
        quant_min=INT8_RANGE[0],
        quant_max=INT8_RANGE[1],
        qscheme=torch.per_channel_symmetric if is_per_channel else torch.per_tensor_symmetric,
        ch_axis=0 if is_per_channel else None,
        observer_or_fake_quant_ctr=PerChannelMinMaxObserver if is_per_channel else MinMaxObserver,
    )
    return QuantizationConfig(input_activation=activation, output_activation=None, weight=weight, bias=None)


def get_fp8_config() -> QuantizationConfig:
    """FP8 E4M3, symmetric, per tensor, activations and weights (TensorRT-RTX: compute capability >= 8.9)."""
    spec = QuantizationSpec(
        dtype=torch.float8_e4m3fn,
        quant_min=FP8_RANGE[0],
        quant_max=FP8_RANGE[1],
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver,
    )
    return QuantizationConfig(input_activation=spec, output_activation=None, weight=spec, bias=None)


class TensorRTQuantizer(Quantizer):
    """Annotates each convolution's and linear layer's input activation and weight with ``config`` (default
    :func:`get_symmetric_config`). Layers whose module name starts with an entry of ``skip`` stay float."""

    def __init__(self, config: QuantizationConfig | None = None, skip: tuple[str, ...] = ()):
        super().__init__()
        self.config = config or get_symmetric_config()
        self.skip = tuple(skip)

    def set_global(self, config: QuantizationConfig) -> TensorRTQuantizer:
        self.config = config
        return self

    def _skipped(self, node: Node) -> bool:
        stack = node.meta.get("nn_module_stack") or {}
        names = [path for path, _ in stack.values()]
        return any(name.startswith(prefix) for name in names for prefix in self.skip)

    def annotate(self, model: GraphModule) -> GraphModule:
        for node in model.graph.nodes:
            if node.op != "call_function" or node.target not in _ANNOTATED or self._skipped(node):
                continue
            if "quantization_annotation" in node.meta:
                continue  # a composed quantizer got there first
            act_at, weight_at, _ = _ANNOTATED[node.target]
            activation, weight = node.args[act_at], node.args[weight_at]
            if not isinstance(activation, Node) or not isinstance(weight, Node):
                continue
            node.meta["quantization_annotation"] = QuantizationAnnotation(
                input_qspec_map={activation: self.config.input_activation, weight: self.config.weight},
                _annotated=True,
            )
        return model

    def validate(self, model: GraphModule) -> None:
        pass
