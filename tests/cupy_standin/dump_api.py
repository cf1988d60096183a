"""Write api.json: the names the real CuPy offers, which the stand-in may offer and nothing else.

Run once per CuPy release, in a throwaway environment with the real wheel (no GPU is needed to import it and list
its names):

    python -m venv /tmp/cupyvenv && /tmp/cupyvenv/bin/pip install numpy fastrlock cuda-pathfinder
    pip download cupy-cuda12x --no-deps -d /tmp/cupywheel && /tmp/cupyvenv/bin/pip install --no-deps /tmp/cupywheel/*.whl
    /tmp/cupyvenv/bin/python tests/cupy_standin/dump_api.py

tests/test_cupy_standin.py then checks that the stand-in offers nothing outside this list.
"""
import json
import os
import types

import numpy
import cupy
import cupyx
import cupyx.scipy.special

MODULES = ["cupy", "cupy.cuda", "cupy.cuda.runtime", "cupy.random", "cupy.linalg", "cupyx", "cupyx.scipy",
           "cupyx.scipy.special"]
CLASSES = ["cupy.ndarray", "cupy.ufunc", "cupy.cuda.MemoryPool", "cupy.cuda.PinnedMemoryPool", "cupy.cuda.MemoryHook",
           "cupy.cuda.Device", "cupy.cuda.Stream", "cupy.cuda.Event", "cupy.cuda.MemoryPointer"]


def resolve(dotted):
    obj = __import__(dotted.split(".")[0])
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def kind(name, value):
    if value is getattr(numpy, name, object()):
        return "numpy"  # the very object NumPy has (dtypes, finfo, newaxis, ...)
    if isinstance(value, cupy.ufunc):
        return "ufunc"
    if isinstance(value, types.ModuleType):
        return "module"
    if isinstance(value, type):
        return "class"
    if callable(value):
        return "function"
    return "other"


def main():
    api = {"cupy_version": cupy.__version__, "numpy_version": numpy.__version__, "modules": {}, "classes": {}}
    for dotted in MODULES:
        module = resolve(dotted)
        api["modules"][dotted] = {n: kind(n, getattr(module, n)) for n in sorted(dir(module))
                                  if not n.startswith("__")}
    for dotted in CLASSES:
        api["classes"][dotted] = sorted(dir(resolve(dotted)))
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api.json")
    with open(path, "w") as f:
        json.dump(api, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"wrote {path}: CuPy {cupy.__version__}, {sum(map(len, api['modules'].values()))} module names")


if __name__ == "__main__":
    main()
