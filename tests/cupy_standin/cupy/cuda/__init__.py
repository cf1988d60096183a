"""cupy.cuda for the stand-in: one 'device', a stream and events that have nothing to wait for, the memory pool
and its hooks (_pool.py)."""
import time as _time

from . import _pool, runtime
from ._pool import MemoryPool, PinnedMemoryPool


def is_available():
    return True


def get_device_id():
    return 0


class Device:
    def __init__(self, device=None):
        self.id = int(device or 0)

    def __int__(self):
        return self.id

    def __repr__(self):
        return f"<CUDA Device {self.id}>"

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def use(self):
        pass

    def synchronize(self):
        pass

    @property
    def compute_capability(self):
        return "90"

    @property
    def mem_info(self):
        return runtime.memGetInfo()


class Stream:
    null = None

    def __init__(self, null=False, non_blocking=False, ptds=False):
        self.ptr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def synchronize(self):
        pass

    def use(self):
        return self

    @property
    def done(self):
        return True

    def record(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event):
        pass


Stream.null = Stream(null=True)


def get_current_stream(device_id=-1):
    return Stream.null


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self._t = None

    def record(self, stream=None):
        self._t = _time.perf_counter()

    def synchronize(self):
        pass

    @property
    def done(self):
        return True


def get_elapsed_time(start_event, end_event):
    """Milliseconds between two recorded events."""
    return (end_event._t - start_event._t) * 1e3


class MemoryPointer:
    def __init__(self, ptr, size):
        self.ptr, self.device_id = ptr, 0
        self._size = size

    def __int__(self):
        return self.ptr

    @property
    def device(self):
        return Device(0)


class MemoryHook:
    """cupy.cuda.MemoryHook: `with hook:` calls its methods at every allocation and free of the pool."""
    name = "MemoryHook"

    def __enter__(self):
        _pool._hooks.stack = _pool.hooks() + (self,)
        return self

    def __exit__(self, *exc):
        _pool._hooks.stack = tuple(h for h in _pool.hooks() if h is not self)

    def alloc_preprocess(self, **kwargs):
        pass

    def alloc_postprocess(self, **kwargs):
        pass

    def malloc_preprocess(self, **kwargs):
        pass

    def malloc_postprocess(self, **kwargs):
        pass

    def free_preprocess(self, **kwargs):
        pass

    def free_postprocess(self, **kwargs):
        pass
