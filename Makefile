# Quick start:   make tour   (sets up .venv, runs the lessons)     make test   (sets up .venv, runs the tests)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: tour test bench clean

# PyTorch is only something to compare with, never a dependency: its CPU build is enough (and small).
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

tour: $(VENV)/.installed
	$(PY) lessons/tour.py

test: $(VENV)/.installed
	$(PY) -m pytest

bench: $(VENV)/.installed
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet torch --index-url $(TORCH_INDEX) \
		|| echo "PyTorch could not be installed: the benchmark runs without its columns"
	mkdir -p out
	$(PY) bench/bench.py --json out/bench.json --plot out/bench.png

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
