"""Suite-wide: engines built by any test go to the suite's own build cache, never the user's (``_engine_cache_dir``);
every test starts from one RNG state; under pytest-xdist's ``--dist loadgroup`` (.ci/run) a module's tests that share
a module-scoped fixture run on one worker; the programs several modules share are lowered once per session
(tests/artifacts.py)."""

import json
from pathlib import Path

import engine_cache
import pytest
import torch

ARTIFACTS = "artifacts"  # tests/artifacts.py: its fixtures are the shared programs
pytest_plugins = [ARTIFACTS]

# The last recorded run's seconds (scripts/test_durations.py --write): the slowest modules start first, and a test
# that took SLOW_SECONDS or more is in the slow tier (pyproject.toml's marker) with those marked so by hand. A module
# whose tests share a module-scoped fixture or a program of tests/artifacts.py (a lowered model) and took
# SLOW_MODULE_SECONDS or more in all is slow as a whole: in the fast tier its first fast test would pay the lowering.
DURATIONS = json.loads((Path(__file__).parent / "durations.json").read_text())
SLOW_SECONDS = 5.0
SLOW_MODULE_SECONDS = 30.0
UNRECORDED_MODULE_SECONDS = 10.0  # a new module: scheduled as a middling one


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # Before the test's fixtures are set up: unseeded torch.randn inputs and module initializations (most tests
    # use them) are the same whatever ran before, in a full run, a -k selection or another order.
    torch.manual_seed(0)


def pytest_configure(config):
    # pytest-xdist registers it; without the plugin (-p no:xdist) the mark is known all the same
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist's --dist loadgroup runs on one worker")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the marks
def pytest_collection_modifyitems(items):
    """Tiers and order (see DURATIONS above). A module-scoped fixture (a lowered model, most of them) is made once per
    worker that runs one of its tests:
    with ``--dist load`` a module split between the workers lowers it on both. A module with such a fixture is one
    xdist group, so ``--dist loadgroup`` sends its tests to one worker (the other tests go one by one, as with
    ``load``). The whole module: a test may reach its fixture through ``request.getfixturevalue``."""

    def module(item):
        return item.nodeid.split("::", 1)[0]

    def fixtures(item):
        info = getattr(item, "_fixtureinfo", None)  # a Function's; other items have none
        return [d for defs in info.name2fixturedefs.values() for d in defs] if info else []

    def artifact(fixture):  # a program lowered once per session for every worker (tests/artifacts.py)
        return getattr(fixture.func, "__module__", None) == ARTIFACTS

    grouped = {module(item) for item in items if any(d.scope == "module" for d in fixtures(item))}
    shared = grouped | {module(item) for item in items if any(artifact(d) for d in fixtures(item))}
    modules, tests = DURATIONS["modules"], DURATIONS["tests"]
    for item in items:
        name = module(item)
        if name in grouped:
            item.add_marker(pytest.mark.xdist_group(name))
        slow_module = name in shared and modules.get(name, 0.0) >= SLOW_MODULE_SECONDS
        if item.get_closest_marker("slow") is None and (slow_module or tests.get(item.nodeid, 0.0) >= SLOW_SECONDS):
            item.add_marker(pytest.mark.slow)
        item.user_properties.append(("tier", "slow" if item.get_closest_marker("slow") else "fast"))
    # Slowest modules first (pytest-xdist hands work out in this order): the longest groups do not start last.
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-modules.get(module(item), UNRECORDED_MODULE_SECONDS), module(item), order[id(item)]))


@pytest.fixture(autouse=True, scope="session")
def _engine_cache_dir(tmp_path_factory):
    """The suite's build cache (tests/engine_cache.py): kept between runs of the same code where the machine keeps
    ``ET_TENSORRT_TEST_CACHE_DIR``, else a fresh folder of the session."""
    mp = pytest.MonkeyPatch()
    mp.setenv("ET_TENSORRT_CACHE_DIR", str(engine_cache.folder(tmp_path_factory)))
    yield
    mp.undo()


@pytest.fixture
def fresh_engine_cache(tmp_path, monkeypatch):
    """An empty build cache of the test's own, for a test whose claim needs the ONNX export, validation or engine
    build to run here (a hit in the suite's cache would skip them)."""
    folder = tmp_path / "fresh-engines"
    monkeypatch.setenv("ET_TENSORRT_CACHE_DIR", str(folder))
    return folder
