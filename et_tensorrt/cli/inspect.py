"""``inspect``: what a .pte holds (et_tensorrt.inspection), read without running it: the flatbuffer without
ExecuTorch (format/pte_tables.py), our delegates' blobs by the C++ reader without torch (format/_reader)."""

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
