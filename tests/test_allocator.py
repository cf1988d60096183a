"""PyTorch's CUDA caching allocator, replayed (profiler/allocator.py): its rules one by one, its bookkeeping under
generated programs, the ledger's births and deaths it replays, and the planner's run through it.

The rules are checked against their numbers in c10/cuda/CUDACachingAllocator.cpp (no GPU here to ask); the
property test holds for any sequence: every segment is tiled exactly by its blocks, no two free neighbours are left
unmerged, allocated is the live blocks' sum and never above reserved, reserved never shrinks.
"""
import hypothesis.strategies as st
import pytest
from hypothesis import given, settings

import minigrad as mg
from minigrad import plan
from minigrad.profiler.allocator import (LARGE_SEGMENT, MIN_BLOCK, SMALL_SEGMENT, CachingAllocator, replay,
                                         round_size, segment_size)

MiB = 2 ** 20


def test_requests_round_up_to_512_bytes():
    assert [round_size(n) for n in (0, 1, 512, 513, 1000, 4096)] == [512, 512, 512, 1024, 1024, 4096]


def test_segments_by_pool_and_size():
    assert segment_size(512) == segment_size(MiB) == SMALL_SEGMENT == 2 * MiB    # the small pool: 2 MiB segments
    assert segment_size(MiB + 512) == segment_size(10 * MiB - 512) == LARGE_SEGMENT == 20 * MiB
    assert segment_size(10 * MiB) == 10 * MiB                                     # from 10 MiB: rounded to 2 MiB
    assert segment_size(11 * MiB) == 12 * MiB


def test_small_requests_share_one_segment():
    a = CachingAllocator()
    for i in range(4):
        a.malloc(i, 100_000)  # 4 x 100,352 bytes rounded, in one 2 MiB segment
    assert a.memory_reserved() == 2 * MiB
    assert a.memory_allocated() == 4 * round_size(100_000)


def test_a_freed_block_is_reused_before_a_new_segment():
    a = CachingAllocator()
    a.malloc("x", 30 * MiB)
    a.free("x")
    a.malloc("y", 16 * MiB)  # best fit: the 30 MiB block, split (14 MiB left over is more than 1 MiB)
    a.malloc("z", 14 * MiB)  # the rest of it
    assert a.memory_reserved() == a.max_memory_reserved() == 30 * MiB
    assert a.memory_allocated() == 30 * MiB


def test_a_large_block_is_not_split_for_a_remainder_of_1_mib_or_less():
    a = CachingAllocator()
    a.malloc("x", 12 * MiB)
    a.free("x")
    a.malloc("y", 11 * MiB)  # 1 MiB would remain: not split, so y holds all 12 MiB
    assert a.memory_allocated() == 12 * MiB
    a.malloc("z", 512)       # and a small request cannot come from the large pool
    assert a.memory_reserved() == 12 * MiB + SMALL_SEGMENT


def test_fragmentation_reserves_more_than_is_ever_alive():
    """Two 8 MiB tensors share a 20 MiB segment; the one left alive splits it, so a 12 MiB request that would fit in
    the free bytes needs a segment of its own: reserved 32 MiB for a peak of 16 MiB allocated."""
    a = CachingAllocator()
    a.malloc("a", 8 * MiB)
    a.malloc("b", 8 * MiB)
    a.free("a")
    a.malloc("c", 12 * MiB)
    assert a.max_memory_allocated() == 20 * MiB
    assert a.max_memory_reserved() == 20 * MiB + 12 * MiB
    a.free("b")               # b merges with a's block and the 4 MiB tail: the segment is one free block again
    a.malloc("d", 20 * MiB)
    assert a.memory_reserved() == 32 * MiB


def test_an_empty_tensor_takes_no_block():
    a = CachingAllocator()
    a.malloc("empty", 0)
    a.free("empty")
    assert a.max_memory_reserved() == a.max_memory_allocated() == 0


def test_a_key_is_allocated_once():
    a = CachingAllocator()
    a.malloc(1, 10)
    with pytest.raises(ValueError, match="allocated already"):
        a.malloc(1, 10)


