"""Suite-wide: engines built by any test go to a temporary cache, never the user's."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _engine_cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ET_TENSORRT_CACHE_DIR", str(tmp_path_factory.mktemp("engines")))
    yield
    mp.undo()
