"""Builds et_tensorrt._C and et_tensorrt.format._reader (one CMake project) against the installed torch and
executorch wheels.

Install with `pip install --no-build-isolation -e .` (or without -e): build isolation would compile
against a different torch than the one that imports the extension.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    """One CMake project builds every extension module: the first ``build_extension`` call builds them all."""

    def build_extension(self, ext):
        if getattr(self, "_cmake_done", False):
            return
        sys.path.insert(0, str(ROOT))
        from cmake_args import cmake_args

        # CMake writes _C here and _reader into its format/ folder.
        out_dir = Path(self.get_ext_fullpath("et_tensorrt._C")).resolve().parent
        config = "Debug" if os.environ.get("ET_TENSORRT_DEBUG") else "Release"
        sanitize = os.environ.get("ET_TENSORRT_SANITIZE", "")
        # A build folder in the tree (ignored by git) so that rebuilds are incremental.
        build_dir = ROOT / "build" / f"cmake-{config}{'-' + sanitize.replace(',', '-') if sanitize else ''}"
        build_dir.mkdir(parents=True, exist_ok=True)
        args = cmake_args(out_dir, config, sanitize)
        if _have("ninja"):
            args.append("-GNinja")
        subprocess.check_call(["cmake", str(ROOT), *args], cwd=build_dir)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", ".", "--config", config, "-j", jobs], cwd=build_dir)
        self._cmake_done = True


def _version():
    text = (ROOT / "et_tensorrt" / "__init__.py").read_text()
    return re.search(r'^__version__ = "([^"]+)"', text, re.M).group(1)


def _have(tool):
    from shutil import which

    return which(tool) is not None


setup(
    name="et_tensorrt",
    version=_version(),
    description="An ExecuTorch delegate for TensorRT that is honest about where every tensor lives",
    python_requires=">=3.10",
    packages=find_packages(include=["et_tensorrt", "et_tensorrt.*"]),
    package_data={"et_tensorrt": ["examples/*.py"]},
    ext_modules=[CMakeExtension("et_tensorrt._C"), CMakeExtension("et_tensorrt.format._reader")],
    cmdclass={"build_ext": CMakeBuild},
    # Lowering needs the ONNX exporter (onnx, onnxscript), onnxruntime (validation, `check`) and a TensorRT
    # builder: TensorRT-RTX's wheels install from the registry; full TensorRT is the `tensorrt` extra. The
    # floors are the versions tested together. The ONNX stack is bounded to the minor series CI tested: the
    # REFIT_MAP's batch-norm recipes reproduce onnxscript's fold (numpy arithmetic, NEP 50 promotion: numpy 2;
    # bfloat16 through ml_dtypes), and onnx-ir / onnx decide the initializers' bytes (docs/blob-format.md).
    install_requires=[
        "torch>=2.13,<2.15",
        "executorch>=1.5.1,<1.6",
        "numpy>=2.0,<3",
        "ml_dtypes>=0.7,<0.8",
        "tensorrt-rtx>=1.7",
        "onnx>=1.23,<1.24",
        "onnx-ir>=1.1,<1.2",
        "onnxscript>=0.7.2,<0.8",
        "onnxruntime>=1.32,<1.33",
        "tqdm>=4.66",  # the lowering's progress bar on a terminal (et_tensorrt/progress.py)
    ],
    extras_require={
        # What the README's LLM recipe imports (HF models, tokenizer.json): et_tensorrt.llm's HF exporters and
        # TextGenerator's tokenizers
        # pillow: image files for multimodal programs (et_tensorrt/llm/media.py; transformers' image processors need it)
        "llm": ["transformers>=5.25,<5.26", "tokenizers>=0.22,<0.24", "pillow>=11"],
        "test": [
            "et_tensorrt[llm]",  # real models without downloads: HF tiny configs, the BPE tokenizer TextLLMRunner reads
            "pytest>=8",
            "hypothesis",
            # ExecuTorch's backend conformance suite (the CI slice): parallel runs, reports, per-test limits
            "pytest-xdist",
            "pytest-json-report",
            "pytest-timeout",
            "filelock",  # the programs test modules share, built once per session across workers (tests/artifacts.py)
            # quantized programs (tests/backend/test_backend_quantized.py, scripts/bench_quantized.py): the torchao
            # series executorch 1.5.1 declares
            "torchao>=0.18,<0.19",
            # standard TensorRT's lean runtime (no builder; imports without a GPU): the flavour differences in
            # et_tensorrt/trt.py are checked against its API as well as TensorRT-RTX's
            # (tests/runtime/test_runtime_trt_flavours.py)
            "tensorrt-lean-cu13-bindings==11.4.0.106; platform_system == 'Linux' and platform_machine == 'x86_64'",
            "tensorrt-lean-cu13-libs==11.4.0.106; platform_system == 'Linux' and platform_machine == 'x86_64'",
            # the lint gate (.ci/run, .pre-commit-config.yaml): pinned so every checkout formats alike
            "ruff==0.17.6",
            "clang-format==23.1.5",
        ],
        "fuzz": ["atheris"],  # scripts/fuzz.sh (the pytest smoke versions need only hypothesis)
        "tensorrt": ["tensorrt"],
    },
    entry_points={"console_scripts": ["et-tensorrt=et_tensorrt.cli:main"]},
    zip_safe=False,
)
