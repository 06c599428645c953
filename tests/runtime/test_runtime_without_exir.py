"""The runtime path needs no ExecuTorch ahead-of-time stack: `import et_tensorrt` and `Runner` load
ExecuTorch's kernel library directly, never `executorch.exir` (which the GPU machine's runtime-only
install does not have). Checked in fresh interpreters, with a program that needs a host kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from models import MLP

import et_tensorrt
from et_tensorrt.testing import Tester

RUN = textwrap.dedent(
    """
    import sys, torch
    import et_tensorrt
    x = torch.load(sys.argv[2])
    out = et_tensorrt.Runner(sys.argv[1]).run([x])[0]
    if len(sys.argv) > 4:  # then ExecuTorch's own runtime on the same program, in the same process
        from executorch.runtime import Runtime
        program = Runtime.get().load_program(open(sys.argv[1], "rb").read())
        out2 = program.load_method("forward").execute([x])[0]
        assert torch.equal(out, out2), (out, out2)
    torch.save(out, sys.argv[3])
    print(";".join(sorted(m for m in sys.modules if m.startswith("executorch"))))
    """
)


@pytest.fixture(scope="module")
def program(tmp_path_factory, _engine_cache_dir):
    torch.manual_seed(0)
    x = torch.randn(2, 8)
    tester = Tester(MLP(), (x,)).lower(min_block_size=1, torch_executed_ops=["aten.relu.default"])
    tester.check_host_nodes(["aten_relu_default"])  # relu stays on the host: an ExecuTorch CPU kernel
    folder = tmp_path_factory.mktemp("no_exir")
    (folder / "p.pte").write_bytes(tester.pte)
    torch.save(x, folder / "x.pt")
    return folder, tester.expected([x])[0]


def _run(folder, *extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run(
        [sys.executable, "-c", RUN, str(folder / "p.pte"), str(folder / "x.pt"), str(folder / "out.pt"), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip().splitlines()[-1].split(";"), torch.load(folder / "out.pt")


def test_runner_runs_a_program_with_host_kernels_without_importing_exir(program):
    folder, expected = program
    modules, out = _run(folder)
    # ExecuTorch's Python runtime module loads (without exir) only so that et_tensorrt's log filter sits in front of
    # its log function (et_tensorrt._filter_executorch_log); its Python API, which imports exir, does not
    aot = ("executorch.exir", "executorch.extension.pybindings.portable")
    assert not [m for m in modules if m.startswith(aot)], modules
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_executorch_own_runtime_after_runner_shares_the_same_kernels(program):
    folder, expected = program
    _, out = _run(folder, "then-executorch-runtime")
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


def test_a_missing_kernel_library_is_one_clear_error(monkeypatch):
    from et_tensorrt.runtime import runner

    monkeypatch.setattr(runner, "_kernels_loaded", False)
    monkeypatch.setattr(runner, "KERNELS_LIBRARY", "libexecutorch_kernels_nonexistent.so")
    with pytest.raises(et_tensorrt.RunnerError, match="libexecutorch_kernels_nonexistent.so is not in"):
        runner.load_kernels()


def test_a_second_copy_of_the_kernel_library_is_not_loaded(tmp_path):
    """A runtime-only prefix beside an installed wheel (the GPU check on this machine): the kernels came with
    ExecuTorch's Python binding, which importing the package loads; loading the prefix's copy by its path would
    register each kernel again, which ExecuTorch answers with an abort."""
    code = textwrap.dedent(
        f"""
        import shutil
        import et_tensorrt
        from et_tensorrt.runtime import runner
        prefix = {str(tmp_path)!r}
        shutil.copy(runner._executorch_lib_dirs()[-1] + "/" + runner.KERNELS_LIBRARY, prefix)
        runner._executorch_lib_dirs = lambda: [prefix]
        runner.load_kernels()
        print("loaded once")
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip().endswith("loaded once"), done.stderr[-2000:]


def test_the_device_build_path_imports_no_exir():
    """Building an engine on the GPU machine (device_build: the builder, the engine cache, engines held as file
    regions) runs where only ExecuTorch's runtime is installed."""
    code = (
        "import sys, et_tensorrt\n"
        "from et_tensorrt.runtime import device_build, executors\n"
        "from et_tensorrt.builder import build_cache, engine_builder, held_data\n"
        "from et_tensorrt.format import recipe\n"
        "print(sorted(m for m in sys.modules if m.startswith('executorch.exir')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
