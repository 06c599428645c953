"""The seed bug: `.to(device="cpu", dtype=...)` on a device tensor must not be absorbed."""

from models import HostBranch, seed_inputs

from et_tensorrt.compile_specs import (
    BACKEND_ID,
    EXECUTION_DEVICE,
    METHOD_INPUT_NAMES,
    PARTITION_COUNT,
    PARTITION_INDEX,
    decode,
)
from et_tensorrt.partition import ReasonCode, TensorRTPartitioner, explain
from et_tensorrt.partition.device_rules import cast_devices

CAST = "dim_order_ops__to_dim_order_copy_default"


def test_only_device_side_ops_are_delegated(fake_edge, partition_recording, tagged, warned):
    ep = fake_edge(HostBranch, seed_inputs)
    partitioner = TensorRTPartitioner(min_block_size=1)
    result, warnings = partition_recording(partitioner, ep)

    # The lifted 0-d cpu constant 2.0 does not pin the mul to the host: it is baked in.
    assert tagged(result.tagged_exported_program) == {
        "_lifted_tensor_constant0": "et_tensorrt_0",
        "aten_mul_tensor": "et_tensorrt_0",
    }
    report = partitioner.report
    assert report.placed
    assert report.partitions == {"et_tensorrt_0": ("aten_mul_tensor",)}
    assert {n: r.code for n, r in report.host_nodes.items()} == {
        CAST: "cast:device-change",
        "aten_arange_start_step": "device:host-output",
        "aten_cat_default": "device:host-output",
    }
    assert str(report.host_nodes[CAST]) == "cast:device-change (cuda:0 -> cpu)"
    assert warned(warnings) == sorted([CAST, "aten_arange_start_step", "aten_cat_default"])
    assert any("cast:device-change" in m and CAST in m for m in warnings)


def test_no_device_changing_cast_inside_a_partition(fake_edge, tagged):
    ep = fake_edge(HostBranch, seed_inputs)
    result = TensorRTPartitioner(min_block_size=1)(ep)
    names = tagged(result.tagged_exported_program)
    casts = [n for n in ep.graph.nodes if n.op == "call_function" and cast_devices(n)]
    assert [n.name for n in casts] == [CAST]
    assert not any(n.name in names for n in casts)


def test_delegation_spec_names_backend_and_device(fake_edge):
    result = TensorRTPartitioner(target_device="cuda", min_block_size=1)(fake_edge(HostBranch, seed_inputs))
    (spec,) = result.partition_tags.values()
    assert spec.backend_id == BACKEND_ID == "EtTensorRTBackend"
    assert decode(spec.compile_specs) == {
        EXECUTION_DEVICE: "cuda:0",
        PARTITION_INDEX: "1",
        PARTITION_COUNT: "1",
        METHOD_INPUT_NAMES: '["x"]',  # what run --inputs takes by name (issue 54 row 5)
    }
    assert all(s.key != "target_device" for s in spec.compile_specs)


def test_default_min_block_size_drops_the_lone_mul(fake_edge):
    result = TensorRTPartitioner()(fake_edge(HostBranch, seed_inputs))
    assert result.partition_tags == {}
    assert str(TensorRTPartitioner().analyze(fake_edge(HostBranch, seed_inputs)).host_nodes["aten_mul_tensor"]) == (
        "min_block_size (partition of 1 < 5)"
    )


def test_explain_on_plain_export_reports_the_edge_nodes_lowering_sees(fake_export, fake_edge):
    # explain applies lowering's decompositions: aten.to.device(mul, cpu, int32) is the edge program's
    # _to_dim_order_copy, with the same decisions as on the edge program itself.
    report = explain(fake_export(HostBranch, seed_inputs), min_block_size=1)
    assert str(report.host_nodes["dim_order_ops__to_dim_order_copy_default"]) == "cast:device-change (cuda:0 -> cpu)"
    assert report.delegated == {"aten_mul_tensor": "et_tensorrt_0"}
    assert report.host_nodes["aten_arange_start_step"].code == ReasonCode.DEVICE_HOST_OUTPUT
    assert report.host_nodes["aten_cat_default"].code == "device:host-output"  # a ReasonCode is a str
    on_edge = explain(fake_edge(HostBranch, seed_inputs), min_block_size=1)
    assert on_edge.partitions == report.partitions and on_edge.host_nodes == report.host_nodes
