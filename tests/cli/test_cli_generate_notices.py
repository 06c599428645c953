"""``generate``'s notices and its streamed text (issue 54 row 4): a notice that comes while the text streams (the
runtime's fallback to PyTorch, logged when the runner first loads its methods) waits on stderr until the text's line
has ended; notices before the first piece come before the prompt. The real command: test_cli_generate.py's
``test_the_fallback_notice_comes_before_the_text_never_inside_it``."""

from __future__ import annotations

import logging

from et_tensorrt.cli.common import backend_log
from et_tensorrt.cli.generate import _Text

log = logging.getLogger("et_tensorrt")


def test_a_notice_while_the_text_streams_waits_for_its_end(capfd):
    with backend_log(False) as notes:
        log.warning("et_tensorrt: before the text")
        text = _Text("the cat", notes)
        assert capfd.readouterr() == ("", "  [et_tensorrt] warning: before the text\n")  # the prompt not yet
        text.piece(b" sat \xe2\x82")  # the euro sign's first two bytes: a character split across pieces
        log.warning("et_tensorrt: partition runs with PyTorch on cpu: no CUDA device is available")
        text.piece(b"\xac on")
        assert capfd.readouterr() == ("the cat sat \u20ac on", "")  # held
        text.end()
        assert capfd.readouterr() == (
            "\n",
            "  [et_tensorrt] warning: partition runs with PyTorch on cpu: no CUDA device is available\n",
        )
        log.warning("et_tensorrt: after the text")
    assert capfd.readouterr().err == "  [et_tensorrt] warning: after the text\n"


def test_a_generation_of_no_piece_still_shows_its_prompt_then_its_notices(capfd):
    with backend_log(False) as notes:
        text = _Text("the cat", notes)
        text.end()
    assert capfd.readouterr() == ("the cat\n", "")
