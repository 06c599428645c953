"""A partition's ONNX with its weights outside the protobuf: the one place that splits them off and feeds them back.

A protobuf message holds at most 2 GiB, so an ONNX model that carries its weights inline cannot describe an
LLM (serializing one fails with a bare ``EncodeError``). The export keeps every initializer of at least
``threshold`` bytes out of the ``ModelProto``: there it is an external reference (``data_location`` EXTERNAL,
location :data:`LOCATION`, no file behind it), and its bytes are held in memory as a ``torch.Tensor`` by name —
the program's own tensor (a view, no copy) where the exporter used it as it is, the exporter's new tensor where
it made one (a cast to fp16, a folded constant). Nothing ever serializes the weights into a protobuf:

* TensorRT's parser gets the graph with ``load_model_proto``, each external weight with ``load_initializer``
  (a pointer into the tensor, which must outlive the parser), then ``parse_model_proto`` (:func:`parse_tensorrt`);
* onnxruntime gets the graph with each external weight as a graph input, bound at each run as an ``OrtValue`` over
  the tensor's memory (it would copy external initializers; :class:`OnnxRuntimeSession`);
* the build cache's ONNX identity (:func:`digest`) and the refit derivation (:func:`initializers`) read the tensors
  where they are.

What is left in the protobuf (the graph, small constants) must still fit 2 GiB: :func:`check_proto_size` refuses
a larger one before the step that would serialize it, naming the step and the size.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from et_tensorrt.errors import EngineBuildError

if TYPE_CHECKING:
    import onnx


class HeldModel(Protocol):
    """What this module reads of an export (``builder/onnx_export.OnnxExport``, which imports this module): the graph,
    its bytes, and the tensors of its external initializers by name."""

    model: onnx.ModelProto
    initializers: dict[str, torch.Tensor]

    @property
    def model_bytes(self) -> bytes: ...


# Initializers of at least this many bytes stay out of the protobuf (onnx's own default for external data).
# 0: all of them. Empty initializers always stay inline (there is nothing to hold).
DEFAULT_THRESHOLD = 1024
LOCATION = "et_tensorrt:in-memory"  # the external references' location: no file is behind it
PROTO_LIMIT = 2**31 - 1  # the largest protobuf message (bytes)
# onnxruntime's shape inference reads the values of shape inputs (Reshape's shape, Slice's starts) before it takes
# the external initializers, and fails on an external one: it gets those below this size inline (a threshold forced
# under it is the only way a shape constant is external).
ORT_INLINE_BYTES = 64 * 1024

_ONNX_TO_TORCH = {
    1: torch.float32,
    2: torch.uint8,
    3: torch.int8,
    4: torch.uint16,
    5: torch.int16,
    6: torch.int32,
    7: torch.int64,
    9: torch.bool,
    10: torch.float16,
    11: torch.float64,
    12: torch.uint32,
    13: torch.uint64,
    16: torch.bfloat16,
    17: torch.float8_e4m3fn,
    18: torch.float8_e4m3fnuz,
    19: torch.float8_e5m2,
    20: torch.float8_e5m2fnuz,
}


# Sub-byte element types (UINT4, INT4, FLOAT4E2M1: quantized weights, two per byte, low nibble first): held as
# their packed bytes in a 1-D uint8 tensor, which is what TensorRT's load_initializer and a raw_data field take.
PACKED_TYPES = frozenset({21, 22, 23})


def _packed(data: bytes) -> torch.Tensor:
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8)


def torch_dtype(onnx_type: int) -> torch.dtype | None:
    """The torch dtype of an ONNX ``TensorProto.DataType`` code (None: torch has none this module handles)."""
    return _ONNX_TO_TORCH.get(onnx_type)


def _size(nbytes: int) -> str:
    return f"{nbytes / 2**30:.2f} GiB" if nbytes >= 2**30 else f"{nbytes / 2**20:.1f} MiB"


def check_proto_size(step: str, nbytes: int) -> None:
    """Refuse, before ``step``, a protobuf that would not fit the 2 GiB a protobuf message can hold."""
    if nbytes > PROTO_LIMIT:
        raise EngineBuildError(
            f"{step}: the partition's ONNX graph is {_size(nbytes)} without its external weights, and a protobuf "
            "holds at most 2 GiB; split the model into smaller partitions (min_block_size, torch_executed_ops) "
            "or report the model"
        )


def _as_tensor(value) -> torch.Tensor:
    """The bytes of an onnx_ir tensor as a contiguous host ``torch.Tensor``: the program's own tensor when the
    exporter kept it (``TorchTensor``), a view of the exporter's numpy array otherwise; a copy only when
    neither exposes its memory."""
    if int(value.dtype) in PACKED_TYPES:
        return _packed(value.tobytes())
    raw = getattr(value, "raw", None)
    if isinstance(raw, torch.Tensor):
        return raw.detach().to("cpu").contiguous()  # no copy for a dense host tensor
    dtype = torch_dtype(int(value.dtype))
    if isinstance(raw, np.ndarray) and dtype is not None and raw.flags.c_contiguous:
        flat = torch.from_numpy(raw.reshape(-1).view(np.uint8)) if raw.size else torch.empty(0, dtype=torch.uint8)
        return flat.view(dtype).reshape(tuple(value.shape.numpy()))
    if dtype is None:
        raise EngineBuildError(
            f"ONNX initializer {value.name!r} has element type {value.dtype}, which et_tensorrt cannot hold outside "
            "the protobuf; report the model"
        )
    data = bytearray(value.tobytes())
    flat = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
    return flat.reshape(tuple(value.shape.numpy()))


def split_model(model, threshold: int = DEFAULT_THRESHOLD) -> tuple[onnx.ModelProto, dict[str, torch.Tensor]]:
    """An onnx_ir ``Model`` as a ``ModelProto`` whose initializers of at least ``threshold`` bytes (0: all) are
    external references, and those initializers' tensors by name. ``model`` is left as it was."""
    import onnx_ir as ir

    held: dict[str, torch.Tensor] = {}
    swapped = []
    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if tensor is None or tensor.nbytes == 0 or tensor.nbytes < threshold:
            continue
        held[name] = _as_tensor(tensor)
        swapped.append((value, tensor))
        value.const_value = ir.ExternalTensor(
            location=LOCATION, offset=None, length=tensor.nbytes, dtype=tensor.dtype, shape=tensor.shape, name=name
        )
    try:
        proto = ir.serde.serialize_model(model)
    finally:
        for value, tensor in swapped:
            value.const_value = tensor
    check_proto_size("ONNX export", proto.ByteSize())
    return proto, held


