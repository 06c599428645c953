"""The ONNX keeps its weights outside the protobuf (issue 27; builder/onnx_weights.py). The threshold is forced to 0
here, so every initializer takes the external path on a small model: TensorRT's parser and onnxruntime get them
from memory, the refit derivation and the cache's ONNX identity read them in place, and a lowering with it runs and
matches eager."""

from __future__ import annotations

import onnx
import pytest
import torch

from et_tensorrt.backend.refit_derivation import derive_refit_map, verify_refit_map
from et_tensorrt.backend.validation import validate
from et_tensorrt.builder import onnx_weights
from et_tensorrt.builder.edge_to_aten import edge_to_aten
from et_tensorrt.builder.engine_builder import BuildSettings, build_engine
from et_tensorrt.builder.onnx_export import export_onnx
from et_tensorrt.embedded_program.writer import program_weights
from et_tensorrt.errors import EngineBuildError
from et_tensorrt.testing import Tester


class Net(torch.nn.Module):
    """A conv + batch norm (export folds them: a new tensor), linears (the program's own tensors), a layer norm and
    a reshape (small shape constants, external too at threshold 0)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 4 * 4, 64)
        self.norm = torch.nn.LayerNorm(64)
        self.head = torch.nn.Linear(64, 6, bias=False)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))).reshape(x.shape[0], -1)
        return self.head(self.norm(self.fc(y)))


X = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def program():
    from executorch.exir import to_edge

    torch.manual_seed(0)
    model = Net().eval()
    return edge_to_aten(to_edge(torch.export.export(model, (X,))).exported_program())


@pytest.fixture(scope="module")
def external(program):
    return export_onnx(program, external_threshold=0)


def _program_pointers(ep) -> set[int]:
    return {t.data_ptr() for t in list(ep.state_dict.values()) + list(ep.constants.values())}


def test_every_initializer_is_held_outside_the_protobuf_as_a_view_where_export_kept_it(program, external):
    inits = list(external.model.graph.initializer)
    assert inits and all(onnx_weights.is_external(i) for i in inits if list(i.dims) != [0])
    assert {i.name for i in inits if onnx_weights.is_external(i)} == set(external.initializers)
    weight_bytes = onnx_weights.external_nbytes(external)
    assert len(external.model_bytes) < weight_bytes  # the graph alone
    # tensors the exporter kept are the program's, not copies (the folded conv is a new one)
    views = {t.data_ptr() for t in external.initializers.values()} & _program_pointers(program)
    assert {program.state_dict[n].data_ptr() for n in ("fc.bias", "norm.weight", "norm.bias")} <= views


def test_the_default_threshold_keeps_small_constants_inline(program):
    export = export_onnx(program)
    sizes = {name: t.numel() * t.element_size() for name, t in onnx_weights.initializers(export)}
    for init in export.model.graph.initializer:
        assert onnx_weights.is_external(init) == (sizes[init.name] >= onnx_weights.DEFAULT_THRESHOLD), init.name
    assert export.initializers and any(not onnx_weights.is_external(i) for i in export.model.graph.initializer)


def test_tensorrt_builds_and_onnxruntime_validates_from_memory(program, external):
    engine = build_engine(external, BuildSettings()).engine
    assert len(engine) > 0
    errors = validate(program, external)
    assert errors and all(e < 1e-4 for e in errors.values())


def test_refit_map_reads_the_held_initializers(program, external):
    weights = program_weights(program)
    plan = derive_refit_map(external, weights, program)
    assert plan.raw_bytes <= 64 and len(plan.entries) == len(external.model.graph.initializer)
    verify_refit_map(external, plan.entries, [w.tensor for w in weights], plan.payload)


def test_the_onnx_identity_covers_the_external_weights(external):
    import dataclasses

    changed = {name: t.clone() for name, t in external.initializers.items()}
    name = next(iter(changed))
    changed[name].view(-1)[0] += 1
    assert dataclasses.replace(external, initializers=changed).digest() != external.digest()
    assert dataclasses.replace(external, initializers=dict(external.initializers)).digest() == external.digest()


def test_the_checker_sees_external_initializers_as_inputs(external):
    onnx.checker.check_model(onnx_weights.checkable(external.model))  # no file behind the references
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(external.model)


def test_a_graph_over_the_protobuf_limit_fails_before_the_work_naming_step_and_size(program, monkeypatch):
    monkeypatch.setattr(onnx_weights, "PROTO_LIMIT", 100)
    with pytest.raises(EngineBuildError, match=r"ONNX export: the partition's ONNX graph is [\d.]+ MiB .* 2 GiB"):
        export_onnx(program)


def test_a_lowering_through_the_external_path_runs_and_matches_eager(monkeypatch):
    monkeypatch.setattr(onnx_weights, "DEFAULT_THRESHOLD", 0)
    torch.manual_seed(0)
    tester = Tester(Net().eval(), (X,)).lower(min_block_size=1, cache=False, validate=True)
    tester.check_partitions(1).check_delegated_all()
    ((blob, _),) = tester.lowered_blobs()
    assert "validation_max_abs_error" in blob.metadata and blob.engine is not None
    tester.run_runner().check_parity()


def test_onnxruntime_reads_the_weights_in_place():
    """onnxruntime would copy external initializers into buffers of its own: they are bound as inputs instead."""
    from executorch.exir import to_edge

    from et_tensorrt.backend.validation import run_onnx

    model = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.Linear(2048, 1024)).eval()  # 16 MiB
    x = torch.randn(2, 1024)
    ep = edge_to_aten(to_edge(torch.export.export(model, (x,))).exported_program())
    export = export_onnx(ep)
    weights = onnx_weights.external_nbytes(export)
    assert weights > 16 * 2**20

    def anon() -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:"))

    before = anon()
    (got,) = run_onnx(export, [x])
    assert anon() - before < weights / 2
    torch.testing.assert_close(got, model(x).detach(), rtol=1e-4, atol=1e-4)
