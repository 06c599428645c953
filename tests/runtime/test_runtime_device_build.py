"""Engines for the GPU a program lands on (et_tensorrt.runtime.device_build), run here up to deserialization.

No GPU here: ``fake_gpu`` (et_tensorrt/testing/fake_gpu.py) makes torch report one CUDA device of a chosen
compute capability and records the engine bytes the delegate would deserialize. Everything before that is real:
the delegate's C++ choice, the prediction that the ahead-of-time TensorRT-RTX engine does not run on SM90, the
build from the blob's RECIPE with TensorRT-RTX (standing in for the TensorRT builder an SM90 machine has;
TensorRT-RTX 1.7.1 cannot name SM90, so it builds its portable engine), the engine cache, its checks.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from et_tensorrt.builder import build_cache
from et_tensorrt.format import blob as B
from et_tensorrt.runtime import device_build, executors
from et_tensorrt.testing.fake_gpu import fake_gpu

ENGINE_MAGIC = b"vtrt"  # a serialized TensorRT-RTX engine


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty engine cache of this test's own."""
    monkeypatch.setenv(build_cache.ENV_CACHE_DIR, str(tmp_path / "engines"))
    monkeypatch.delenv(device_build.PREPARE_ENV, raising=False)
    return tmp_path / "engines"


@pytest.fixture(scope="module")
def recipe_only(mlp_blob) -> bytes:
    """The MLP's blob without its ahead-of-time engine: the program, its weights and the RECIPE only."""
    return B.replace_sections(mlp_blob, {B.SECTION_ENGINE: None})


def _choose(blob: bytes, sm: str = "sm90"):
    with fake_gpu(sm) as seen:
        _, choice = executors.create_executor(blob, cuda_devices=1)
    return choice, seen


def test_the_mlp_blob_carries_a_recipe_naming_its_engine(mlp_blob):
    parsed = B.read_blob(mlp_blob)
    recipe = parsed.recipe
    assert recipe.usable and recipe.aot_engine["flavour"] == "tensorrt_rtx"
    assert "sm90" not in recipe.aot_engine["targets"] and "sm86" in recipe.aot_engine["targets"]
    assert [i["name"] for i in recipe.header["inputs"]] == [e.name for e in parsed.inputs]
    assert len(recipe.entries) == 4 and not any(e.raw for e in recipe.entries)  # every weight from WEIGHTS
    assert len(parsed.recipe.graph) < 8192  # the graph without its weights


