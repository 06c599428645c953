"""Issue 20's crafted programs: through Runner and ExecuTorch's own runtime, no code from the file runs
and the file is refused naming the entry. One crafted ``.pte`` per route (tests/crafted.py)."""

from __future__ import annotations

import io

import crafted
import pytest
import torch

import et_tensorrt  # registers the backend, so ExecuTorch's runtime reaches our loader
from et_tensorrt import _C
from et_tensorrt.errors import RunnerError

ROUTES = crafted.V1_ROUTES + crafted.V2_ROUTES


def _crafted(lowered, route, tmp_path):
    canary = tmp_path / f"canary_{route}"
    return crafted.crafted_pte(lowered[0], route, str(canary)), canary


@pytest.mark.parametrize("route", ROUTES)
def test_runner_refuses_the_crafted_program_and_runs_no_code(lowered, route, tmp_path):
    data, canary = _crafted(lowered, route, tmp_path)
    with pytest.raises(RunnerError) as refused:
        et_tensorrt.Runner(data).run([lowered[2]])
    assert crafted.REFUSAL[route] in str(refused.value), str(refused.value)
    assert "ProgramRefusedError" in str(refused.value) and "\nAt:" not in str(refused.value), "one clear message"
    assert not canary.exists(), "code from the file ran"


@pytest.mark.parametrize("route", ROUTES)
def test_executorch_runtime_refuses_the_crafted_program_and_runs_no_code(lowered, route, tmp_path):
    from executorch.runtime import Runtime

    data, canary = _crafted(lowered, route, tmp_path)
    program = Runtime.get().load_program(data)
    with pytest.raises(RuntimeError):
        program.load_method("forward")
    assert crafted.REFUSAL[route] in _C.last_delegate_error(), _C.last_delegate_error()
    assert not canary.exists(), "code from the file ran"


@pytest.mark.parametrize("route", ["sample_inputs", "use_pickle", "opaque_object", "expression_v1"])
def test_the_crafted_archives_do_run_code_in_torchs_own_loader(lowered, route, tmp_path):
    """The payloads are real: handed to torch.export.load (what the runtime used before blob format 2),
    each version-1 route creates its canary. (custom_object needs a registered torchbind class to run
    anything; it is refused all the same.)"""
    canary = tmp_path / f"canary_{route}"
    archive = crafted.rewrite_archive(
        crafted.partition_archive(crafted.first_blob(lowered[0])), crafted.v1_route(route, str(canary))
    )
    try:
        torch.export.load(io.BytesIO(archive))
    except Exception:  # noqa: BLE001 - it fails after the payload ran
        pass
    assert canary.exists(), f"torch's loader did not run the {route} payload: the crafted file tests nothing"


def test_an_untouched_version_1_blob_still_loads_and_runs(lowered):
    """Blob format 1 (PROGRAM = torch.export.save archive) is read by the same safe loader."""
    pte, model, x = lowered
    blob = crafted.first_blob(pte)
    v1 = crafted.replace_blob(pte, crafted.v1_blob(blob, crafted.partition_archive(blob)))
    (y,) = et_tensorrt.Runner(v1).run([x])
    torch.testing.assert_close(y, model(x).detach())


def test_every_route_leaves_the_next_valid_program_working(lowered, tmp_path):
    pte, model, x = lowered
    for route in ("sample_inputs", "expression"):
        data, _ = _crafted(lowered, route, tmp_path)
        with pytest.raises(RunnerError):
            et_tensorrt.Runner(data).run([x])
        (y,) = et_tensorrt.Runner(pte).run([x])
        torch.testing.assert_close(y, model(x).detach())
