"""Every exception and warning et_tensorrt raises, in one place.

The native module (`et_tensorrt._C`) translates its C++ errors into these classes, so Python code can
catch one type whichever side found the problem.
"""


class UnsupportedDeviceError(ValueError):
    """A tensor lives on a device the ExecuTorch runtime does not model (only cpu and cuda)."""


class LayoutError(ValueError):
    """A tensor's strides are not dense (expanded, stepped, negative or overlapping)."""


class UnsupportedDtypeError(TypeError):
    """A tensor's dtype has no ExecuTorch ScalarType (or TensorRT cannot take it)."""


class BlobFormatError(ValueError):
    """A delegate blob is truncated, damaged, or of a format version this build does not read."""


class ProgramRefusedError(BlobFormatError):
    """The program embedded in a delegate blob holds something the safe loader refuses to load: a pickled,
    custom (torchbind) or opaque payload, code (an expression, op or name torch would evaluate), or an entry
    it does not know. The message names the entry. See docs/security.md."""


class EngineRefusedError(RuntimeError):
    """A TensorRT engine needs host code (an embedded lean runtime or plugin library) to load, and running
    code from a file is not allowed (set ET_TENSORRT_TRUST_ENGINE_CODE=1 only for engines you trust)."""


class EngineBuildError(RuntimeError):
    """TensorRT (or the ONNX export before it) refused a partition; the message names the op."""


class ValidationError(RuntimeError):
    """The exported ONNX graph does not compute what PyTorch computes for the partition."""


class PartitionError(ValueError):
    """`require_full_compilation=True` and some node must stay on the host."""


class QuantizationError(PartitionError):
    """A quantized program holds a quantize/dequantize TensorRT cannot run (an asymmetric weight, a quantized
    op that would stay on the host, where ExecuTorch has no kernel for it) or, with ``strict_quantization``, an
    activation quantization it would run in float. Raised by the partitioner, before any engine is built; the
    message names the node, its op and what to do."""


class PlacementError(RuntimeError):
    """The delegate cannot place an input or output (dtype, shape or device it cannot take)."""


class InputShapeError(ValueError):
    """An input's shape is not one the method takes (a static dim that differs, or above a dynamic bound)."""


class RunnerError(RuntimeError):
    """ExecuTorch could not load or run a program; the message carries the delegate's own error."""


class OptionError(ValueError):
    """An option's value is not valid (``lower(precision="fp8")``); raised before any work is done."""


class DynamicRangeWarning(UserWarning):
    """A dynamic dim the lowered program takes over less than the range it was exported with."""


class PlacementWarning(UserWarning):
    """A node's device would otherwise have been dropped (it is kept on the host instead)."""


class QuantizationWarning(UserWarning):
    """Activation quantization TensorRT cannot express (a nonzero zero point, dynamic or per-token scales) was
    dropped: those activations run in the engine's float precision, the weights stay quantized."""


class UnmatchedOpWarning(UserWarning):
    """A ``torch_executed_ops`` entry matched no node of the program, so it kept nothing on the host."""


class StateSharingError(ValueError):
    """A state several methods of one program declare cannot be one buffer: at lowering (another shape, dtype or
    initial contents) or at init (no way to tell which loaded program a delegate belongs to, another device)."""
