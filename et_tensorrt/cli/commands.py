"""The commands (``cache``, ``explain``, ``generate``, ``inspect`` and ``prepare`` have modules of their own).
Arguments arrive checked (parser.py); each command loads, works and prints."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import sys
import time

import torch

from ..parity import QUANTIZED_SHARE, Tolerances, for_precision, for_quantized
from .check import run_and_check
from .check_decode import decode_and_check, decoding_methods
from .common import (
    EXIT_MISMATCH,
    EXIT_OK,
    CliError,
    NothingDelegated,
    UsageError,
    backend_log,
    load_runtime,
    quiet_native_stderr,
)
from .constant_methods import constant_methods
from .data_file import beside, data_file
from .display import print_plan, print_tensors, timing
from .eager import EagerProgram
from .inputs import (
    arrange,
    check_inputs,
    check_pte_inputs,
    load_inputs,
    program_input_specs,
    pte_input_specs,
    random_inputs,
)
from .lowering import LoweringRequest, lower_program, write_program
from .methods import choose_method, method_to_check, pte_methods
from .profile import print_profile
from .program_file import load_programs


def _eager(module, args, kwargs=None) -> list:
    """The module's outputs on the inputs, flattened as the lowered program returns them."""
    from torch.utils import _pytree as pytree

    with torch.no_grad():
        return pytree.tree_leaves(module(*args, **(kwargs or {})))


def _request(args, programs, source: str) -> LoweringRequest:
    """The lowering the options ask for, with the constant methods given or carried by the programs."""
    methods = constant_methods(args.constant_methods, programs, source)
    return dataclasses.replace(LoweringRequest.from_args(args), constant_methods=methods)


def cmd_lower(args) -> int:
    program, path = load_programs(args.program)
    request = _request(args, program, path)
    lower_program(program, request, args.debug, source=path, output=args.output, etrecord=args.etrecord)
    return EXIT_OK


def cmd_check(args) -> int:
    if not args.json:
        return _check(args)
    program = " ".join(f"{name}={path}" if name else path for name, path in args.program)
    context = {"program": program, "precision": args.precision, "target_device": str(args.target_device)}
    if args.method:
        context["method"] = args.method
    try:
        with contextlib.redirect_stdout(sys.stderr if args.debug else io.StringIO()):
            status, result = _check(args, keep_result=True)
    except CliError as e:  # still one object on stdout; the error line goes to stderr as usual
        known = 0 if isinstance(e, NothingDelegated) else None  # counts known only when nothing was delegated
        failed = {
            "engines": known,
            "engines_executed": known,
            "onnx_checked": known,
            "max_abs_error": None,
            "max_rel_error": None,
            "passed": False,
            "error": str(e),
            "exit_status": e.status,
        }
        print(json.dumps({**context, **failed}, indent=2))
        raise
    print(result.to_json(**context))
    return status


def is_quantized(data: bytes, method: str = "forward") -> bool:
    """Whether any of the method's engines holds quantization (its METADATA ``quantization``)."""
    from .. import inspection

    delegates = inspection.inspect_bytes(data).method(method).delegates
    return any(d.ours and d.blob is not None and d.blob.metadata.get("quantization") for d in delegates)