def is_external(init) -> bool:
    import onnx

    return init.data_location == onnx.TensorProto.EXTERNAL


def checkable(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``proto`` that ``onnx.checker`` can check: each external initializer becomes a graph input of its
    type and shape (the checker would look for the file an external reference names)."""
    import onnx

    if not any(is_external(i) for i in proto.graph.initializer):
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    kept = [i for i in copy.graph.initializer if not is_external(i)]
    inputs = [
        onnx.helper.make_tensor_value_info(i.name, i.data_type, list(i.dims))
        for i in copy.graph.initializer
        if is_external(i)
    ]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    copy.graph.input.extend(inputs)
    return copy


def _inline_tensor(init) -> torch.Tensor:
    from onnx import numpy_helper

    if init.data_type in PACKED_TYPES:
        return _packed(init.raw_data)
    dtype = torch_dtype(init.data_type)
    if dtype is None:
        raise EngineBuildError(f"ONNX initializer {init.name!r} has element type {init.data_type}, which torch lacks")
    data = bytearray(numpy_helper.to_array(init).tobytes())
    flat = torch.frombuffer(data, dtype=dtype) if data else torch.empty(0, dtype=dtype)
    return flat.reshape(tuple(init.dims))


def initializers(export: HeldModel) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of every initializer of the export, in the graph's order, as the builder sees them: the held
    tensors for the external ones (no copy), the protobuf's bytes decoded for the inline ones."""
    for init in export.model.graph.initializer:
        if is_external(init):
            tensor = export.initializers.get(init.name)
            if tensor is None:
                raise EngineBuildError(f"ONNX initializer {init.name!r} is external; the export holds no tensor for it")
            yield init.name, tensor
        else:
            yield init.name, _inline_tensor(init)


def _byte_view(tensor: torch.Tensor) -> memoryview:
    flat = tensor.reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else memoryview(b"")


def digest(export: HeldModel) -> str:
    """SHA-256 of the ONNX model the builder sees: the graph's bytes, then each external initializer's name and
    the SHA-256 of its bytes."""
    from et_tensorrt.builder.named_data import tensor_digest  # local: named_data imports exir (not on the device)

    h = hashlib.sha256(export.model_bytes)
    for name in sorted(export.initializers):
        h.update(name.encode("utf-8"))
        h.update(tensor_digest(export.initializers[name]))  # once per tensor and process
    return h.hexdigest()


def external_nbytes(export: HeldModel) -> int:
    return sum(t.numel() * t.element_size() for t in export.initializers.values())


def parse_tensorrt(parser, export: HeldModel) -> bool:
    """TensorRT's ONNX parser fed the graph, then each external weight from memory (the tensors in
    ``export.initializers`` must outlive the parser and the network it fills). False: the parser refused it
    (its errors say why); EngineBuildError: a weight it would not take."""
    if not export.initializers:
        return parser.parse(export.model_bytes)
    if not parser.load_model_proto(export.model_bytes):
        return False
    for name, tensor in export.initializers.items():
        if not parser.load_initializer(name, tensor.data_ptr(), tensor.numel() * tensor.element_size()):
            raise EngineBuildError(
                f"TensorRT's ONNX parser refused the weight {name!r} ({tensor.dtype} {tuple(tensor.shape)}) "
                "handed to it from memory; report the model"
            )
    return parser.parse_model_proto()


_BITS = {1: torch.uint8, 2: torch.uint16}  # element size -> the unsigned type numpy holds a dtype's bits in


def _ort_value(tensor: torch.Tensor, onnx_type: int):
    """An OrtValue of ONNX type ``onnx_type`` over the tensor's memory (no copy); a dtype numpy lacks (bfloat16,
    float8) as its bits."""
    import onnxruntime as ort

    if tensor.dtype == torch.bfloat16 or tensor.dtype.is_floating_point and tensor.element_size() == 1:
        bits = tensor.view(_BITS[tensor.element_size()]).numpy()
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx_type)
    return ort.OrtValue.ortvalue_from_numpy(tensor.numpy())


