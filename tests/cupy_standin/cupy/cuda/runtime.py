"""cupy.cuda.runtime for the stand-in: one device, always there."""


class CUDARuntimeError(RuntimeError):
    pass


def getDeviceCount():
    return 1


def getDevice():
    return 0


def setDevice(device):
    if device != 0:
        raise CUDARuntimeError("cudaErrorInvalidDevice: invalid device ordinal")


def deviceSynchronize():
    pass


def runtimeGetVersion():
    return 12090


def driverGetVersion():
    return 12090


def getDeviceProperties(device):
    return {"name": b"CuPy stand-in (NumPy on the host)", "totalGlobalMem": 1 << 34, "major": 9, "minor": 0,
            "multiProcessorCount": 1}


def memGetInfo():
    """(free, total) bytes of the 'device'."""
    from . import _pool
    total = 1 << 34
    return total - _pool.default.total_bytes(), total
