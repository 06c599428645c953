"""The delegate's phase events in ExecuTorch's ETDump, read back with executorch.devtools.Inspector (issue 52)."""

import torch
from executorch.devtools import Inspector
from executorch.exir import to_edge_transform_and_lower
from executorch.extension.pybindings.portable_lib import _load_for_executorch

import et_tensorrt
from et_tensorrt import _C
from et_tensorrt.partition import TensorRTPartitioner


def test_native_build_takes_the_wheels_event_tracer_setting():
    import executorch

    config = open(f"{executorch.__path__[0]}/lib/cmake/executorch/executorch-config.cmake").read()
    assert _C.event_tracer_enabled == ("ET_EVENT_TRACER_ENABLED" in config)


def test_three_calls_log_each_phase_with_bytes_and_executor(tmp_path):
    assert et_tensorrt
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()).eval()
    x = torch.randn(2, 4)
    pte = to_edge_transform_and_lower(torch.export.export(m, (x,)), partitioner=[TensorRTPartitioner()]).to_executorch()
    (tmp_path / "m.pte").write_bytes(pte.buffer)
    module = _load_for_executorch(str(tmp_path / "m.pte"), enable_etdump=True)
    for _ in range(3):
        module.forward((x,))
    module.write_etdump_result_to_file(str(tmp_path / "e.etdp"))
    events = {e.name: e for block in Inspector(etdump_path=str(tmp_path / "e.etdp")).event_blocks for e in block.events}
    assert len(events["input copies"].perf_data.raw) == 3
    assert len(events["pytorch fallback"].perf_data.raw) == 3
    assert events["output copies"].raw_delegate_debug_metadatas == [b"bytes=64"] * 3  # 2x8 float32 results
    assert b"executor=pytorch" in events["init"].raw_delegate_debug_metadatas[0]
