"""``inspect``: what a .pte holds (et_tensorrt.inspection), read without running it. The flatbuffer is read
without ExecuTorch; only our delegates' blobs need the C++ reader, which loads torch (about a second)."""

from __future__ import annotations

from .common import EXIT_OK, CliError


def cmd_inspect(args) -> int:
    from .. import inspection

    try:
        info = inspection.inspect_file(args.pte)
    except inspection.NotAProgramError as e:
        raise CliError(str(e)) from e
    print(inspection.format_program(info, args.pte))
    return EXIT_OK
