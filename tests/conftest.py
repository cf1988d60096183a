"""Shared fixtures. Tests run on the default device: MINIGRAD_DEVICE=cuda runs the whole suite on CuPy."""
import gc
import importlib
import os

# One BLAS/OpenMP thread, set before anything imports NumPy (OpenBLAS reads these once, when it loads; PyTorch
# reads OMP_NUM_THREADS when it is imported). The tests' arrays are small: on 2 cores a second BLAS thread only
# spins against pytest and the lessons' subprocesses (which inherit this environment). `make test` sets the same;
# setdefault keeps whatever the caller chose.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import minigrad as mg  # noqa: E402
from minigrad.tensor import active_profiler, is_keeping_saved, is_recomputing  # noqa: E402


@pytest.fixture(autouse=True)
def _seed_and_a_clean_tape():
    """Every test starts from seed 0, and must leave the tape's switches as it found them."""
    mg.manual_seed(0)
    np.random.seed(0)
    yield
    assert is_keeping_saved() and not is_recomputing() and mg.is_grad_enabled(), "a test left the tape's switches set"
    assert active_profiler() is None, "a test left a profile active"
    tape = importlib.import_module("minigrad.tensor")  # the module (mg.tensor is the function)
    selective = importlib.import_module("minigrad.checkpoint.policies")  # NOTE [placeholders]
    assert not tape._watchers and not selective._placeholders, "a test left a checkpoint's read guards set"


@pytest.fixture
def device():
    return mg.default_device()


@pytest.fixture(scope="module", autouse=True)
def _frozen_heap():
    """What is alive when a test file starts (modules, PyTorch's included, the tests' parameters, what earlier files
    kept) moves to the collector's permanent generation, where gc.collect() no longer walks it.

    NOTE [gc.freeze]: with PyTorch imported a worker holds about 250,000 objects, and each gc.collect() walked all
    of them: 0.2-0.36 s, for nothing, since they live until the end. The profiler's tests collect before every
    test (so that an earlier test's garbage cannot die inside a profiled block) and exercise 11's check before
    every profiled run: 48 s of test_profiler.py's 64 s were that, in a CPU pass on 2 workers, and the collector's
    own full collections walk them too. Frozen once per file, not once per session: the modules the tests import
    themselves (torch.distributed, sympy under torch) add 120,000 objects after a few hundred tests. Time in the
    collector (gc.callbacks) of a CPU pass's two workers, frozen once after collection: 25.5 s; once per file:
    13.0 s. What is frozen is never collected, so it can never die mid-block either; everything a file's tests
    make is collected as before. (gc.freeze is what CPython's documentation advises for a heap that is made once
    and kept.)"""
    gc.collect()
    gc.freeze()
    yield


def pytest_collection_modifyitems(config, items):
    """A test marked host_only (tests/on_device.py) checks the host itself: skipped on 'cuda', with its reason."""
    if mg.default_device() == "cpu":
        return
    for item in items:
        marker = item.get_closest_marker("host_only")
        if marker is not None:
            item.add_marker(pytest.mark.skip(reason=f"host only: {marker.args[0] if marker.args else ''}"))