def _check(args, keep_result: bool = False):
    request = LoweringRequest.from_args(args)
    if request.build.named_data == "ptd":
        raise UsageError("check runs the lowered program from memory: use --named-data pte (the same sharing)")
    defaults = for_precision(request.build.precision)
    tolerances = Tolerances(
        rtol=defaults.rtol if args.rtol is None else args.rtol, atol=defaults.atol if args.atol is None else args.atol
    )
    method = method_to_check(args.program, args.method)
    given = load_inputs(args.inputs) if args.inputs else None
    programs, source = load_programs(args.program)
    request = _request(args, programs, source)
    program = programs[method] if isinstance(programs, dict) else programs
    specs = program_input_specs(program)
    if given is None:
        inputs = random_inputs(specs, args.seed)
        print(f"random inputs (seed {args.seed}) from the program's placeholder shapes")
    else:
        inputs = arrange(given, specs, "the program")
        check_inputs(inputs, specs)
    expected = EagerProgram(programs).run(inputs, method)  # on copies of the buffers: the lowering reads the programs
    lowered = lower_program(programs, request, args.debug, source=source, record=True)
    if args.output:
        write_program(args.output, lowered.data)
    if args.atol is None and is_quantized(lowered.data, method):
        tolerances = Tolerances(rtol=tolerances.rtol, atol=for_quantized(request.build.precision, expected).atol)
        print(
            f"quantized program: outputs compared within {QUANTIZED_SHARE:.0%} of their largest magnitude "
            f"(atol {tolerances.atol:.3g}); activation quantization TensorRT cannot express runs in float, so the "
            "engines compute the weight-only reading of those layers"
        )
    load_runtime(args.debug)
    result = run_and_check(lowered.data, inputs, expected, lowered.exports, tolerances, args.debug, method)
    if args.decode_tokens and decoding_methods(lowered.data):  # an LLM program: tokens through its methods too
        result.decode = decode_and_check(
            lowered.data, programs, lowered.exports, tolerances, args.decode_tokens, args.seed, args.debug
        )
    print("\n".join(result.notes() + [result.summary()]))
    status = EXIT_OK if result.passed else EXIT_MISMATCH
    return (status, result) if keep_result else status


def _require_cuda(device) -> None:
    if device.type != "cuda":
        return
    if not torch.cuda.is_available():
        raise CliError(
            f"--device {device}: CUDA is not available on this machine "
            "(torch.cuda.is_available() is False); use --device cpu"
        )
    if device.index >= torch.cuda.device_count():
        raise CliError(f"--device {device}: this machine has {torch.cuda.device_count()} CUDA device(s)")


@contextlib.contextmanager
def _named_data_hint(pte: str, data: str | None):
    """A program whose named data lives in a .ptd, run without one: its error names the .ptd expected beside it."""
    from ..errors import RunnerError

    try:
        yield
    except RunnerError as e:
        if data is None and "no .ptd was given" in str(e):
            raise CliError(f"{e}; no {beside(pte)} lies beside the program (give its .ptd with --data)") from e
        raise


def cmd_run(args) -> int:
    from .. import Runner

    if args.profile_layers and not args.profile:
        raise UsageError("--profile-layers needs --profile ETDUMP (the file the events are written to)")
    _require_cuda(args.device)
    plan = choose_method(args.pte, args.method, pte_methods(args.pte))
    specs = pte_input_specs(args.pte, plan)
    given = load_inputs(args.inputs) if args.inputs else None
    load_runtime(args.debug)
    data = data_file(args.pte, args.data)
    label = f"method {plan.name!r}" if plan.name != "forward" else ""
    if given is None:
        inputs = random_inputs(specs, args.seed)
        print(f"random inputs (seed {args.seed}) of the recorded shapes{' of ' + label if label else ''}:")
    else:  # shapes and layout are checked by the Runner against the method
        inputs = arrange(given, specs, f"method {plan.name!r}")
        print(f"inputs from {args.inputs}{' for ' + label if label else ''}:")
    inputs = [t.to(str(args.device)) if isinstance(t, torch.Tensor) else t for t in inputs]
    print_tensors("input ", inputs)
    check_pte_inputs(inputs, specs, plan.name)
    times = []
    with backend_log(args.debug), quiet_native_stderr(args.debug), _named_data_hint(args.pte, data):
        profile = ("layers" if args.profile_layers else True) if args.profile else False
        runner = Runner(args.pte, verify=not args.no_verify, data_path=data, profile=profile)
        for call in range(args.warmup + args.repeat):
            start = time.perf_counter()
            outputs = runner.run(inputs, method=plan.name)
            if call >= args.warmup:
                times.append(time.perf_counter() - start)
    print_plan(runner.last_plan)
    print("outputs:")
    print_tensors("output", outputs)
    print(timing(times, args.warmup))
    if args.profile:
        print_profile(
            runner, args.profile, calls=args.warmup + args.repeat, warmup=args.warmup, layers=args.profile_layers
        )
    return EXIT_OK


