"""The host memory pool (NOTE [host memory pool] in backend/pool.py): it lends a block again only when nothing can
read or write it, it changes no result, and it takes the page faults away. No timing here (bench.py times it)."""
import os
import platform
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad as mg
from minigrad import backend
from minigrad.ops import linear as ops_linear  # its matmul reads POOL_MIN
from minigrad.gpt import GPT, GPTConfig

from on_device import host_only

HOST = np.zeros(1)  # any host array: `empty` lends on its device
BIG = (128, 256)    # float32: 128 KiB, above the pool's smallest size


def lend(shape=BIG, dtype=np.float32):
    return backend.empty(shape, dtype, HOST)


def test_a_freed_array_is_lent_again_and_a_held_one_is_not():
    a, b = lend(), lend()
    assert not np.shares_memory(a, b)
    block = id(a.base)
    del a
    c = lend()
    assert id(c.base) == block  # nothing held it: the same memory again, no new pages
    assert not np.shares_memory(c, b)


@pytest.mark.parametrize("make_view", [lambda a: a.T, lambda a: a[3:], lambda a: a.reshape(-1),
                                       lambda a: a[None], lambda a: np.asarray(a)[::2]])
def test_a_view_keeps_its_block_from_being_lent(make_view):
    a = lend()
    a.fill(7)
    view = make_view(a)
    del a
    for _ in range(4):
        b = lend()
        assert not np.shares_memory(b, view)
        b.fill(-1)
    assert (view == 7).all()


def test_a_block_serves_every_shape_and_dtype_of_its_size():
    a = lend((128, 256), np.float32)
    block = id(a.base)
    del a
    b = lend((256, 64), np.float64)  # the same 128 KiB
    assert id(b.base) == block and b.shape == (256, 64) and b.dtype == np.float64 and b.flags.c_contiguous


def test_is_view_tells_a_lent_array_from_a_view():
    """A lent array is what a new array is on every device (NOTE [a lent array owns its views], backend/pool.py): not
    a view, with views or without, and the owner of its views, which stay views after it dies. Once a view that
    alone used its block passed for no view, so a leaf took it as its .grad on the CPU where 'meta' copied it."""
    plain = np.ones(BIG, np.float32)
    for a in (lend(), plain):
        assert not backend.is_view(a)  # an owner: a gradient handed over may be taken in place
        v = a.T
        assert not backend.is_view(a) and backend.is_view(v) and v.base is a and backend.owner(v) is a
        r = a.reshape(-1)
        del a
        assert backend.is_view(v) and backend.is_view(r)  # alone on their memory now, and still views


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["lend", "view", "drop"]), st.integers(0, 10**6)), max_size=40))
def test_live_arrays_never_share_a_block(script):
    """Any order of lending, viewing and dropping: every live array keeps the values written into it, and no two
    arrays lent separately ever overlap while both live."""
    live = []  # (array, the value written into it, which lend it came from)
    for n, (what, pick) in enumerate(script):
        if what == "lend" or not live:
            a = lend((64, 256 + 64 * (pick % 2)))  # two shapes: two lists of blocks
            a.fill(n)
            live.append((a, n, n))
        elif what == "view":
            a, value, origin = live[pick % len(live)]
            live.append((a[pick % 3:], value, origin))
        else:
            live.pop(pick % len(live))
        for a, value, origin in live:
            assert (a == value).all()
            assert all(not np.shares_memory(a, b) for b, _, o in live if o != origin)


def test_tracemalloc_sees_every_array_while_it_traces():
    """The tests that hold the ledger against tracemalloc need each array to be malloc's: the pool steps aside."""
    tracemalloc.start()
    try:
        a = lend()
    finally:
        tracemalloc.stop()
    assert a.base is None and lend().base is not None


def test_empty_cache_gives_back_the_free_blocks_only():
    backend.empty_cache("cpu")
    held = backend.memory_reserved("cpu")
    a, b = lend(), lend()
    assert backend.memory_reserved("cpu") == held + a.nbytes + b.nbytes
    del b
    backend.empty_cache("cpu")
    assert backend.memory_reserved("cpu") == held + a.nbytes  # a is lent: it stays
    del a
    backend.empty_cache("cpu")
    assert backend.memory_reserved("cpu") == held


