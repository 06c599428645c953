"""explain() and PartitionReport: per-node decisions, no side effects, a readable table."""

import warnings

from models import HostBranch, seed_inputs

from et_tensorrt.partition import PartitionReport, TensorRTPartitioner, explain


def test_explain_has_no_side_effects(fake_edge):
    ep = fake_edge(HostBranch, seed_inputs)
    for node in ep.graph.nodes:
        node.meta.pop("delegation_tag", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # explain must not warn
        report = explain(ep, min_block_size=1)
    assert isinstance(report, PartitionReport)
    assert not any("delegation_tag" in n.meta for n in ep.graph.nodes)
    assert report.warned == (
        "dim_order_ops__to_dim_order_copy_default",
        "aten_arange_start_step",
        "aten_cat_default",
    )
    calls = [n.name for n in ep.graph.nodes if n.op == "call_function"]
    assert [d.name for d in report.nodes] == calls  # every call node, in graph order
    assert set(report.delegated) | set(report.host_nodes) == set(calls)


def test_table_is_compact_and_complete(fake_edge):
    text = str(explain(fake_edge(HostBranch, seed_inputs), min_block_size=1))
    lines = text.splitlines()
    assert lines[0] == "et_tensorrt partition report: engine cuda:0, graph placed"
    assert lines[1] == "1 partition(s), 1 node(s) delegated, 3 kept on host"
    assert lines[2] == "(long node and op names are shortened with '~' to fit 100 columns)"
    assert lines[3].split() == ["node", "op", "device", "decision"]
    assert set(lines[4]) <= {"-", " "}
    assert max(len(line) for line in lines) <= 100  # names elide and the decision wraps to fit 100 columns
    rows = {}  # a row, with the indented lines its decision wrapped onto
    last = ""
    for line in lines[5:]:
        if line.startswith(" "):
            rows[last] += " " + line.strip()
        else:
            last = line.split()[0]
            rows[last] = line
    assert rows["aten_mul_tensor"].split()[1:] == ["aten.mul.Tensor", "cuda:0", "et_tensorrt_0"]
    row = rows["dim_order_ops__to_dim_order~_default"]  # the middle of a long name gives way, never its ends
    assert row.split() == ["dim_order_ops__to_dim_order~_default", "dim_order_ops._to_dim_order~.default", "cpu"] + [
        "host:",
        "cast:device-change",
        "(cuda:0",
        "->",
        "cpu)",
    ]
    assert len(rows) == 4


def test_partitioner_keeps_last_report(fake_edge):
    partitioner = TensorRTPartitioner(min_block_size=1)
    assert partitioner.report is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        partitioner(fake_edge(HostBranch, seed_inputs))
    assert partitioner.report.delegated == {"aten_mul_tensor": "et_tensorrt_0"}
