"""The CMake -D arguments that build et_tensorrt._C against the installed torch and executorch.

One list for setup.py (normal builds) and scripts/sanitize.sh (its own sanitized build folder):
    python cmake_args.py OUTPUT_DIR [BUILD_TYPE] [SANITIZE]   # prints one argument per line
"""

import sys
import sysconfig


def cmake_args(output_dir, build_type="Release", sanitize=""):
    import executorch  # namespace package: no __file__
    import torch
    import torch.utils.cpp_extension as cpp

    return [
        f"-DCMAKE_BUILD_TYPE={build_type}",
        f"-DET_TENSORRT_PYTHON_INCLUDE={sysconfig.get_paths()['include']}",
        f"-DET_TENSORRT_TORCH_INCLUDES={' '.join(cpp.include_paths())}",
        f"-DET_TENSORRT_TORCH_LIB_DIR={cpp.library_paths()[0]}",
        f"-DET_TENSORRT_EXECUTORCH_DIR={executorch.__path__[0]}",
        f"-DET_TENSORRT_CXX11_ABI={int(torch.compiled_with_cxx11_abi())}",
        f"-DET_TENSORRT_EXT_SUFFIX={sysconfig.get_config_var('EXT_SUFFIX')}",
        f"-DET_TENSORRT_OUTPUT_DIR={output_dir}",
        f"-DET_TENSORRT_SANITIZE={sanitize}",
    ]


if __name__ == "__main__":
    print("\n".join(cmake_args(*sys.argv[1:])))