def test_a_recipe_only_blob_builds_caches_and_a_second_process_hits(recipe_only, cache, tmp_path):
    choice, seen = _choose(recipe_only)
    assert choice["executor"] == "tensorrt" and choice["reason"] == ""
    assert choice["engine_origin"].startswith("built here for sm90 with TensorRT-RTX 1.7.1 in ")
    assert choice["engine_origin"].endswith(" s; cached")
    (engine,) = seen.engines
    assert engine[:4] == ENGINE_MAGIC and seen.flavours == ["tensorrt_rtx"]
    (entry,) = build_cache.entries()
    assert entry.info["label"].startswith("built here for sm90")

    path = tmp_path / "blob.etrt"
    path.write_bytes(recipe_only)
    script = textwrap.dedent(
        f"""
        import json
        from et_tensorrt.builder import build_cache
        from et_tensorrt.runtime import executors
        from et_tensorrt.testing.fake_gpu import fake_gpu
        with fake_gpu("sm90") as seen:
            _, choice = executors.create_executor(open({str(path)!r}, "rb").read(), cuda_devices=1)
        print(json.dumps({{"origin": choice["engine_origin"], "stats": build_cache.stats,
                          "engine": seen.engines[0].hex()}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    second = json.loads(done.stdout.strip().splitlines()[-1])
    assert second["origin"].startswith("from the engine cache: built here for sm90 with TensorRT-RTX 1.7.1")
    assert second["stats"]["hits"] == 1 and second["stats"]["stores"] == 0  # loaded, not built
    assert bytes.fromhex(second["engine"]) == engine


def test_a_corrupted_or_tampered_entry_is_rebuilt_never_trusted(recipe_only, cache):
    _choose(recipe_only)
    (path,) = cache.glob(f"*{build_cache.SUFFIX}")
    data = bytearray(path.read_bytes())
    data[build_cache._HEAD.size + 10] ^= 0xFF  # a flipped byte in the engine: the checksum fails
    path.write_bytes(bytes(data))
    corrupt = build_cache.stats["corrupt"]
    choice, seen = _choose(recipe_only)
    assert build_cache.stats["corrupt"] == corrupt + 1
    assert choice["engine_origin"].startswith("built here") and seen.engines[0] == bytes(_clean_engine(path))

    # Consistently re-signed but recording another partition: the key's facts are checked too.
    entry = build_cache.load(path.stem)
    entry.metadata["device_build"]["partition_digest"] = "0" * 64
    build_cache.store(entry)
    choice, _ = _choose(recipe_only)
    assert build_cache.stats["corrupt"] == corrupt + 2 and choice["engine_origin"].startswith("built here")


def _clean_engine(path) -> bytes:
    return build_cache.load(path.stem).engine


def test_the_ahead_of_time_engine_runs_where_its_targets_say(mlp_blob, cache):
    on_sm86, seen = _choose(mlp_blob, "sm86")  # one of TensorRT-RTX's default targets
    assert on_sm86["executor"] == "tensorrt" and on_sm86["engine_origin"] == ""
    assert seen.engines == [bytes(B.read_blob(mlp_blob).engine)] and build_cache.entries() == []
    on_sm90, seen = _choose(mlp_blob, "sm90")  # not one: built here instead
    assert on_sm90["engine_origin"].startswith("built here for sm90")
    # The stand-in builder is the ahead-of-time one (same flavour, version and targets): from the weightless graph
    # and the initializers rebuilt from WEIGHTS it makes the very same engine, byte for byte.
    assert seen.engines == [bytes(B.read_blob(mlp_blob).engine)]


def test_prepare_policies(recipe_only, cache, monkeypatch):
    monkeypatch.setenv(device_build.PREPARE_ENV, "cache")  # nothing prepared: no engine, and how to prepare
    monkeypatch.setenv(executors.FALLBACK_ENV, "error")  # (the PyTorch fallback cannot run on a faked GPU)
    with pytest.raises(
        RuntimeError, match="ET_TENSORRT_PREPARE=cache does not build at load: run `et-tensorrt prepare`"
    ):
        _choose(recipe_only)
    with device_build.policy("off"), pytest.raises(RuntimeError, match="building an engine for this GPU is off"):
        _choose(recipe_only)  # a Runner's prepare= wins over the environment
    monkeypatch.delenv(executors.FALLBACK_ENV)
    with device_build.policy(True):
        choice, _ = _choose(recipe_only)
    assert choice["engine_origin"].startswith("built here")
    choice, _ = _choose(recipe_only)  # cache-only now finds it
    assert choice["engine_origin"].startswith("from the engine cache")
    monkeypatch.setenv(device_build.PREPARE_ENV, "sometimes")
    with pytest.raises(ValueError, match="'sometimes' is not one of auto, cache, off"):
        device_build.prepare_policy()


def test_without_a_builder_for_this_gpu_the_reason_says_what_to_install():
    why = device_build.pick_builder(device_build.Gpu("NVIDIA H200", "sm90"), "tensorrt_rtx")
    assert why.startswith("no TensorRT builder here can build for sm90 (TensorRT-RTX 1.7.1 targets sm75, sm80")
    assert "install TensorRT (`pip install tensorrt`, or JetPack's on Jetson)" in why
    flavour, targets = device_build.pick_builder(device_build.Gpu("NVIDIA RTX 4090", "sm89"))
    assert flavour.name == "tensorrt_rtx" and targets == ("sm89",)


def test_prepare_builds_every_engine_and_writes_a_program_carrying_them(mlp_tester, cache, tmp_path, capsys):
    from et_tensorrt import cli
    from et_tensorrt.inspection import delegate_blobs

    pte, prepared = tmp_path / "mlp.pte", tmp_path / "prepared.pte"
    pte.write_bytes(mlp_tester.pte)
    assert cli.main(["prepare", str(pte)]) == cli.EXIT_ERROR  # no GPU here: one error line
    assert capsys.readouterr().err == (
        "error: prepare builds for this machine's GPU, and torch sees no CUDA device here: run it on the GPU "
        "machine that will run the program\n"
    )

    with fake_gpu("sm90"):
        assert cli.main(["prepare", str(pte), "-o", str(prepared)]) == cli.EXIT_OK
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{pte}: 1 engine(s) for NVIDIA H200 (faked) (sm90)"
    assert out[1].startswith("  engine 1/1 (forward): built here for sm90 with TensorRT-RTX 1.7.1 in ")
    assert out[-2:] == [
        f"wrote {prepared}: 1 blob(s) now carry the engine for sm90",
        "1 of 1 engine(s) ready for this GPU",
    ]
    (blob,) = delegate_blobs(prepared.read_bytes())
    parsed = B.read_blob(blob)
    assert parsed.recipe.aot_engine == {
        "flavour": "tensorrt_rtx",
        "version": parsed.metadata["trt_version"],
        "targets": [],
        "gpu": "sm90",
    }
    assert parsed.metadata["prepared"]["gpu"] == "sm90"
    assert device_build.aot_fit(parsed, device_build.Gpu("NVIDIA H200", "sm90")) == ""  # its own engine runs there now
    assert device_build.aot_fit(parsed, device_build.Gpu("NVIDIA A100", "sm80")).startswith(
        "its engine was built for a sm90"
    )

    with fake_gpu("sm90") as seen:  # a load of the prepared program takes its own engine: nothing built, no cache
        _, choice = executors.create_executor(blob, cuda_devices=1)
    assert choice["engine_origin"] == "" and seen.engines == [bytes(parsed.engine)]
    with fake_gpu("sm90"):  # and prepare again finds nothing to do
        assert cli.main(["prepare", str(prepared)]) == cli.EXIT_OK
    assert "its own engine runs here" in capsys.readouterr().out


def test_a_dynamic_partition_is_built_with_its_profiles(dynamic_tester, cache):
    """The recipe's header carries the optimization profile: the engine built from it for the faked GPU is the
    ahead-of-time one (same builder and targets), dynamic batch included."""
    from et_tensorrt.inspection import delegate_blobs

    (blob,) = delegate_blobs(dynamic_tester.pte)
    (entry,) = B.read_blob(blob).recipe.header["inputs"]
    assert entry["profiles"][0][0][0] < entry["profiles"][0][0][2]  # a dynamic batch: min < max
    choice, seen = _choose(blob)
    assert choice["engine_origin"].startswith("built here for sm90")
    assert seen.engines == [bytes(B.read_blob(blob).engine)]


def test_runner_checks_its_prepare_option(mlp_tester):
    import et_tensorrt

    with pytest.raises(ValueError, match="prepare='sometimes' is not one of auto, cache, off"):
        et_tensorrt.Runner(mlp_tester.pte, prepare="sometimes")


@pytest.fixture(scope="module")
def named_mlp(tmp_path_factory):
    """The MLP lowered with its engine and weights as named data in a .ptd (issue 27) and a recipe (the default):
    (the saved program, the model, its input)."""
    import torch
    from models import MLP

    import et_tensorrt

    torch.manual_seed(0)
    model, x = MLP().eval(), torch.randn(2, 8)
    folder = tmp_path_factory.mktemp("named")
    saved = et_tensorrt.save(folder / "mlp.pte", model, (x,), min_block_size=1, named_data="ptd", cache=False)
    return saved, model, x


def test_a_named_data_blob_builds_from_its_recipe_over_the_named_weights(named_mlp, cache):
    """Weights stored once, in the .ptd: the recipe rebuilds its initializers from those WEIGHTS entries (views of
    the program's named data, as the delegate resolves them), and builds the ahead-of-time engine byte for byte."""
    from et_tensorrt.inspection import delegate_blobs, named_data

    saved, _, _ = named_mlp
    pte = open(saved.path, "rb").read()
    (data,) = delegate_blobs(pte)
    blob = B.read_blob(data)
    assert blob.recipe.usable and blob.named_engine is not None and blob.engine is None
    assert all(blob.named_weight(i) for i, w in enumerate(blob.weights) if w.nbytes)
    assert not any(e.raw for e in blob.recipe.entries)  # every initializer from the named WEIGHTS: stored once
    named = named_data(pte, saved.data_path)
    with fake_gpu("sm90") as seen:
        _, choice = executors.create_executor(data, cuda_devices=1, named_data=named)
    assert choice["engine_origin"].startswith("built here for sm90") and choice["executor"] == "tensorrt"
    assert seen.engines == [bytes(named[blob.named_engine.key])]


def test_prepare_reads_the_named_weights_from_the_ptd(named_mlp, cache, tmp_path, capsys):
    import torch

    import et_tensorrt
    from et_tensorrt import cli
    from et_tensorrt.inspection import delegate_blobs

    saved, model, x = named_mlp
    prepared = tmp_path / "prepared.pte"
    with fake_gpu("sm90"):
        assert cli.main(["prepare", saved.path, "-o", str(prepared)]) == cli.EXIT_ERROR
        assert "give its .ptd with --data" in capsys.readouterr().err
        assert cli.main(["prepare", saved.path, "--data", saved.data_path, "-o", str(prepared)]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "built here for sm90" in out and f"its weights stay in {saved.data_path}" in out
    (blob,) = [B.read_blob(b) for b in delegate_blobs(prepared.read_bytes())]
    assert blob.engine is not None and blob.named_engine is None  # the engine for this GPU, in the blob
    assert blob.named and all(n.target == B.NAMED_WEIGHT for n in blob.named)  # the weights: still the .ptd's
    assert blob.metadata["prepared"]["gpu"] == "sm90"
    got = et_tensorrt.Runner(prepared, data_path=saved.data_path).run([x])[0]  # no GPU here: PyTorch runs it
    with torch.no_grad():
        torch.testing.assert_close(got, model(x))