def _check_invariants(a):
    blocks = [b for pool in a._pools.values() for *_, b in pool] + [b for b in a._live.values() if b is not None]
    by_segment = {}
    for b in blocks:
        by_segment.setdefault(b.segment, []).append(b)
    reserved = 0
    for segment in by_segment.values():
        segment.sort(key=lambda b: b.offset)
        assert segment[0].offset == 0 and segment[0].prev is None and segment[-1].next is None
        for x, y in zip(segment, segment[1:]):
            assert x.offset + x.size == y.offset and x.next is y and y.prev is x    # the blocks tile the segment
            assert not (x.free and y.free)                                        # free neighbours merged
        size = segment[-1].offset + segment[-1].size
        assert size == (SMALL_SEGMENT if segment[0].small else size) and size % MIN_BLOCK == 0
        reserved += size
    assert reserved == a.memory_reserved()
    assert a.memory_allocated() == sum(b.size for b in a._live.values() if b is not None) <= a.memory_reserved()
    assert all(b.free for pool in a._pools.values() for *_, b in pool)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 30 * MiB)), min_size=1, max_size=60))
def test_generated_programs_keep_the_books(program):
    a, live, reserved, n = CachingAllocator(), [], 0, 0
    for alloc, size in program:
        if alloc or not live:
            a.malloc(n, size)
            live.append(n)
            n += 1
        else:
            a.free(live.pop(size % len(live)))
        assert a.memory_reserved() >= reserved  # never given back
        reserved = a.memory_reserved()
        _check_invariants(a)
    assert a.max_memory_reserved() == a.memory_reserved()


def test_the_ledger_records_each_buffer_born_and_freed_in_order():
    """What a profile replays is every buffer the ledger counted: the peak allocated is the ledger's peak, each buffer
    rounded up to 512 bytes, and every death follows its birth."""
    mg.manual_seed(0)
    model = mg.nn.Sequential(mg.nn.Linear(64, 256), mg.nn.GELU(), mg.nn.Linear(256, 8))
    opt = mg.optim.AdamW(model.parameters())
    with mg.profile() as prof:
        for _ in range(2):
            loss = (model(mg.randn(32, 64)) ** 2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
    lifetimes, born = prof.buffer_lifetimes(), set()
    for key, nbytes in lifetimes:
        if nbytes is None:
            born.remove(key)
        else:
            assert key not in born
            born.add(key)
    alloc = prof.caching_allocator()
    assert prof.peak_bytes() <= alloc.max_memory_allocated() <= prof.peak_bytes() + MIN_BLOCK * len(lifetimes)
    assert alloc.max_memory_reserved() >= alloc.max_memory_allocated()
    assert replay(lifetimes).max_memory_reserved() == alloc.max_memory_reserved()


SMALL_BERT = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=256, vocab_size=500)


@pytest.mark.parametrize("precision", ["fp32", "fp16-mixed"])
def test_the_planners_run_reserves_the_same_on_meta_as_for_real(precision):
    """The replay of a run on 'meta' is the replay of the same run on the CPU, segment for segment; from the second
    step on a step finds what the one before left, so a third reserves nothing more."""
    setup = plan.Setup("bert-base-uncased", 2, 32, grad_accum=2, checkpointing="every", precision=precision,
                       software=plan.Software(zero_grad="zeros"), overrides=SMALL_BERT)
    meta, per_step = plan.reserved(setup, steps=3)
    real, real_per_step = plan.reserved(setup, steps=3, device="cpu")
    assert per_step == real_per_step
    assert (meta.max_memory_allocated(), meta.max_memory_reserved()) == \
        (real.max_memory_allocated(), real.max_memory_reserved())
    assert per_step[1] == per_step[2] >= per_step[0]
    step = plan.predict(setup)  # the step's own peak, after a warm-up: what the run's second step holds at most
    assert step.bytes["total"] <= meta.max_memory_allocated() <= meta.max_memory_reserved()


def test_memory_reserved_flag(capsys):
    from minigrad.__main__ import main
    argv = ["memory", "--model", "bert-base-uncased", "--batch-size", "1", "--seq-len", "64", "--reserved"]
    assert main(argv + ["--json"]) == 0
    out = __import__("json").loads(capsys.readouterr().out)
    assert out["total"] <= out["allocated"] <= out["reserved"]
    assert main(argv) == 0
    assert "caching allocator" in capsys.readouterr().out
