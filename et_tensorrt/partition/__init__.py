"""Partitioning for the et_tensorrt delegate: which nodes a TensorRT engine runs, and why not the rest.

A node is delegated only when all four rules pass; each refusal carries a named reason
(`report.Reason`, its code a `report.ReasonCode`):

1. Placement. The device recorded in the node's ``meta["val"]`` (every output) and in every tensor
   input must be the engine's device.
   - A *placed* graph is one exported with device tensors (any non-host device in its metadata):
     nodes the graph recorded on the host stay on the host.
   - Exception: 0-d host tensors (Python scalars that ``to_edge`` lifts into
     ``_lifted_tensor_constant`` on cpu, CPU scalars PyTorch lets mix with device tensors) do not
     make their consumer host-resident; they are baked into the engine or copied.
   - An *unplaced* graph, exported entirely on the host (ExecuTorch's usual way), is not refused
     anything by placement: "cpu" there means "wherever the runtime puts it", and the runtime copies
     at the delegate boundary. For the same reason a ``.to("cpu")`` of a host tensor in such a graph
     changes no device and stays delegable.
2. Casts. ``_to_copy`` / ``to`` / ``_to_dim_order_copy`` whose device argument moves data off the
   engine's device are refused (a TensorRT engine cannot produce a host tensor); dtype-only casts
   stay delegable. So no device-changing cast is ever inside a partition.
3. Capability. The op is in ``supported_ops.SUPPORTED_OPS``, its arguments are within TensorRT's limits
   (``argument_limits``; a refusal names the limit), and every tensor it touches has a dtype TensorRT
   handles (no complex, no float64).
4. User choice. The op is not in ``torch_executed_ops``.

Partitions with fewer than ``min_block_size`` compute nodes are then dropped, and so are partitions of
only views (unless they are the whole graph). Sizes (``sym_size`` and SymInt arithmetic) flow into
partitions, never out: a delegated size read outside its partition stays on the host
(``symbolic-boundary``) and the grouping is redone; a partition reading a size computed outside takes it
as an argument (ExecuTorch passes an integer; the engine computes it from its own inputs' shapes where it
can, see ``docs/dynamic-shapes.md``); a float or bool scalar computed outside keeps its reader on the host;
``require_full_compilation=True`` raises ``PartitionError`` listing every refused node. A node kept
off the engine only because of its device, which a device-blind partitioner would have absorbed,
is named in a ``PlacementWarning``. Delegate output metadata is the graph's own ``meta["val"]``;
the partitioner never rewrites it.
"""

from .report import PartitionReport, Reason, ReasonCode

__all__ = ["TensorRTPartitioner", "PartitionReport", "Reason", "ReasonCode", "explain"]


def __getattr__(name: str):
    # Imported on first use: the runtime's safe loader reads this package's op table and must not pull in
    # executorch.exir (the partitioner's base class, and explain's lowering path) with it.
    if name in ("TensorRTPartitioner", "explain"):
        from . import partitioner

        return getattr(partitioner, name)
    raise AttributeError(f"module 'et_tensorrt.partition' has no attribute {name!r}")
