# The commands a new user runs. `make test` and `make demo` set up their own virtual environment (.venv).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# torch 2.13.0 is the CPU build on our CI image; asking for another version pulls the CUDA wheels.
TORCH ?= torch==2.13.0

.PHONY: install-test install-demo test lint demo smoke clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip

$(VENV)/.installed-test: setup.py | $(VENV)/bin/python
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e ".[verl,test,sim,analysis,math,reference]"
	touch $@

$(VENV)/.installed-demo: setup.py | $(VENV)/bin/python
	$(PIP) install -q -e ".[sim]"
	touch $@

install-test: $(VENV)/.installed-test
install-demo: $(VENV)/.installed-demo

lint: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: install-test lint
	$(PY) -m pytest -q tests

# BOTS in verl's real trainer on CPU: a tiny local model, 4 GRPO steps, resume from step 2, exact-resume check
smoke: install-test
	$(PY) -m bots_verl.verl_cpu.smoke

demo: install-demo
	$(PY) -m bots_verl.sim --preset demo

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache
