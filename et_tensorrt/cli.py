"""The `et-tensorrt` / `python -m et_tensorrt` command line.

Commands: demo, lower, inspect, run, check, describe. Exit status: 0 success, 1 error (one line on
stderr; ``--debug`` shows the traceback), 2 bad command line, 3 ``check`` found a mismatch.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import statistics
import sys
import tempfile
import time
import warnings
import zlib
from typing import Optional, Sequence

import torch

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2  # argparse's own status
EXIT_MISMATCH = 3

# Default tolerances of `check`, per precision (TensorRT may use TF32 for fp32 matmuls on a GPU).
TOLERANCES = {"fp32": (1e-3, 1e-3), "fp16": (1e-2, 1e-2), "bf16": (5e-2, 5e-2)}


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 1."""


# --------------------------------------------------------------------------------------------- helpers


_DEVICE_RE = re.compile(r"^(cpu|cuda)(?::(\d+))?$")


def parse_device(text: str, *, what: str, allow_cpu: bool) -> torch.device:
    """``cpu`` / ``cuda`` / ``cuda:N`` -> torch.device; anything else is a CliError (no torch parsing
    surprises such as ``cuda:-1`` or ``meta``)."""
    m = _DEVICE_RE.match(text.strip())
    if m is None or (m.group(1) == "cpu" and m.group(2) is not None):
        allowed = "cpu or cuda[:N]" if allow_cpu else "cuda[:N]"
        raise CliError(f"{what} {text!r} is not a supported device string (expected {allowed})")
    if m.group(1) == "cpu":
        if not allow_cpu:
            raise CliError(f"{what} {text!r}: TensorRT engines run on a cuda device (expected cuda[:N])")
        return torch.device("cpu")
    return torch.device("cuda", int(m.group(2) or 0))


def require_file(path: str, what: str) -> str:
    if not os.path.exists(path):
        raise CliError(f"{what} {path!r} does not exist")
    if not os.path.isfile(path):
        raise CliError(f"{what} {path!r} is not a file")
    return path


def load_inputs(path: str) -> list:
    """``torch.save`` of a tensor, or of a tuple/list of tensors (the positional inputs)."""
    require_file(path, "inputs file")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise CliError(f"inputs file {path!r} could not be read by torch.load: {e}") from e
    if isinstance(obj, torch.Tensor):
        obj = [obj]
    if not isinstance(obj, (list, tuple)) or not all(isinstance(t, torch.Tensor) for t in obj):
        raise CliError(f"inputs file {path!r} must hold a tensor or a list/tuple of tensors, "
                       f"not {type(obj).__name__}")
    return list(obj)


def random_tensor(shape: Sequence[int], dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(tuple(shape), generator=generator).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=generator).bool()
    return torch.randint(0, 8, tuple(shape), generator=generator).to(dtype)


def checksum(t: torch.Tensor) -> str:
    """crc32 of the tensor's bytes (device-independent)."""
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    return f"{zlib.crc32(flat.view(torch.uint8).numpy().tobytes()):08x}"


def summarize(t) -> str:
    if not isinstance(t, torch.Tensor):
        return repr(t)
    shape = ", ".join(str(s) for s in t.shape)
    text = f"{str(t.dtype).replace('torch.', '')}[{shape}] on {t.device}"
    if t.numel() and (t.dtype.is_floating_point or not t.dtype.is_complex):
        text += f"  sum={t.detach().double().sum().item():+.6e}"
    return text + f"  crc32={checksum(t)}"


def _table(rows: list) -> list:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    out.insert(1, "  ".join("-" * w for w in widths))
    return out


def _flatten(result) -> list:
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        return [t for r in result for t in _flatten(r)]
    return [result]


class _LogToStdout(logging.Handler):
    """The backend's progress ("engine i/n: ...") and the runtime's notes, interleaved with our output."""

    def emit(self, record):
        message = record.getMessage()
        if message.startswith("et_tensorrt: "):
            message = message[len("et_tensorrt: "):]
        level = "" if record.levelno <= logging.INFO else f"{record.levelname.lower()}: "
        print(f"  [et_tensorrt] {level}{message}", flush=True)


@contextlib.contextmanager
def _backend_log(debug: bool):
    logger = logging.getLogger("et_tensorrt")
    handler = _LogToStdout(logging.DEBUG if debug else logging.INFO)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(handler.level)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


# ---------------------------------------------------------------------------------- programs and inputs


def load_program(path: str):
    require_file(path, "program")
    try:
        return torch.export.load(path)
    except Exception as e:
        raise CliError(f"{path!r} is not a torch.export.save program ({type(e).__name__}: {e})") from e


def _concrete(d) -> int:
    if isinstance(d, int):
        return d
    hint = getattr(getattr(d, "node", None), "hint", None)
    return int(hint) if hint is not None else 2


def program_input_specs(program) -> list:
    """(name, shape, dtype, dynamic dims) of each user input, from the placeholders' ``meta["val"]``."""
    user_inputs = set(program.graph_signature.user_inputs)
    specs = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user_inputs:
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise CliError(f"input {node.name!r} is not a tensor ({type(val).__name__}); "
                               "pass inputs with --inputs")
            shape = tuple(_concrete(d) for d in val.shape)
            dynamic = tuple(not isinstance(d, int) for d in val.shape)
            specs.append((node.name, shape, val.dtype, dynamic))
    return specs


def check_inputs(inputs: list, specs: list, where: str) -> None:
    """Count, dtype and (static) shape of ``inputs`` against ``specs`` [(name, shape, dtype, dynamic)]."""
    if len(inputs) != len(specs):
        raise CliError(f"{where} takes {len(specs)} input(s), got {len(inputs)}")
    for i, (t, (name, shape, dtype, dynamic)) in enumerate(zip(inputs, specs)):
        label = f"input {i}" + (f" ({name})" if name else "")
        if t.dtype != dtype:
            raise CliError(f"{label}: dtype {t.dtype} does not match the {where}'s {dtype}")
        if t.dim() != len(shape) or any(
            not dyn and a != b for a, b, dyn in zip(t.shape, shape, dynamic)
        ):
            raise CliError(f"{label}: shape {tuple(t.shape)} does not match the {where}'s "
                           f"{_shape_text(shape, dynamic)}")


def _shape_text(shape, dynamic) -> str:
    return "(" + ", ".join(f"<={s}" if d and s else ("*" if d else str(s)) for s, d in zip(shape, dynamic)) + ")"


def pte_input_specs(path: str) -> list:
    """Method inputs as ExecuTorch's method meta records them: (name, sizes, dtype, dynamic) with
    ``dynamic`` unknown (None): for a dynamic tensor the sizes are the upper bound memory was planned for."""
    from executorch.runtime import Runtime

    from .inspection import scalar_name

    try:
        meta = Runtime.get().load_program(path).metadata("forward")
    except Exception as e:
        raise CliError(f"{path!r} could not be loaded by ExecuTorch ({type(e).__name__}: {e})") from e
    specs = []
    for i in range(meta.num_inputs()):
        try:
            info = meta.input_tensor_meta(i)
        except Exception as e:
            raise CliError(f"method input {i} is not a tensor, which `run` cannot generate ({e})") from e
        dtype = getattr(torch, scalar_name(info.dtype()), None)
        if not isinstance(dtype, torch.dtype):
            raise CliError(f"method input {i} has ExecuTorch dtype {info.dtype()}, which torch does not have")
        specs.append(("", tuple(info.sizes()), dtype, None))
    return specs


def check_pte_inputs(inputs: list, specs: list) -> list:
    """Count, dtype, rank and the planned upper bound; returns the inputs whose shape differs from
    the recorded one (allowed only where a dim is dynamic, which ExecuTorch itself decides)."""
    if len(inputs) != len(specs):
        raise CliError(f"the program takes {len(specs)} input(s), got {len(inputs)}")
    differ = []
    for i, (t, (_, shape, dtype, _)) in enumerate(zip(inputs, specs)):
        if t.dtype != dtype:
            raise CliError(f"input {i}: dtype {t.dtype} does not match the program's {dtype}")
        if t.dim() != len(shape) or any(a > b for a, b in zip(t.shape, shape)):
            raise CliError(f"input {i}: shape {tuple(t.shape)} does not match the program's {shape}")
        if tuple(t.shape) != shape:
            differ.append(i)
    return differ


# ------------------------------------------------------------------------------------- shared actions


def lower_program(program, args, debug: bool):
    """`et_tensorrt.lower` with the CLI's options; prints the report, engine progress and warnings.
    Returns the program bytes and the partition report."""
    from . import lower
    from .backend import preprocess
    from .errors import PlacementWarning

    options = dict(
        target_device=str(args.target_device),
        min_block_size=args.min_block_size,
        torch_executed_ops=tuple(args.torch_executed_op or ()),
        precision=args.precision,
    )
    before = dict(preprocess.stats)
    print(f"lowering for {options['target_device']} (precision {args.precision}, min_block_size "
          f"{args.min_block_size}, torch_executed_ops {list(options['torch_executed_ops'])}) ...", flush=True)
    start = time.perf_counter()
    with _backend_log(debug), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = lower(program, zero_copy_inputs=args.zero_copy_inputs, **options)
    seconds = time.perf_counter() - start
    report = lower.last_report
    delta = {k: preprocess.stats[k] - before.get(k, 0) for k in preprocess.stats}
    print()
    print(report)
    placement = [w for w in caught if issubclass(w.category, PlacementWarning)]
    for w in placement:
        print(f"warning: {w.message}")
    if debug:
        for w in caught:
            if not issubclass(w.category, PlacementWarning):
                print(f"debug: {w.category.__name__}: {w.message}")
    print(f"\nlowered in {seconds:.1f} s: {delta['partitions']} delegate(s); engines {delta['built']} built, "
          f"{delta['cache_hits']} from cache, {delta['fallbacks']} left to PyTorch")
    return data, report


def run_program(source, inputs: list, repeat: int = 1):
    """Runs ``forward`` with :class:`et_tensorrt.Runner`; returns (outputs, plan, seconds per call)."""
    from . import Runner

    runner = Runner(source)
    times = []
    outputs = None
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        outputs = runner.run(inputs)
        times.append(time.perf_counter() - start)
    return outputs, runner.last_plan, times


def print_plan(plan, n_delegates: Optional[int]) -> None:
    if plan is None:
        print("placement plan: none (the method ran no et_tensorrt delegate)")
        return
    if n_delegates is None:
        which = "the last et_tensorrt delegate call"
    elif n_delegates <= 1:
        which = "the delegate"
    else:
        which = f"the last of {n_delegates} delegates (the runtime keeps one plan per call)"
    print(f"placement plan of {which}: executor {plan.executor} on {plan.execution_device}, "
          f"{plan.bytes_copied:,} B copied per call")
    rows = [("tensor", "action", "from -> to", "bytes", "why")]
    for p in list(plan.inputs) + list(plan.outputs):
        rows.append((f"{p.role} {p.index}", p.action, f"{p.source} -> {p.destination}", f"{p.bytes:,}",
                     p.reason or "zero copy: the caller's memory is bound"))
    for line in _table(rows):
        print("  " + line)


def print_outputs(outputs) -> None:
    for i, t in enumerate(outputs):
        print(f"  output {i}: {summarize(t)}")


def compare(expected: list, actual: list, atol: float, rtol: float):
    """Rows of (output, shape, max abs error, max rel error, verdict) and whether all match.

    An element matches when ``|actual - expected| <= atol + rtol * |expected|`` (``torch.allclose``)."""
    rows, ok = [], True
    if len(expected) != len(actual):
        return [("-", "-", "-", "-", f"MISMATCH: {len(actual)} output(s), eager has {len(expected)}")], False
    for i, (e, a) in enumerate(zip(expected, actual)):
        if not isinstance(e, torch.Tensor) or not isinstance(a, torch.Tensor):
            same = e == a
            rows.append((str(i), "-", "-", "-", "ok" if same else f"MISMATCH: {a!r} vs {e!r}"))
            ok &= bool(same)
            continue
        a = a.detach().to("cpu")
        e = e.detach().to("cpu")
        if tuple(a.shape) != tuple(e.shape) or a.dtype != e.dtype:
            rows.append((str(i), str(tuple(a.shape)), "-", "-",
                         f"MISMATCH: {a.dtype}{tuple(a.shape)} vs eager {e.dtype}{tuple(e.shape)}"))
            ok = False
            continue
        if e.numel() == 0:
            rows.append((str(i), str(tuple(e.shape)), "0", "0", "ok"))
            continue
        ad, ed = a.double(), e.double()
        both_nan = ad.isnan() & ed.isnan()
        nan_mismatch = bool((ad.isnan() != ed.isnan()).any())
        diff = torch.where(both_nan, torch.zeros_like(ad), (ad - ed).abs())  # NaN where only one is NaN
        scale = torch.where(both_nan, torch.ones_like(ed), ed.abs())
        max_abs = diff.nan_to_num(float("inf")).max().item()
        max_rel = (diff / scale.clamp_min(1e-12)).nan_to_num(float("inf")).max().item()
        good = not nan_mismatch and bool((diff <= atol + rtol * scale).all())
        ok &= good
        rows.append((str(i), str(tuple(e.shape)), f"{max_abs:.3e}", f"{max_rel:.3e}",
                     "ok" if good else "MISMATCH" + (" (NaN)" if nan_mismatch else "")))
    return rows, ok


def print_comparison(rows, atol, rtol) -> None:
    print(f"parity with eager PyTorch (atol {atol:g}, rtol {rtol:g}):")
    for line in _table([("output", "shape", "max abs err", "max rel err", "result")] + rows):
        print("  " + line)


# -------------------------------------------------------------------------------------------- commands


def _cmd_describe(args) -> int:
    from . import describe_inputs

    examples = {
        "contiguous float32": torch.randn(2, 3),
        "channels-last": torch.randn(1, 3, 4, 4).to(memory_format=torch.channels_last),
        "permuted int64": torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1),
        "0-d scalar": torch.tensor(1.5),
        "empty": torch.empty(0, 8),
    }
    if torch.cuda.is_available():
        examples["cuda:0 activation"] = torch.randn(4, 4, device="cuda")
    for (name, tensor), desc in zip(examples.items(), describe_inputs(list(examples.values()))):
        print(f"{name:>20}: {desc!r}")
    print(f"{'expanded (refused)':>20}: ", end="")
    try:
        describe_inputs([torch.randn(3, 1).expand(3, 4)])
    except ValueError as e:
        print(f"{type(e).__name__}: {e}")
    return 0


def _check_lowering_args(args) -> None:
    args.target_device = parse_device(args.target_device, what="--target-device", allow_cpu=False)
    if args.min_block_size < 1:
        raise CliError(f"--min-block-size must be >= 1, got {args.min_block_size}")


def _cmd_lower(args) -> int:
    require_file(args.program, "program")
    _check_lowering_args(args)
    program = load_program(args.program)
    specs = program_input_specs(program)
    print(f"{args.program}: " + ", ".join(f"{n} {str(d).replace('torch.', '')}{_shape_text(s, dy)}"
                                          for n, s, d, dy in specs))
    data, _ = lower_program(program, args, args.debug)
    with open(args.output, "wb") as f:
        f.write(data)
    print(f"wrote {args.output} ({len(data):,} bytes)")
    return EXIT_OK


def _cmd_inspect(args) -> int:
    from . import inspection

    require_file(args.pte, "program")
    try:
        info = inspection.inspect_file(args.pte)
    except inspection.NotAProgramError as e:
        raise CliError(str(e)) from e
    print(inspection.format_program(info, args.pte))
    return EXIT_OK


