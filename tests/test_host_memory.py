"""backend.keep_freed_host_memory (NOTE [host memory between steps]): opt-in, and it does what it says. Each case
runs in a fresh process, since the setting is the whole process's."""
import os
import platform
import subprocess
import sys

import pytest

STEPS = """
import resource, numpy as np
{setup}
def step():
    a = [np.ones((256, 1024)) for _ in range(8)]  # 2 MiB each, freed at the end of every step
    return sum(float(x[0, 0]) for x in a)
step(); step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10)
"""


def faults_per_step(setup, env=None):
    r = subprocess.run([sys.executable, "-c", STEPS.format(setup=setup)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return float(r.stdout)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's; elsewhere the call returns False")
def test_kept_host_memory_takes_the_page_faults_away():
    plain = faults_per_step("import minigrad", env={k: v for k, v in os.environ.items() if k != "MINIGRAD_KEEP_HOST_MEMORY"})
    kept = faults_per_step("from minigrad import backend\nassert backend.keep_freed_host_memory()")
    by_env = faults_per_step("import minigrad", env=dict(os.environ, MINIGRAD_KEEP_HOST_MEMORY="1"))
    assert plain > 1000  # importing minigrad changes nothing: 16 MiB of fresh pages every step, about 4,000 faults
    assert kept < plain / 20 and by_env < plain / 20

