"""Repro: the backend suite's swin_v2_t with dynamic height/width through our flow, outside the suite's
1200 s limit, with a stack sample every minute (where the time goes) and engine progress lines.

    PYTHON=<venv with torchvision> $PYTHON scripts/repro_swin_dynamic.py     (~5 min on 2 cores)

State (docs/conformance.md, Models): one partition, passes (about 5 minutes on 2 cores). Before
2026-12-03: 233 partitions, then MemoryError (std::bad_alloc) from ExecuTorch's run_method.
"""

import logging
import os
import sys
import threading
import time
import traceback

# torchvision's C++ ops cannot load beside a CPU torch: declare their schemas before importing it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "suite_plugins"))
import torch  # noqa: E402
import torchvision  # noqa: E402
import torchvision_op_schemas  # noqa: E402,F401
from torch.export import Dim  # noqa: E402

from et_tensorrt.conformance.direct_runner import DirectRunner  # noqa: E402


def _sample_main_thread(period_s: float = 60.0) -> None:
    main = threading.main_thread().ident
    while True:
        time.sleep(period_s)
        stack = [line for line in traceback.format_stack(sys._current_frames().get(main)) if "sympy" not in line]
        sys.stderr.write(f"=== {time.strftime('%H:%M:%S')}\n{''.join(stack[-12:])}\n")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    threading.Thread(target=_sample_main_thread, daemon=True).start()
    model = torchvision.models.swin_v2_t().eval()
    inputs = (torch.randn(1, 3, 224, 224),)
    # The suite's dynamic shapes (executorch/backends/test/suite/models/test_torchvision.py).
    dynamic = ({2: Dim("height", min=1, max=16) * 16, 3: Dim("width", min=1, max=16) * 16},)
    start = time.time()
    runner = DirectRunner()
    runner.lower_and_run_model(model, inputs, dynamic_shapes=dynamic)
    print(f"passed in {time.time() - start:.0f} s: {runner.results}")


if __name__ == "__main__":
    main()
