"""The CuPy stand-in (tests/cupy_standin) that `make test`'s second pass runs minigrad on: it offers nothing that the
real CuPy lacks (api.json, dumped from the real wheel), and it is as strict as CuPy where CuPy and NumPy differ.
Runs on both passes: on the first it loads the stand-in for this file only."""
import os
import sys

import numpy as np
import pytest
import scipy.special

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cupy_standin")


@pytest.fixture(scope="module")
def cupy():
    loaded = sys.modules.get("cupy")
    if loaded is not None:  # the second pass (the stand-in), or a GPU machine (the real CuPy)
        if not getattr(loaded, "_STANDIN", False):
            pytest.skip("the real CuPy is loaded here: the stand-in's checks run where it is not")
        import cupyx.scipy.special  # noqa: F401
        yield loaded
        return
    sys.path.insert(0, STANDIN)
    try:
        import cupy
        import cupyx.scipy.special  # noqa: F401
    finally:
        sys.path.remove(STANDIN)
    yield cupy
    for name in [n for n in sys.modules if n.split(".")[0] in ("cupy", "cupyx")]:
        del sys.modules[name]  # minigrad imported no CuPy on this pass, and keeps none


def public(obj):
    return {n for n in dir(obj) if not n.startswith("_") or n.startswith("__") and n.endswith("__")}


def test_the_stand_in_offers_nothing_the_real_cupy_lacks(cupy):
    import cupyx
    api = cupy._API
    modules = {"cupy": cupy, "cupy.cuda": cupy.cuda, "cupy.cuda.runtime": cupy.cuda.runtime, "cupyx": cupyx,
               "cupyx.scipy": cupyx.scipy, "cupyx.scipy.special": cupyx.scipy.special}
    for name, module in modules.items():
        offered = {n for n in public(module) if not n.startswith("__")} | set(vars(module).get("__all__", ()))
        extra = offered - set(api["modules"][name])
        assert not extra, f"{name} offers what CuPy {api['cupy_version']} does not have: {sorted(extra)}"
    classes = {"cupy.ndarray": cupy.ndarray, "cupy.ufunc": cupy.ufunc, "cupy.cuda.MemoryPool": cupy.cuda.MemoryPool,
               "cupy.cuda.PinnedMemoryPool": cupy.cuda.PinnedMemoryPool, "cupy.cuda.MemoryHook": cupy.cuda.MemoryHook,
               "cupy.cuda.Device": cupy.cuda.Device, "cupy.cuda.Stream": cupy.cuda.Stream,
               "cupy.cuda.Event": cupy.cuda.Event, "cupy.cuda.MemoryPointer": cupy.cuda.MemoryPointer}
    machinery = {"__weakref__", "__dict__", "__module__"}  # a Python class's, where CuPy's are Cython's
    for name, cls in classes.items():
        extra = public(cls) - set(api["classes"][name]) - machinery
        assert not extra, f"{name} offers what CuPy {api['cupy_version']} does not have: {sorted(extra)}"
    assert "__index__" not in public(cupy.ndarray)  # a 0-d array is no Python int, in CuPy either
    for missing in ("errstate", "float128", "insert", "nanquantile"):  # NumPy has them, CuPy does not
        with pytest.raises(AttributeError, match=rf"no attribute '{missing}'"):
            getattr(cupy, missing)
    assert cupy.float32 is np.float32 and cupy.dtype is np.dtype  # what CuPy takes from NumPy, the stand-in too


def test_its_arrays_stay_on_the_device_until_asked(cupy):
    x = cupy.arange(6, dtype=np.float32).reshape(2, 3)
    assert isinstance(x, cupy.ndarray) and not isinstance(x, np.ndarray)
    implicit = r"^Implicit conversion to a NumPy array is not allowed\. Please use `\.get\(\)` to construct a NumPy"
    with pytest.raises(TypeError, match=implicit):
        np.asarray(x)
    with pytest.raises(TypeError, match=implicit):
        np.testing.assert_allclose(x, np.zeros((2, 3)))
    host = x.get()
    assert type(host) is np.ndarray and host.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert type(cupy.asnumpy(x)) is np.ndarray and cupy.asnumpy(host) is host
    for mixed in (lambda: x + np.ones(3), lambda: np.ones(3) * x, lambda: cupy.multiply(x, np.ones(3)),
                  lambda: cupy.concatenate([x, np.ones((1, 3))])):
        with pytest.raises(TypeError, match=r"Unsupported type <class 'numpy\.ndarray'>"):
            mixed()
    assert type(x + np.float32(1)) is cupy.ndarray and (x * 2).get()[1, 2] == 10  # NumPy scalars are fine
    y = cupy.asarray(host)  # the explicit way over
    assert type(y) is cupy.ndarray and y is not x