def cmd_describe(args) -> int:
    from .. import describe_inputs

    examples = {
        "contiguous float32": torch.randn(2, 3),
        "channels-last": torch.randn(1, 3, 4, 4).to(memory_format=torch.channels_last),
        "permuted int64": torch.arange(24).reshape(2, 3, 4).permute(2, 0, 1),
        "0-d scalar": torch.tensor(1.5),
        "empty": torch.empty(0, 8),
    }
    if torch.cuda.is_available():
        examples["cuda:0 activation"] = torch.randn(4, 4, device="cuda")
    for name, desc in zip(examples, describe_inputs(list(examples.values())), strict=True):
        print(f"{name:>20}: {desc!r}")
    print(f"{'expanded (refused)':>20}: ", end="")
    try:
        describe_inputs([torch.randn(3, 1).expand(3, 4)])
    except ValueError as e:
        print(f"{type(e).__name__}: {e}")
    return EXIT_OK


_PLACEMENT_RULE = """\
The placement rule (et_tensorrt.partition): a graph exported with device tensors is *placed*, and a
node it recorded on the host stays on the host (a device-changing cast never enters an engine). A
graph exported on the host is *unplaced*: "cpu" there means "wherever the runtime puts it", so
placement refuses nothing and the runtime copies at the delegate boundary. On an unplaced graph a
host branch comes from ops outside the supported table or from torch_executed_ops."""


def cmd_demo(args) -> int:
    from .. import explain  # ExecuTorch's exir: seconds to import, so after the checks
    from ..examples import host_branch as hb

    print("et_tensorrt demo: a small MLP whose post-processing is a host branch")
    print("  model: et_tensorrt/examples/host_branch.py, forward(x) -> logits, totals")
    print("         (totals = cumsum(sigmoid(logits.to('cpu'))))")
    print("  " + _PLACEMENT_RULE.replace("\n", "\n  "))

    print("\n[1/3] the placed view: the model exported with (fake) cuda:0 tensors; analysis only, no GPU needed")
    placed = explain(hb.export_placed(), target_device=str(args.target_device), min_block_size=args.min_block_size)
    print(placed)
    if placed.warned:
        print(
            f"\n  kept on the host only for their device: {', '.join(placed.warned)}\n"
            "  (a partitioner blind to devices would have absorbed them into the engine)"
        )

    print(
        f"\n[2/3] the real program: exported on the host (unplaced), lowered with\n"
        f"      torch_executed_ops={list(hb.TORCH_EXECUTED_OPS)}"
    )
    request = LoweringRequest(args.target_device, args.min_block_size, tuple(hb.TORCH_EXECUTED_OPS))
    lowered = lower_program(hb.export_on_host(), request, args.debug, source="demo: host_branch", record=True)
    print("  on the host here: " + "; ".join(f"{n} ({r.code})" for n, r in lowered.report.host_nodes.items()))
    if args.output:
        write_program(args.output, lowered.data)
        print(f"  see it with: et-tensorrt inspect {args.output}")

    print("\n[3/3] run with et_tensorrt.Runner on the example inputs and check against eager PyTorch")
    load_runtime(args.debug)
    inputs = list(hb.example_inputs())
    expected = _eager(hb.make_model(), inputs)
    result = run_and_check(lowered.data, inputs, expected, lowered.exports, for_precision("fp32"), args.debug)
    print("\n".join(result.notes() + [result.summary().replace("check ", "demo ", 1)]))
    return EXIT_OK if result.passed else EXIT_MISMATCH
