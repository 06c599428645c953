"""What ExecuTorch's C++ runners print reaches ``on_token`` whole, however the GIL falls: they hold it through a
whole generation (their Python bindings do not release it), so the text may all arrive while the block ends, and a
callback that prints (the ``generate`` command's) must not find stdout closed under it."""

from __future__ import annotations

import ctypes
import sys
import time

from et_tensorrt.llm.runner.runner_output import _Streamed

WORDS = [f"piece{i} ".encode() for i in range(40)]


def _print_slowly(shown: list[bytes]):
    def show(piece: bytes) -> None:
        out = sys.stdout
        time.sleep(0.002)  # the GIL goes to the block's owner, which may be ending the block
        out.write(piece.decode())
        out.flush()
        shown.append(piece)

    return show


def test_text_printed_while_the_gil_is_held_reaches_a_printing_callback_whole(capfd):
    write = ctypes.PyDLL(None).write  # PyDLL: the call keeps the GIL, as the runners' generate does
    for _ in range(5):
        shown: list[bytes] = []
        with _Streamed(_print_slowly(shown)) as out:
            for word in WORDS:
                write(1, word, len(word))
        assert b"".join(shown) == out.generated == b"".join(WORDS)
        assert capfd.readouterr().out == b"".join(WORDS).decode()
