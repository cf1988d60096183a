"""Shared fixtures. Tests run on the default device: MINIGRAD_DEVICE=cuda runs the whole suite on CuPy."""
import numpy as np
import pytest

import minigrad as mg


@pytest.fixture(autouse=True)
def _seed():
    mg.manual_seed(0)
    np.random.seed(0)
    yield


@pytest.fixture
def device():
    return mg.default_device()
