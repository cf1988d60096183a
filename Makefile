# Quick start:   make tour   (sets up .venv, runs the lessons)     make test   (sets up .venv, runs the tests)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: tour test bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

tour: $(VENV)/.installed
	$(PY) lessons/tour.py

test: $(VENV)/.installed
	$(PY) -m pytest

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