def test_off_and_small_arrays_come_from_numpy():
    with backend.host_pool(False):
        assert lend().base is None
    assert lend((4, 4)).base is None  # below the pool's smallest size: malloc's free lists do not fault
    assert lend().base is not None


def test_over_the_limit_arrays_come_from_numpy(monkeypatch):
    shape = (3, 8192)       # 96 KiB of float32: above POOL_MIN, so only the limit keeps it out of the pool
    backend.empty_cache("cpu")   # no free block left that the pool could lend again without growing
    monkeypatch.setattr(backend.pool, "_POOL_LIMIT", backend.memory_reserved("cpu"))
    a = lend(shape)
    assert a.base is None  # not pooled: freed to malloc as without the pool
    monkeypatch.undo()
    assert lend(shape).base is not None  # under the real limit the pool lends it: the limit made the difference


def gpt_grads(steps):
    """The gradients of a small GPT after `steps` training steps (dropout on: the pool's arrays hold masks too)."""
    mg.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=4, n_embd=64, dropout=0.1))
    opt = mg.optim.AdamW(model.parameters(), lr=1e-2)
    idx, targets = mg.randint(0, 64, (4, 32)), mg.randint(0, 64, (4, 32))
    for _ in range(steps):
        opt.zero_grad()
        model(idx, targets)[1].backward()
        opt.step()
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


@host_only("the host pool lends the arrays of a model on 'cpu' only")
def test_training_gives_the_same_bits_with_and_without_the_pool(monkeypatch):
    """Three steps reuse the pool's blocks for activations, gradients, temporaries and the optimizer's scratch: a
    block lent while still in use would change some gradient. The pool's smallest size is lowered so that this
    small model's arrays (the attention's, the copies its reshapes make, log_softmax's) all take the pool's path."""
    monkeypatch.setattr(backend.pool, "POOL_MIN", 256)  # where empty() and the others read it
    monkeypatch.setattr(ops_linear, "POOL_MIN", 256)    # where matmul reads it
    before = backend.memory_reserved("cpu")
    pooled = gpt_grads(3)
    assert backend.memory_reserved("cpu") > before
    with backend.host_pool(False):
        plain = gpt_grads(3)
    assert pooled.keys() == plain.keys()
    for name in pooled:
        np.testing.assert_array_equal(pooled[name], plain[name], err_msg=name)


def test_in_place_on_an_op_output_still_records_and_a_view_still_refuses():
    x = mg.randn(*BIG, requires_grad=True)
    y = x * 2  # its array is lent by the pool
    y += 1     # not a view: allowed while recording, as for any fresh result
    y.sum().backward()
    assert (x.grad.numpy() == 2).all()
    z = x * 3
    v = z[1:]
    with pytest.raises(RuntimeError, match="in place on a view"):
        z += 1
    del v


STEPS = """
import resource
import minigrad as mg
mg.manual_seed(0)
layers = []
for _ in range(8):
    layers += [mg.nn.Linear(512, 512), mg.nn.Tanh()]
model, x = mg.nn.Sequential(*layers), mg.randn(256, 512)
def step():
    model.zero_grad()
    model(x).sum().backward()
step(); step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


def faults_per_step(pool):
    env = {k: v for k, v in os.environ.items() if k not in ("MINIGRAD_HOST_POOL", "MINIGRAD_KEEP_HOST_MEMORY")}
    env["MINIGRAD_HOST_POOL"] = "1" if pool else "0"
    r = subprocess.run([sys.executable, "-c", STEPS], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return float(r.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="how malloc gives memory back is the C library's")
@host_only("page faults of the host's memory, which a model on 'cpu' takes from the host pool")
def test_the_pool_takes_the_page_faults_away():
    """A step of an 8 x 512 MLP at batch 256 makes about 4 MiB of activations and 8 MiB of gradients: without the
    pool malloc gives them back and faults them in again every step (about 2,000 faults); with it, none."""
    without, with_pool = faults_per_step(False), faults_per_step(True)
    assert without > 500
    assert with_pool < without / 10
