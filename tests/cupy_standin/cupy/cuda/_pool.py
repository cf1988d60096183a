"""The stand-in's memory pool: CuPy's accounting of device memory, for arrays whose values live in NumPy.

CuPy's pool rounds every request up to a multiple of 512 bytes, keeps what is freed for the next request of that
size, and hands it back to the device only at free_all_blocks(). The stand-in counts the same way (NumPy still
owns the memory): used_bytes are the live arrays' blocks, total_bytes those and the free ones. It does not split
or merge blocks as CuPy's arenas do, so total_bytes can read higher than on a GPU; used_bytes reads the same.
"""
import threading

ROUND = 512
_hooks = threading.local()  # the MemoryHooks entered in this thread (CuPy's are per thread too)


def hooks():
    return getattr(_hooks, "stack", ())


def rounded(nbytes):
    return -(-nbytes // ROUND) * ROUND


class MemoryPool:
    """cupy.cuda.MemoryPool's counts and methods, for the stand-in's arrays."""

    def __init__(self):
        self._used = 0
        self._free = {}  # rounded size -> free blocks of that size
        self._free_bytes = 0
        self._limit = 0

    def used_bytes(self):
        return self._used

    def free_bytes(self):
        return self._free_bytes

    def total_bytes(self):
        return self._used + self._free_bytes

    def n_free_blocks(self):
        return sum(self._free.values())

    def free_all_blocks(self, stream=None):
        self._free.clear()
        self._free_bytes = 0

    def free_all_free(self):
        self.free_all_blocks()

    def set_limit(self, size=None, fraction=None):
        self._limit = int(size or 0)

    def get_limit(self):
        return self._limit

    def _take(self, size, mem_size, ptr):
        for hook in hooks():
            hook.malloc_preprocess(device_id=0, size=size, mem_size=mem_size)
        if self._free.get(mem_size):
            self._free[mem_size] -= 1
            self._free_bytes -= mem_size
        else:
            if self._limit and self.total_bytes() + mem_size > self._limit:
                self.free_all_blocks()
                if self.total_bytes() + mem_size > self._limit:
                    raise MemoryError(f"Out of memory allocating {mem_size:,} bytes (allocated so far: "
                                      f"{self.total_bytes():,} bytes, limit set to: {self._limit:,} bytes).")
            for hook in hooks():
                hook.alloc_preprocess(device_id=0, mem_size=mem_size)
                hook.alloc_postprocess(device_id=0, mem_size=mem_size, mem_ptr=ptr)
        self._used += mem_size
        for hook in hooks():
            hook.malloc_postprocess(device_id=0, size=size, mem_size=mem_size, mem_ptr=ptr, pmem_id=id(self))

    def _give_back(self, ptr, mem_size):
        for hook in hooks():
            hook.free_preprocess(device_id=0, mem_size=mem_size, mem_ptr=ptr, pmem_id=id(self))
        self._used -= mem_size
        self._free[mem_size] = self._free.get(mem_size, 0) + 1
        self._free_bytes += mem_size
        for hook in hooks():
            hook.free_postprocess(device_id=0, mem_size=mem_size, mem_ptr=ptr, pmem_id=id(self))


class PinnedMemoryPool:
    """cupy.cuda.PinnedMemoryPool: the stand-in pins nothing."""

    def n_free_blocks(self):
        return 0

    def free_all_blocks(self):
        pass


default = MemoryPool()
pinned = PinnedMemoryPool()


def malloc(a):
    """Count NumPy array a's buffer as taken from the pool; returns what free() needs."""
    size = a.nbytes
    if not size:  # CuPy takes nothing from the pool for an empty array
        return 0, 0, 0
    ptr, mem_size = a.__array_interface__["data"][0], rounded(size)
    default._take(size, mem_size, ptr)
    return ptr, size, mem_size


def free(ptr, size, mem_size):
    if mem_size:
        default._give_back(ptr, mem_size)