def _run_device(text: str) -> torch.device:
    device = parse_device(text, what="--device", allow_cpu=True)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise CliError(f"--device {text}: CUDA is not available on this machine "
                           "(torch.cuda.is_available() is False); use --device cpu")
        if device.index >= torch.cuda.device_count():
            raise CliError(f"--device {text}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return device


def _cmd_run(args) -> int:
    from . import inspection

    require_file(args.pte, "program")
    device = _run_device(args.device)
    if args.repeat < 1:
        raise CliError(f"--repeat must be >= 1, got {args.repeat}")
    inputs = load_inputs(args.inputs) if args.inputs else None
    with open(args.pte, "rb") as f:
        try:
            inspection.check_header(f.read(8), args.pte)
        except inspection.NotAProgramError as e:
            raise CliError(str(e)) from e
    specs = pte_input_specs(args.pte)
    if inputs is None:
        g = torch.Generator().manual_seed(args.seed)
        inputs = [random_tensor(shape, dtype, g) for _, shape, dtype, _ in specs]
        print(f"random inputs (seed {args.seed}) of the recorded shapes:")
    else:
        check_pte_inputs(inputs, specs)
        print(f"inputs from {args.inputs}:")
    inputs = [t.to(device) for t in inputs]
    for i, t in enumerate(inputs):
        print(f"  input  {i}: {summarize(t)}")
    with _backend_log(args.debug):  # a wrong shape is an InputShapeError naming the input and both shapes
        outputs, plan, times = run_program(args.pte, inputs, args.repeat)
    print_plan(plan, None)
    print("outputs:")
    print_outputs(outputs)
    if args.repeat > 1:
        ms = sorted(t * 1e3 for t in times)
        print(f"{args.repeat} calls: median {statistics.median(ms):.3f} ms, min {ms[0]:.3f} ms "
              "(the first call includes the delegate's init)")
    return EXIT_OK


def _cmd_check(args) -> int:
    require_file(args.program, "program")
    _check_lowering_args(args)
    inputs = load_inputs(args.inputs) if args.inputs else None
    program = load_program(args.program)
    specs = program_input_specs(program)
    if inputs is None:
        g = torch.Generator().manual_seed(args.seed)
        inputs = [random_tensor(shape, dtype, g) for _, shape, dtype, _ in specs]
        print(f"random inputs (seed {args.seed}) from the program's placeholder shapes")
    else:
        check_inputs(inputs, specs, "program")
    with torch.no_grad():
        expected = _flatten(program.module()(*inputs))
    data, _ = lower_program(program, args, args.debug)
    if args.output:
        with open(args.output, "wb") as f:
            f.write(data)
        print(f"wrote {args.output} ({len(data):,} bytes)")
    with _backend_log(args.debug):
        actual, plan, _ = run_program(data, inputs)
    print_plan(plan, len(lower_program_partitions(data)))
    atol, rtol = _tolerances(args)
    rows, ok = compare(expected, actual, atol, rtol)
    print_comparison(rows, atol, rtol)
    print("check passed" if ok else "check FAILED: the lowered program does not match eager PyTorch")
    return EXIT_OK if ok else EXIT_MISMATCH


def lower_program_partitions(data: bytes) -> list:
    from . import inspection

    return [d for d in inspection.inspect_bytes(data).method("forward").delegates if d.ours]


def _tolerances(args):
    atol, rtol = TOLERANCES[args.precision]
    return (args.atol if args.atol is not None else atol, args.rtol if args.rtol is not None else rtol)


_PLACEMENT_RULE = """\
The placement rule (et_tensorrt.partition): a graph exported with device tensors is *placed*, and a
node it recorded on the host stays on the host (a device-changing cast never enters an engine). A
graph exported on the host is *unplaced*: "cpu" there means "wherever the runtime puts it", so
placement refuses nothing and the runtime copies at the delegate boundary. On an unplaced graph a
host branch comes from ops outside the supported table or from torch_executed_ops."""


def _cmd_demo(args) -> int:
    args.target_device = parse_device(args.target_device, what="--target-device", allow_cpu=False)
    if args.min_block_size < 1:
        raise CliError(f"--min-block-size must be >= 1, got {args.min_block_size}")
    from . import explain  # ExecuTorch's exir: seconds to import, so after the cheap checks
    from .examples import host_branch as hb

    print("et_tensorrt demo: a small MLP whose post-processing is a host branch")
    print(f"  model: et_tensorrt/examples/host_branch.py  (forward(x) -> logits, totals;"
          f" totals = cumsum(sigmoid(logits.to('cpu'))))")
    print("  " + _PLACEMENT_RULE.replace("\n", "\n  "))

    print("\n[1/4] the placed view: the model exported with (fake) cuda:0 tensors; analysis only, no GPU needed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        placed = explain(hb.export_placed(), target_device=str(args.target_device),
                         min_block_size=args.min_block_size)
    print(placed)
    if placed.warned:
        print(f"  kept on the host only for their device (a device-blind partitioner would have absorbed them): "
              f"{', '.join(placed.warned)}")

    print(f"\n[2/4] the real program: exported on the host (unplaced), lowered with "
          f"torch_executed_ops={list(hb.TORCH_EXECUTED_OPS)}")
    program = hb.export_on_host()
    args.torch_executed_op = list(hb.TORCH_EXECUTED_OPS)
    args.zero_copy_inputs = True
    args.precision = "fp32"
    data, report = lower_program(program, args, args.debug)
    host = report.host_nodes
    print("  on the host here: " + "; ".join(f"{n} ({r.code})" for n, r in host.items()))
    path = args.output or os.path.join(tempfile.mkdtemp(prefix="et_tensorrt_demo_"), "host_branch.pte")
    with open(path, "wb") as f:
        f.write(data)
    print(f"  wrote {path} ({len(data):,} bytes); see it with: python -m et_tensorrt inspect {path}")

    print("\n[3/4] run with et_tensorrt.Runner")
    inputs = list(hb.example_inputs())
    with _backend_log(args.debug):
        outputs, plan, _ = run_program(path, inputs)
    print_plan(plan, len(report.partitions))
    print("outputs:")
    print_outputs(outputs)
    if not torch.cuda.is_available():
        print("  (no CUDA here: the engine was built, but the partition ran with PyTorch on the host;"
              " on a GPU it runs in TensorRT)")

    print("\n[4/4] parity with eager PyTorch")
    with torch.no_grad():
        expected = _flatten(hb.make_model()(*inputs))
    atol, rtol = TOLERANCES["fp32"]
    rows, ok = compare(expected, outputs, atol, rtol)
    print_comparison(rows, atol, rtol)
    print("demo passed" if ok else "demo FAILED: the lowered program does not match eager PyTorch")
    return EXIT_OK if ok else EXIT_MISMATCH


# ------------------------------------------------------------------------------------------------ parser


def _add_lowering_options(p: argparse.ArgumentParser, *, full: bool = True) -> None:
    p.add_argument("--target-device", default="cuda:0", help="the engines' device (default cuda:0)")
    p.add_argument("--min-block-size", type=int, default=5,
                   help="smallest partition (compute nodes) worth an engine (default 5)")
    if not full:
        return
    p.add_argument("--torch-executed-op", action="append", metavar="OP",
                   help="keep this op on the host, e.g. aten.sigmoid.default (repeatable)")
    p.add_argument("--precision", choices=("fp32", "fp16", "bf16"), default="fp32")
    p.add_argument("--zero-copy-inputs", action=argparse.BooleanOptionalAction, default=True,
                   help="leave method inputs out of ExecuTorch's memory plan so the delegate sees the "
                        "caller's pointers (default on)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="et-tensorrt", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true", help="show tracebacks and all warnings")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo", help="lower, inspect, run and check the bundled host-branch example")
    p.add_argument("-o", "--output", help="where to write the example's .pte (default: a temp dir)")
    _add_lowering_options(p, full=False)
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("lower", help="lower a torch.export.save program to a .pte with the TensorRT delegate")
    p.add_argument("program", help="a .pt2 written by torch.export.save")
    p.add_argument("-o", "--output", required=True, help="the .pte to write")
    _add_lowering_options(p)
    p.set_defaults(func=_cmd_lower)

    p = sub.add_parser("inspect", help="methods, delegates and per-partition I/O of a .pte")
    p.add_argument("pte")
    p.set_defaults(func=_cmd_inspect)

    p = sub.add_parser("run", help="run a .pte with et_tensorrt.Runner; print the placement plan and outputs")
    p.add_argument("pte")
    p.add_argument("--inputs", help="torch.save file of a tensor or a list of tensors (default: random)")
    p.add_argument("--device", default="cpu", help="where the inputs live: cpu or cuda:N (default cpu)")
    p.add_argument("--repeat", type=int, default=1, help="calls to time (default 1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("check", help="lower, run and compare with eager PyTorch (exit 3 on mismatch)")
    p.add_argument("program", help="a .pt2 written by torch.export.save")
    p.add_argument("--inputs", help="torch.save file of a tensor or a list of tensors (default: random)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--atol", type=float, help="absolute tolerance (default by precision: fp32 1e-3)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default by precision: fp32 1e-3)")
    p.add_argument("-o", "--output", help="also write the lowered .pte here")
    _add_lowering_options(p)
    p.set_defaults(func=_cmd_check)

    sub.add_parser("describe", help="print ExecuTorch descriptors of a few example tensors").set_defaults(
        func=_cmd_describe
    )
    return parser


def main(argv: Optional[list] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except Exception as e:  # one clear line unless --debug
        if args.debug:
            raise
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        prefix = "error" if isinstance(e, CliError) else f"error: {type(e).__name__}"
        print(f"{prefix}: {message}" if message else prefix, file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
