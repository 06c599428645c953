"""The argparse tree. Every value is checked here, before any work: a bad one is one ``error:`` line and
exit status 2. Building the tree imports no torch (a second or more): a value that needs it (an op
name) imports it when it is parsed, so ``--help`` and most argument errors answer at once."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from typing import NamedTuple

from ..compile_specs import NAMED_DATA_MODES, PRECISIONS, WEIGHTS_MODES, BuildOptions
from ..errors import EngineBuildError, OptionError
from ..parity import TOLERANCES
from .common import EXIT_USAGE

_DEVICE_RE = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse prints usage + message; one line is enough
        sys.stderr.write(f"error: {message} (see '{self.prog} --help')\n")
        sys.exit(EXIT_USAGE)


class DeviceArg(NamedTuple):
    """A device from the command line: ``str()`` is what torch and the lowering take (``cuda:0``); no torch import
    to parse it, so that a refused file or value answers at once."""

    type: str  # "cpu" or "cuda"
    index: int | None = None

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"


def parse_device(text: str, *, allow_cpu: bool) -> DeviceArg:
    """``cpu`` / ``cuda`` / ``cuda:N`` (no torch parsing surprises such as ``cuda:-1`` or ``meta``)."""
    m = _DEVICE_RE.match(text.strip())
    allowed = "cpu or cuda[:N]" if allow_cpu else "cuda[:N]"
    if m is None or (m.group(1) == "cpu" and m.group(2) is not None):
        raise argparse.ArgumentTypeError(f"{text!r} is not a supported device string (expected {allowed})")
    if m.group(1) == "cpu":
        if not allow_cpu:
            raise argparse.ArgumentTypeError(f"{text!r}: TensorRT engines run on a cuda device (expected {allowed})")
        return DeviceArg("cpu")
    return DeviceArg("cuda", int(m.group(2) or 0))


def _engine_device(text: str) -> DeviceArg:
    return parse_device(text, allow_cpu=False)


def _host_or_cuda(text: str) -> DeviceArg:
    return parse_device(text, allow_cpu=True)


def _integer_at_least(low: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value

    return parse


_at_least_one = _integer_at_least(1)
_at_least_zero = _integer_at_least(0)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _probability(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}")
    return value


def _int64(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not -(2**63) <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be an integer that fits int64, got {text!r}")
    return value


def _existing_file(text: str) -> str:
    if not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text!r} does not exist")
    if not os.path.isfile(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    return text


def _method_program(text: str) -> tuple[str | None, str]:
    """``PROGRAM.pt2`` -> (None, path); ``METHOD=PROGRAM.pt2`` -> (method, path)."""
    name, sep, path = text.partition("=")
    if sep and name.isidentifier() and not os.path.exists(text):
        return name, _existing_file(path)
    return None, _existing_file(text)


def _output_file(text: str) -> str:
    folder = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder; name the file to write")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: the folder {folder!r} is not writable")
    return text


def _constant_methods(text: str) -> dict:
    """``--constant-methods``: a JSON object (ExecuTorch's export_llama takes its ``--metadata`` so), checked."""
    import json

    from ..llm.constants import check_constant_methods

    try:
        methods = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON ({e}): give an object, e.g. '{{\"get_bos_id\": 1}}'") from None
    try:
        return check_constant_methods(methods, "--constant-methods")
    except OptionError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--constant-methods: ")) from None


def _target_arch(text: str) -> str:
    """An architecture name the installed builder can target (``sm86``); ``current`` is judged with the device."""
    from .. import trt

    try:
        arch = BuildOptions(target_archs=(text,)).target_archs[0]
    except OptionError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    try:
        problem = trt.default().target_problem(arch)
    except EngineBuildError:
        return arch  # no builder here: the lowering says what to install
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return arch


def _aten_packets() -> list[str]:
    import torch

    return sorted(
        {n.split("::", 1)[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::")}
    )


def torch_op_name(text: str) -> str:
    """An op name as the partitioner matches it (``aten.relu.default`` or the packet ``aten.relu``). aten ops
    are checked against torch's registry here; other namespaces once the partitioner sees the program."""
    import torch

    name = text.strip()
    parts = name.split(".")
    if 2 <= len(parts) <= 3 and all(parts):
        if parts[0] != "aten":
            return name
        packet = getattr(torch.ops.aten, parts[1], None)
        if packet is not None and (len(parts) == 2 or parts[2] in packet.overloads()):
            return name
    bare = parts[1] if len(parts) >= 2 and parts[0] == "aten" else parts[0]
    packet = getattr(torch.ops.aten, bare, None) if bare.isidentifier() else None
    if packet is not None:
        overloads = sorted((o for o in packet.overloads() if not o.startswith("out")), key=lambda o: o != "default")
        close = [f"aten.{bare}.{o}" for o in overloads[:3]]
    else:
        close = [f"aten.{p}.default" for p in difflib.get_close_matches(bare, _aten_packets(), n=3, cutoff=0.6)]
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise argparse.ArgumentTypeError(f"{text!r} is not a torch op (expected namespace.op.overload){hint}")


def _version() -> str:
    """The installed distributions' versions, from their metadata: nothing is imported."""
    from importlib import metadata

    from .. import __version__

    def installed(dist: str) -> str | None:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return None

    tensorrt = next(
        (f"{d} {installed(d)}" for d in ("tensorrt", "tensorrt-rtx", "tensorrt_rtx") if installed(d)),
        "no TensorRT package",
    )
    return (
        f"et-tensorrt {__version__} (torch {installed('torch')}, executorch {installed('executorch')}, "
        f"{tensorrt}, onnxruntime {installed('onnxruntime')})"
    )


class _VersionAction(argparse.Action):
    """``--version``: the versions are read only when asked for."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest=dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version())
        parser.exit()


def _torch_executed_op(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--torch-executed-op",
        action="append",
        type=torch_op_name,
        metavar="OP",
        default=[],
        help="keep this op on the host, e.g. aten.sigmoid.default (repeatable); an op that matches no "
        "node of the program is an error",
    )


def _lowering_options(p: argparse.ArgumentParser, *, full: bool = True) -> None:
    p.add_argument(
        "--target-device",
        type=_engine_device,
        default="cuda:0",  # a string default goes through `type` once parsing is done
        metavar="DEVICE",
        help="the engines' device, cuda or cuda:N (default cuda:0)",
    )
    p.add_argument(
        "--min-block-size",
        type=_at_least_one,
        default=5,
        metavar="N",
        help="smallest partition (compute nodes) worth an engine (default 5)",
    )
    if not full:
        return
    _torch_executed_op(p)
    defaults = BuildOptions()
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=defaults.precision,
        help=f"{BuildOptions.describe()['precision']} (default {defaults.precision})",
    )
    p.add_argument(
        "--weights",
        choices=WEIGHTS_MODES,
        default=defaults.weights,
        help=f"{BuildOptions.describe()['weights']} (default {defaults.weights})",
    )
    p.add_argument(
        "--named-data",
        choices=NAMED_DATA_MODES,
        default=None,
        help=f"{BuildOptions.describe()['named_data']} (default {defaults.named_data}; ptd needs -o)",
    )
    p.add_argument(
        "--target-arch",
        action="append",
        type=_target_arch,
        metavar="ARCH",
        default=[],
        help="a GPU the engines are built for ahead of time, e.g. sm86 (repeatable; TensorRT-RTX only; "
        "default: the builder's)",
    )
    p.add_argument(
        "--strict-quantization",
        action="store_true",
        help="refuse activation quantization TensorRT cannot express (a nonzero zero point, dynamic or per-token "
        "scales) instead of running those activations in float (default: run them in float, with a warning)",
    )
    p.add_argument(
        "--zero-copy-inputs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="leave method inputs out of ExecuTorch's memory plan so the delegate sees the "
        "caller's pointers (default on)",
    )
    p.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=defaults.cache,
        help="reuse engines from the build cache and store new ones (see `et-tensorrt cache`; default on)",
    )
    p.add_argument(
        "--device-build",
        action=argparse.BooleanOptionalAction,
        default=defaults.device_build,
        help=f"{BuildOptions.describe()['device_build']} (default {'on' if defaults.device_build else 'off'})",
    )
    p.add_argument(
        "--cuda-graph",
        nargs="?",
        const=True,
        action="append",
        metavar="METHOD",
        help="on a GPU, replay the calls of METHOD (repeatable; every method without one) as a CUDA graph once "
        "their shapes repeat: one launch per decode step (default off; ET_TENSORRT_CUDA_GRAPH=on|off at run time)",
    )
    p.add_argument(
        "--constant-methods",
        type=_constant_methods,
        metavar="JSON",
        help="methods that return a value, added to the program as a JSON object of name -> value (the LLM "
        "methods `generate` reads: et_tensorrt.llm.llm_methods); default: those the .pt2 files carry "
        "(et_tensorrt.llm's exporters record them), given here they replace them",
    )
    p.add_argument(
        "--allow-no-delegate",
        action="store_true",
        help="accept a lowering that delegates nothing (default: exit status 4)",
    )


def _input_options(p: argparse.ArgumentParser, shapes: str) -> None:
    p.add_argument(
        "--inputs",
        type=_existing_file,
        metavar="FILE",
        help="torch.save file of a tensor, a list of tensors and Python values (bool, int, float) in the "
        f"program's input order, or a dict of them by input name (default: random, of {shapes}; a value input "
        "takes the value it was exported with)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")


def _program_arguments(
    p, help: str = "a .pt2 written by torch.export.save, or several METHOD=PROGRAM.pt2 (as `lower` takes them)"
) -> None:
    p.add_argument("program", type=_method_program, nargs="+", metavar="[METHOD=]PROGRAM.pt2", help=help)


def _method_option(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument(
        "--method", metavar="NAME", help=f"{what} (default forward; a program without one lists its methods)"
    )


def build_parser(commands, description: str | None = None) -> argparse.ArgumentParser:
    """``commands``: the command names (each parser's ``command``); ``description``: the help's text (the cli
    package's docstring, which passes it: parser imports nothing of the package that imports it)."""
    parser = _Parser(prog="et-tensorrt", description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks, all warnings and library logs")
    parser.add_argument("--version", action=_VersionAction, help="print versions and exit")
    sub = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        help="what to do (`et-tensorrt COMMAND --help` for its options)",
    )

    p = sub.add_parser("demo", help="lower, run and check the bundled host-branch example (no download)")
    p.add_argument(
        "-o",
        "--output",
        type=_output_file,
        metavar="PTE",
        help="keep the example's .pte here (default: a temporary folder, removed at exit)",
    )
    _lowering_options(p, full=False)

    p = sub.add_parser("lower", help="lower a torch.export.save program to a .pte with the TensorRT delegate")
    _program_arguments(
        p,
        "a .pt2 written by torch.export.save (the method forward), or several METHOD=PROGRAM.pt2 (e.g. "
        "prefill=prefill.pt2 decode=decode.pt2): one program whose methods share their KV cache, engine and weights",
    )
    p.add_argument("-o", "--output", type=_output_file, required=True, metavar="PTE", help="the .pte to write")
    p.add_argument(
        "--etrecord",
        type=_output_file,
        metavar="PATH",
        help="also write ExecuTorch's ETRecord of the lowering, for executorch.devtools.Inspector with an ETDump "
        "(docs/profiling.md)",
    )
    _lowering_options(p)

    p = sub.add_parser(
        "explain", help="what `lower` would delegate, node by node, and why the rest stays on the host (builds nothing)"
    )
    _program_arguments(p)
    _lowering_options(p, full=False)
    _torch_executed_op(p)

    p = sub.add_parser("inspect", help="methods, delegates and per-partition I/O of a .pte (runs nothing)")
    p.add_argument("pte", type=_existing_file, help="a .pte written by `lower` (or any ExecuTorch program)")

    p = sub.add_parser("run", help="run a .pte with et_tensorrt.Runner; print the placement plan and outputs")
    p.add_argument("pte", type=_existing_file, help="the .pte to run")
    _method_option(p, "the method to run")
    p.add_argument("--data", type=_existing_file, metavar="PTD", help="the .ptd with its named data (--named-data ptd)")
    _input_options(p, "the shapes the program records")
    p.add_argument(
        "--device",
        type=_host_or_cuda,
        default="cpu",
        help="where the inputs live: cpu or cuda:N (default cpu)",
    )
    p.add_argument("--repeat", type=_at_least_one, default=1, metavar="N", help="calls to time (default 1)")
    p.add_argument(
        "--warmup",
        type=_at_least_zero,
        default=1,
        metavar="K",
        help="untimed calls before the timed ones, so one-time costs stay out of the median (default 1)",
    )
    p.add_argument(
        "--no-verify",
        action="store_true",
        help="skip ExecuTorch's program verification (trusted files only, see docs/security.md)",
    )
    p.add_argument(
        "--profile",
        type=_output_file,
        metavar="ETDUMP",
        help="trace every call with ExecuTorch's ETDump generator: print the delegates' events per phase (calls, "
        "median, total, bytes) and write the ETDump to ETDUMP for executorch.devtools.Inspector (docs/profiling.md)",
    )
    p.add_argument(
        "--profile-layers",
        action="store_true",
        help="with --profile: also time each TensorRT engine layer (TensorRT's IProfiler; on a GPU, not with a CUDA "
        "graph)",
    )

    p = sub.add_parser(
        "prepare",
        help="build the engines of a .pte for this machine's GPU now (engine cache; -o: a .pte carrying them)",
    )
    p.add_argument("pte", type=_existing_file, help="a .pte lowered with a build recipe (--device-build, the default)")
    p.add_argument(
        "-o", "--output", type=_output_file, metavar="PTE", help="also write a copy whose blobs carry these engines"
    )
    p.add_argument("--data", type=_existing_file, metavar="PTD", help="the .ptd with its named data (--named-data ptd)")
    p.add_argument("--device", type=_engine_device, default="cuda:0", help="the GPU (default cuda:0)")

    p = sub.add_parser("check", help="lower, run and check against eager PyTorch on your inputs (exit 3 if not passed)")
    _program_arguments(p)
    _method_option(p, "the method to run and check")
    _input_options(p, "the program's example shapes")
    for name, what in (("atol", "absolute"), ("rtol", "relative")):
        by_precision = ", ".join(f"{k} {getattr(t, name):g}" for k, t in TOLERANCES.items())
        p.add_argument(
            f"--{name}", type=_tolerance, metavar="TOL", help=f"{what} tolerance (default by precision: {by_precision})"
        )
    p.add_argument("-o", "--output", type=_output_file, metavar="PTE", help="also write the lowered .pte here")
    p.add_argument("--json", action="store_true", help="print one JSON object (the results) instead of the text")
    p.add_argument(
        "--decode-tokens",
        type=_at_least_zero,
        default=4,
        metavar="N",
        help="an LLM program (its LLM constant methods): tokens decoded through its methods against the exported "
        "programs run eagerly, every call compared (default 4; 0: none)",
    )
    _lowering_options(p)

    p = sub.add_parser("generate", help="generate text from a prompt: ExecuTorch's TextLLMRunner runs the .pte")
    p.add_argument("pte", type=_existing_file, help="an LLM .pte lowered with et_tensorrt.llm.llm_methods")
    p.add_argument("--tokenizer", type=_existing_file, required=True, help="its tokenizer (a HF tokenizer.json, ...)")
    p.add_argument("--data", type=_existing_file, metavar="PTD", help="the .ptd with its named data (--named-data ptd)")
    p.add_argument("--prompt", help="the text to continue (an encoder-decoder's input); a speech program's is --audio")
    p.add_argument("--max-new-tokens", type=_at_least_one, metavar="N", help="(default 16; transcribing: to its end)")
    p.add_argument(
        "--temperature", type=_tolerance, help="0 picks the likeliest token (default 0, or the program's own sampling)"
    )
    p.add_argument("--top-k", type=_at_least_zero, metavar="K", help="draw among the K likeliest tokens (default 50)")
    p.add_argument("--top-p", type=_probability, metavar="P", help="... the fewest of them holding P (default 1)")
    p.add_argument("--seed", type=_int64, help="the draws' seed: the same seed, the same text (default: a new one)")
    p.add_argument(
        "--image", type=_existing_file, help="an image (PNG, JPEG, ...) for a vision-language program "
        "(export_multimodal), where the prompt says <image> or before it; prepared by the model's image processor"
    )  # fmt: skip
    p.add_argument(
        "--audio", type=_existing_file, metavar="WAV", help="a mono wav file at the model's sampling rate: transcribed "
        "by a speech encoder-decoder (export_encoder_decoder), or heard by an audio LLM (export_multimodal)"
    )  # fmt: skip

    sub.add_parser("describe", help="print ExecuTorch descriptors of a few example tensors")

    p = sub.add_parser("cache", help="the on-disk build cache: list its entries, its size and limit, or clear it")
    p.add_argument(
        "action",
        nargs="?",
        choices=("list", "size", "clear"),
        default="list",
        help="list: entries (size, last used, model and partition) and the total; size: the total against "
        "the limit; clear: remove every entry (default list)",
    )
    assert set(sub.choices) == set(commands), "a command without its parser, or the reverse"
    return parser
