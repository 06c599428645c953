"""The TensorRT flavours' differences (et_tensorrt/trt.py), against the modules' own APIs where they import:
TensorRT-RTX (installed for lowering) and standard TensorRT's lean runtime wheel (``tensorrt-lean-cu13-bindings``
and ``-libs``, 44 MB: in the test extra; these tests skip without it). Neither needs a GPU to be imported
or inspected. The full TensorRT builder cannot be installed here, so its code path is built with TensorRT-RTX
seen as a module without RTX's target API: the one builder then takes the ``tensorrt`` branches (the
STRONGLY_TYPED network flag, no named targets) and parses the recipe's weightless graph as it would."""

from __future__ import annotations

import types

import pytest

from et_tensorrt import trt
from et_tensorrt.errors import EngineBuildError
from et_tensorrt.format import blob as B

rtx_module = pytest.importorskip("tensorrt_rtx")


@pytest.fixture(scope="module")
def rtx() -> trt.Flavour:
    return trt.Flavour("tensorrt_rtx", rtx_module)


@pytest.fixture(scope="module")
def lean() -> trt.Flavour:
    """Standard TensorRT 11's lean runtime, as the ``tensorrt`` flavour (no builder in it)."""
    module = pytest.importorskip("tensorrt_lean_bindings", reason="the tensorrt-lean-cu13 wheels are not installed")
    return trt.Flavour("tensorrt", module)


def test_tensorrt_rtx_names_its_targets_and_has_no_sm90(rtx):
    assert rtx.can_build and rtx.is_rtx and rtx.label == "TensorRT-RTX 1.7.1"
    assert rtx.supports_target_archs() and rtx.known_targets()[:2] == ("sm75", "sm80")
    assert "sm90" not in rtx.known_targets() and "sm87" not in rtx.known_targets()
    assert "sm75" not in rtx.default_targets() and "sm86" in rtx.default_targets()  # Turing only when named
    assert rtx.targets_for("sm86") == ("sm86",) and rtx.targets_for("sm90") is None
    assert rtx.compute_capability("8.6") == rtx_module.ComputeCapability.SM86
    assert rtx.network_flags() == 0  # always strongly typed, no flag
    assert rtx.builder_flag("REQUIRE_USER_ALLOCATION") == rtx_module.BuilderFlag.REQUIRE_USER_ALLOCATION
    assert hasattr(rtx_module.IRuntimeConfig, "create_runtime_cache")  # the RTX-only runtime config


def test_tensorrt_builds_for_its_gpu_and_lacks_rtx_only_flags(lean):
    assert lean.label.startswith("TensorRT 11.") and not lean.is_rtx
    assert not lean.can_build  # the lean runtime deserializes; it does not build
    assert not lean.supports_target_archs() and lean.known_targets() == () and lean.default_targets() == ()
    assert lean.targets_for("sm90") == () and lean.targets_for("sm87") == ()  # the GPU it runs on
    with pytest.raises(EngineBuildError, match="builds for the GPU it runs on; it cannot name target 'sm86'"):
        lean.compute_capability("sm86")
    with pytest.raises(EngineBuildError, match=r"TensorRT 11\.\d .* has no BuilderFlag.REQUIRE_USER_ALLOCATION"):
        lean.builder_flag("REQUIRE_USER_ALLOCATION")
    for flag in ("STRIP_PLAN", "REFIT_IDENTICAL"):  # weight stripping exists in both
        assert lean.builder_flag(flag) is not None
    assert not hasattr(lean.module.IRuntimeConfig, "create_runtime_cache")
    for name in ("engine_host_code_allowed", "tempfile_control_flags"):  # what engine_loading switches off
        assert hasattr(lean.module.Runtime, name)


def test_tensorrt_networks_are_strongly_typed_by_flag():
    flags = types.SimpleNamespace(NetworkDefinitionCreationFlag=types.SimpleNamespace(STRONGLY_TYPED=3))
    assert trt.Flavour("tensorrt", flags).network_flags() == 1 << 3
    assert trt.Flavour("tensorrt", types.SimpleNamespace()).network_flags() == 0  # a TensorRT without the flag


def test_where_an_engine_runs(rtx):
    sm86 = ("sm86", "sm89")
    assert trt.engine_runs_on("tensorrt_rtx", rtx.version, sm86, "sm86", rtx) == ""
    assert trt.engine_runs_on("tensorrt_rtx", rtx.version, sm86, "sm90", rtx) == (
        "its engine targets sm86, sm89, not this GPU (sm90)"
    )
    assert trt.engine_runs_on("tensorrt_rtx", "1.6.0.1", sm86, "sm86", rtx) == (
        f"its engine was built by TensorRT-RTX 1.6.0.1; this machine has {rtx.version}"
    )
    assert trt.engine_runs_on("tensorrt", "11.4.0.106", (), "sm87", None) == (
        "its engine needs TensorRT 11.4.0.106, which is not installed here"
    )


class _WithoutTargets(types.ModuleType):
    """TensorRT-RTX without its target API: what the builder sees of standard TensorRT (``hide``: more it lacks)."""

    def __init__(self, inner, hide: tuple[str, ...] = ()):
        super().__init__("tensorrt")
        self._inner = inner
        self._hidden = ("ComputeCapability", *hide)
        self.__version__ = inner.__version__

    def __getattr__(self, name):
        if name in self._hidden:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_the_tensorrt_code_path_builds_the_recipe(mlp_blob, monkeypatch):
    """The one builder, as the ``tensorrt`` flavour: strongly typed by flag, no named targets, the recipe's graph
    parsed with its initializers handed over from WEIGHTS, the engine's I/O checked against the header."""
    from et_tensorrt.builder.engine_builder import BuildSettings, build_engine
    from et_tensorrt.builder.recipe_build import build_export
    from et_tensorrt.embedded_program.loader import weight_tensors

    standard = trt.Flavour("tensorrt", _WithoutTargets(rtx_module))
    assert not standard.supports_target_archs() and standard.network_flags() != 0
    monkeypatch.setattr(trt, "get", lambda name: standard if name == "tensorrt" else None)
    blob = B.read_blob(mlp_blob)
    export = build_export(blob.recipe, weight_tensors(blob))
    result = build_engine(export, BuildSettings(flavour="tensorrt"))
    assert result.engine.prefix(4) == b"vtrt" and len(result.engine) > 1000
    with pytest.raises(EngineBuildError, match="cannot build for explicit target architectures"):
        build_engine(export, BuildSettings(flavour="tensorrt", target_archs=("sm90",)))


def test_a_tensorrt_without_engine_streaming_hands_the_engine_over_whole(mlp_blob, monkeypatch):
    """A TensorRT before ``build_serialized_network_to_stream`` (JetPack 6's 10.3) builds into host memory:
    Flavour.build_to writes that to the same sink, and the engine is the streamed one, byte for byte."""
    from et_tensorrt.builder.engine_builder import BuildSettings, build_engine
    from et_tensorrt.builder.recipe_build import build_export
    from et_tensorrt.embedded_program.loader import weight_tensors

    blob = B.read_blob(mlp_blob)
    export = build_export(blob.recipe, weight_tensors(blob))
    engines = []
    for hide in ((), ("IStreamWriter",)):
        standard = trt.Flavour("tensorrt", _WithoutTargets(rtx_module, hide))
        monkeypatch.setattr(trt, "get", lambda name, f=standard: f if name == "tensorrt" else None)
        engines.append(build_engine(export, BuildSettings(flavour="tensorrt")).engine.to_bytes())
    assert engines[0] == engines[1] and engines[0][:4] == b"vtrt"
