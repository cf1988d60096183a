"""What a GPU's allocator would reserve for the bytes the ledger counted: PyTorch's CUDA caching allocator, replayed.

    with mg.profile() as prof:                   # from the first byte: build the model inside the block
        ...
    alloc = prof.caching_allocator()              # the block's buffers, born and freed in order, replayed
    alloc.max_memory_allocated(), alloc.max_memory_reserved()   # torch.cuda's names

The ledger's peak is the most bytes alive at once. nvidia-smi shows more: the CUDA context, and every segment the
caching allocator took from cudaMalloc, which it keeps after the tensors in it die, to reuse without asking CUDA
again. A segment can hold a freed block too small, or in the wrong pool, for the next request, so the allocator
takes another: what it reserves is the live bytes plus that fragmentation. This file replays the ledger's births and
deaths of buffers through the allocator's rules (c10/cuda/CUDACachingAllocator.cpp, unchanged in these respects
from PyTorch 1.x to today's defaults):
  rounding    every request is rounded up to a multiple of 512 bytes
  two pools   requests of at most 1 MiB come from the small pool, whose segments are 2 MiB; larger ones from the
              large pool, whose segments are 20 MiB for a request under 10 MiB, else the request rounded up to 2 MiB
  best fit    a request takes the smallest free block of its pool that is large enough (the lower address on a
              tie), splitting off the rest as a free block when what remains is at least 512 bytes (small pool)
              or more than 1 MiB (large pool)
  merging     a freed block merges with the free blocks beside it in its segment
  keeping     segments are never given back (no empty_cache), so what is reserved only grows
What it does not model: one stream only; no garbage-collection threshold or max_split_size (both off by default);
no cudaMalloc failing and the cache being freed to retry (a run near the GPU's capacity); addresses in the order the
segments were taken, where CUDA's may differ; and only the buffers the ledger sees: a temporary that one of
PyTorch's kernels allocates and frees inside itself is in neither replay nor ledger.

Read next: plan.py's `reserved`, which replays a whole run of a full-size model from its first byte.
"""
import bisect

MIN_BLOCK = 512                  # kMinBlockSize: every size is rounded up to a multiple of this
SMALL_SIZE = 1 << 20             # kSmallSize: the largest request the small pool serves
SMALL_SEGMENT = 2 << 20          # kSmallBuffer: the small pool's segments
LARGE_SEGMENT = 20 << 20         # kLargeBuffer: a large-pool segment for a request under MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 << 20       # kMinLargeAlloc
ROUND_LARGE = 2 << 20            # kRoundLarge: a larger request gets a segment of its own size rounded to this


def round_size(nbytes):
    return MIN_BLOCK * max(1, -(-nbytes // MIN_BLOCK))


def segment_size(size):
    """The cudaMalloc a request of `size` (rounded) makes when no free block fits (get_allocation_size)."""
    if size <= SMALL_SIZE:
        return SMALL_SEGMENT
    if size < MIN_LARGE_ALLOC:
        return LARGE_SEGMENT
    return ROUND_LARGE * -(-size // ROUND_LARGE)


class _Block:
    __slots__ = ("size", "segment", "offset", "small", "prev", "next", "free")

    def __init__(self, size, segment, offset, small):
        self.size, self.segment, self.offset, self.small = size, segment, offset, small  # small: its segment's pool
        self.prev = self.next = None
        self.free = True

    def key(self):  # the pools' order: size, then address
        return (self.size, self.segment, self.offset)


class CachingAllocator:
    """PyTorch's CUDA caching allocator, as bookkeeping: malloc(key, nbytes) and free(key) move no memory; the
    queries answer as torch.cuda's do (memory_allocated counts the rounded blocks handed out, memory_reserved the
    segments taken)."""

    def __init__(self):
        self._pools = {True: [], False: []}   # small? -> [(size, segment, offset, block)], sorted: best fit first
        self._live = {}                       # key -> its block
        self._segments = 0
        self._allocated = self._reserved = self._peak_allocated = self._peak_reserved = 0

    def malloc(self, key, nbytes):
        if key in self._live:
            raise ValueError(f"CachingAllocator.malloc: {key!r} is allocated already; free it first")
        if nbytes == 0:  # an empty tensor: PyTorch's allocator hands out no block at all
            self._live[key] = None
            return
        size = round_size(nbytes)
        small = size <= SMALL_SIZE
        pool = self._pools[small]
        i = bisect.bisect_left(pool, (size,))
        if i < len(pool):
            block = pool.pop(i)[3]
        else:  # no free block fits: a new segment (cudaMalloc), kept from now on
            self._segments += 1
            block = _Block(segment_size(size), self._segments, 0, small)
            self._reserved += block.size
            self._peak_reserved = max(self._peak_reserved, self._reserved)
        rest = block.size - size
        if rest >= MIN_BLOCK if small else rest > SMALL_SIZE:  # should_split
            tail = _Block(rest, block.segment, block.offset + size, small)
            tail.prev, tail.next = block, block.next
            if block.next is not None:
                block.next.prev = tail
            block.next, block.size = tail, size
            bisect.insort(pool, (*tail.key(), tail))
        block.free = False
        self._live[key] = block
        self._allocated += block.size
        self._peak_allocated = max(self._peak_allocated, self._allocated)

    def free(self, key):
        block = self._live.pop(key)
        if block is None:
            return
        self._allocated -= block.size
        block.free = True
        pool = self._pools[block.small]
        for other in (block.prev, block.next):  # merge with a free neighbour in the same segment
            if other is not None and other.free:
                pool.pop(bisect.bisect_left(pool, other.key()))
                first, second = (other, block) if other is block.prev else (block, other)
                first.size += second.size
                first.next = second.next
                if second.next is not None:
                    second.next.prev = first
                block = first
        bisect.insort(pool, (*block.key(), block))

    def replay(self, lifetimes):
        """Apply the births and deaths of `lifetimes`, in order: (key, nbytes) for a buffer born, (key, None) for one
        freed (the ledger's record, prof.buffer_lifetimes()). Returns self."""
        for key, nbytes in lifetimes:
            if nbytes is None:
                self.free(key)
            else:
                self.malloc(key, nbytes)
        return self

    # torch.cuda's queries
    def memory_allocated(self):
        return self._allocated

    def max_memory_allocated(self):
        return self._peak_allocated

    def memory_reserved(self):
        return self._reserved

    def max_memory_reserved(self):
        return self._peak_reserved


def replay(lifetimes):
    """A CachingAllocator after `lifetimes` (CachingAllocator.replay)."""
    return CachingAllocator().replay(lifetimes)
