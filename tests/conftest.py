"""Suite-wide: engines built by any test go to a temporary cache, never the user's; every test starts from one
RNG state."""

import pytest
import torch


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # Before the test's fixtures are set up: unseeded torch.randn inputs and module initializations (most tests
    # use them) are the same whatever ran before, in a full run, a -k selection or another order.
    torch.manual_seed(0)


@pytest.fixture(autouse=True, scope="session")
def _engine_cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ET_TENSORRT_CACHE_DIR", str(tmp_path_factory.mktemp("engines")))
    yield
    mp.undo()