def _for_onnxruntime(export: HeldModel, small: set[str]) -> bytes:
    """The graph onnxruntime loads: the external initializers in ``small`` inline (a copy of each: shape constants
    its shape inference reads), every other one a graph input of its type and shape, fed at each run."""
    import onnx

    protos = {i.name: i for i in export.model.graph.initializer}
    model = checkable(export.model)  # the graph itself when nothing is external
    if small:
        # type and dims from the graph's own reference (a packed INT4 tensor's bytes are not its logical shape)
        model.graph.initializer.extend(
            onnx.helper.make_tensor(
                name,
                protos[name].data_type,
                list(protos[name].dims),
                _byte_view(export.initializers[name]).tobytes(),
                raw=True,
            )
            for name in sorted(small)
        )
        kept = [i for i in model.graph.input if i.name not in small]
        del model.graph.input[:]
        model.graph.input.extend(kept)
    check_proto_size("onnxruntime validation", model.ByteSize())
    return model.SerializeToString()


class OnnxRuntimeSession:
    """An onnxruntime ``InferenceSession`` of the export whose weights are its held tensors, bound at each run as
    ``OrtValue`` inputs over their memory (``run_with_iobinding``): onnxruntime copies external initializers into
    buffers of its own (measured with 1.32: the weights' size again), bound inputs it reads in place."""

    def __init__(self, export: HeldModel, options=None, providers=("CPUExecutionProvider",)):
        import onnxruntime as ort

        options = options or ort.SessionOptions()
        types = {i.name: i.data_type for i in export.model.graph.initializer}
        # Inline: shape constants (below ORT_INLINE_BYTES), and packed sub-byte initializers (an OrtValue cannot
        # hold "int4": its bytes go inline, half a byte a weight).
        small = {
            n
            for n, t in export.initializers.items()
            if t.numel() * t.element_size() < ORT_INLINE_BYTES or types.get(n) in PACKED_TYPES
        }
        self._session = ort.InferenceSession(_for_onnxruntime(export, small), options, providers=list(providers))
        read = {i.name for i in self._session.get_inputs()}  # a weight the graph does not read may be dropped
        self._weights = {
            n: _ort_value(t, types[n]) for n, t in export.initializers.items() if n not in small and n in read
        }
        self.input_names = [i.name for i in self._session.get_inputs() if i.name not in self._weights]

    def run(self, outputs: list[str], feeds: dict) -> list:
        """``feeds``: input name -> numpy array; the outputs as numpy arrays."""
        binding = self._session.io_binding()
        for name, value in feeds.items():
            binding.bind_cpu_input(name, value)
        for name, value in self._weights.items():
            binding.bind_ortvalue_input(name, value)
        for name in outputs:
            binding.bind_output(name)
        self._session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()


def onnxruntime_session(export: HeldModel, options=None, providers=("CPUExecutionProvider",)) -> OnnxRuntimeSession:
    """onnxruntime on the export, its weights read in place (:class:`OnnxRuntimeSession`); ``options`` as the
    caller sets them (quantized validation turns graph optimizations off)."""
    return OnnxRuntimeSession(export, options, providers)
