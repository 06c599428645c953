"""``explain``: what ``lower`` would delegate, node by node (:func:`et_tensorrt.explain`), without building."""

from __future__ import annotations

from .common import EXIT_OK
from .program_file import load_programs
from .progress import notice


def cmd_explain(args) -> int:
    from .. import explain

    programs, _ = load_programs(args.program)
    methods = programs if isinstance(programs, dict) else {None: programs}
    options = {
        "target_device": str(args.target_device),
        "min_block_size": args.min_block_size,
        "torch_executed_ops": tuple(args.torch_executed_op),
    }
    for name, program in methods.items():
        notice(f"partitioning {name or 'the program'} (ExecuTorch's edge passes) ...")
        report = explain(program, **options)
        print(f"\nmethod {name}:\n{report}" if name else f"\n{report}")
        if report.warned:
            print(f"kept on the host only for their device: {', '.join(report.warned)}")
    print("\nnothing was built: `et-tensorrt lower` with the same options delegates these partitions")
    return EXIT_OK