def test_numpy_functions_dispatch_to_it_or_fail(cupy):
    x = cupy.arange(4, dtype=np.float64)
    for result in (np.exp(x), np.where(x > 1, x, 0.0), np.concatenate([x, x]), np.matmul(x, x), np.sum(x)):
        assert type(result) is cupy.ndarray
    assert np.sum(x).ndim == 0 and type(x.max()) is cupy.ndarray  # reductions: 0-d arrays, not NumPy scalars
    assert type(x[1]) is cupy.ndarray and x[1].ndim == 0 and float(x[1]) == 1.0
    with pytest.raises(TypeError, match=r"no implementation found for 'numpy\.insert'"):
        np.insert(x, 0, 1.0)  # NumPy has it, CuPy does not
    with pytest.raises(TypeError):
        [10, 20][x.astype(np.int64)[1]]  # no __index__
    with pytest.raises(NotImplementedError, match=r"cupy_maximum\.reduce"):
        np.maximum.reduce(x)  # CuPy reduces with add and multiply only
    with pytest.raises(TypeError):
        np.add.at(x, (cupy.array([0]),), 1.0)  # a tuple key is not an array: CuPy's __array_ufunc__ declines
    with pytest.raises(TypeError, match=r"cupy\.add\.at only supports"):
        cupy.add.at(cupy.zeros(3, dtype=np.int8), cupy.array([0]), 1)
    assert x.astype(np.float64, copy=False) is x


def test_integer_array_indices_wrap_and_repeated_writes_keep_the_first(cupy):
    x = cupy.arange(3)
    assert x[cupy.array([1, 3, -4])].tolist() == [1, 0, 2]  # out of range: wrapped, as CuPy documents
    assert x[[4]].tolist() == [1] and x.take(cupy.array([5])).tolist() == [2]
    with pytest.raises(IndexError, match=r"out of bounds"):
        x[3]  # an integer is still checked
    x[[3]] = 9
    assert x.tolist() == [9, 1, 2]
    y = cupy.zeros(2)
    y[cupy.array([0, 0, 1])] = cupy.array([1.0, 2.0, 3.0])  # CuPy: which write stays is undefined
    assert y.tolist() == [1.0, 3.0]  # here the first, so that code relying on NumPy's last fails
    z = cupy.zeros(4, dtype=np.float32)
    np.add.at(z, cupy.array([1, 1, 5]), 1.0)  # ufunc.at adds every repeat, and wraps too
    assert z.tolist() == [0.0, 3.0, 0.0, 0.0]
    a = cupy.zeros((2, 3))
    assert a[0].base is a and a.T.base is a and a.reshape(-1)[1:].base is a and a.base is None


def test_its_memory_pool_counts_as_cupys(cupy):
    pool = cupy.get_default_memory_pool()
    seen = []

    class Hook(cupy.cuda.MemoryHook):
        def malloc_postprocess(self, **kw):
            seen.append(("malloc", kw["size"], kw["mem_size"]))

        def free_postprocess(self, **kw):
            seen.append(("free", kw["mem_size"]))

    used, total = pool.used_bytes(), pool.total_bytes()
    with Hook():
        x = cupy.empty(1000, dtype=np.float32)  # 4,000 bytes: a block of 4,096 (multiples of 512)
        assert pool.used_bytes() == used + 4096 and pool.total_bytes() >= total + 4096 - pool.free_bytes()
        del x
    assert ("malloc", 4000, 4096) in seen and ("free", 4096) in seen
    assert pool.used_bytes() == used and pool.free_bytes() >= 4096  # kept for the next request
    pool.free_all_blocks()
    assert pool.total_bytes() == pool.used_bytes() == used and pool.n_free_blocks() == 0


def test_cupyx_scipy_special(cupy):
    import cupyx.scipy.special as special
    x = cupy.asarray(np.linspace(-3, 3, 7))
    for name in ("ndtr", "erf", "log_ndtr"):
        got = getattr(special, name)(x)
        assert type(got) is cupy.ndarray
        np.testing.assert_allclose(got.get(), getattr(scipy.special, name)(np.linspace(-3, 3, 7)))
    with pytest.raises(AttributeError):
        special.owens_t  # SciPy has it, CuPy does not
