# The commands a new user runs. `make test` and `make demo` set up their own virtual environment (.venv).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# torch 2.13.0 is the CPU build on our CI image; asking for another version pulls the CUDA wheels.
TORCH ?= torch==2.13.0

.PHONY: install-test install-demo install-verl system-deps quickstart test test-core lint typecheck demo smoke toy \
	toy-quick cpu-recipes cpu-pipeline clean test-cluster vllm-cpu test-vllm-cpu

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip

$(VENV)/.installed-test: setup.py | $(VENV)/bin/python
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e ".[verl,test,sim,analysis,math,reference]"
	touch $@ $(VENV)/.installed-core $(VENV)/.installed-verl

$(VENV)/.installed-demo: setup.py | $(VENV)/bin/python
	$(PIP) install -q -e ".[sim]"
	touch $@

# verl 0.9.1 and what BOTS needs to train with it on CPU (the quickstart's install; make test installs a superset)
$(VENV)/.installed-verl: setup.py | $(VENV)/bin/python
	$(PIP) install -q $(TORCH)
	$(PIP) install -q -e ".[verl]"
	touch $@

install-verl: $(VENV)/.installed-verl
install-test: $(VENV)/.installed-test
install-demo: $(VENV)/.installed-demo

# The linter alone (seconds): installs only ruff into the venv when it is missing.
$(VENV)/bin/ruff: | $(VENV)/bin/python
	$(PIP) install -q ruff

lint: $(VENV)/bin/ruff
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# Type checking of the numpy core and the simulator (settings in pyproject.toml).
typecheck: install-test
	$(VENV)/bin/mypy

# The fast inner loop (seconds): core and simulator unit tests; needs numpy, pytest and hypothesis, not verl or torch.
$(VENV)/.installed-core: setup.py | $(VENV)/bin/python
	$(PIP) install -q -e ".[sim]" pytest hypothesis
	touch $@

test-core: $(VENV)/.installed-core
	$(PY) -m pytest -q tests/core tests/sim

# Code rewards run model-written programs in bubblewrap sandboxes (the Debian/Ubuntu package `bubblewrap`, not on PyPI).
# Installed with apt-get when missing and possible (root, or passwordless sudo); otherwise the code-reward tests that
# run programs are skipped with a message (and fail under BOTS_REQUIRE_SANDBOX=1, as in CI).
system-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO=sudo; else SUDO=none; fi; \
	  if [ "$$SUDO" != none ] && command -v apt-get >/dev/null 2>&1; then \
	    $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null || true; \
	  fi; \
	  command -v bwrap >/dev/null 2>&1 || echo "WARNING: bubblewrap (bwrap) is missing; install it (apt-get install \
	bubblewrap) to run the code-reward sandbox tests"; }

# Two pytest-xdist workers: a real fit() keeps about one core busy (most of it verl's imports in a dozen processes), so
# two at a time fill a 2-core box (three were no faster, fresh clones: the suite took 1,181 s with three at 331d89b,
# 1,064 and 1,167 s with two at 06d57a8 and 1b51f56). Each worker takes whole test modules (tests/conftest.py), so a
# module's shared runs train once.
# TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 2
test: install-test lint typecheck system-deps
	$(PY) -m pytest -q tests -m "not cluster" -n $(TEST_WORKERS) --dist loadscope --durations=25

# BOTS on Ray clusters started with `ray start` on this machine (tests marked `cluster`, left out of `make test` and
# CI): a head plus a second node, the posterior on the node bots.actor.node_resource names, a node killed and the run
# resumed bit for bit; runs that share a cluster refused, a SIGKILLed driver leaving nothing behind. Measured on the
# 2-core box beside other test runs (load 10-19): about 26 min (test_shared_cluster.py 11, test_two_node_cluster.py 15).
test-cluster: install-test
	$(PY) -m pytest -q tests -m cluster

# The first command: Random and BOTS, 12 GRPO steps each, in verl's real trainer on CPU on the shipped toy testbed;
# prints each step's share of mixed groups and BOTS's final posterior (runs/quickstart)
quickstart: install-verl
	$(PY) -m bots_verl.quickstart

# BOTS in verl's real trainer on CPU: a tiny local model, 4 GRPO steps, resume from step 2, exact-resume check
smoke: install-test
	$(PY) -m bots_verl.verl_cpu.smoke

# The toy benchmark headline (real GRPO in verl on CPU: random, bots, implicit_only x 8 seeds x 90 steps; resumable;
# runs/toy/summary.md). Every selector on the same seeds: python -m bots_verl.toy.benchmark --profile full
toy: install-test
	$(PY) -m bots_verl.toy.benchmark --profile headline

# Its reduced version (bots and random, one seed, 6 steps; runs/toy/quick/summary.md)
toy-quick: install-test
	$(PY) -m bots_verl.toy.benchmark --profile quick

# Every recipe script (30 + 6 ablations) trains 2 real steps in its CPU mode (CPU=1) on GURU-shaped fixture data with
# known-answer rollouts; prints each script's time (runs/cpu_recipes/cpu_recipes.md)
cpu-recipes: install-test system-deps
	PYTHON=$(abspath $(PY)) bash recipes/cpu_recipes.sh

# The paper's pipeline on CPU: reference columns (two tiny models) -> data prep -> Random and BOTS per domain through
# the recipes' CPU mode -> the main table (runs/cpu_pipeline/table_main.md); how to check an install before GPUs
cpu-pipeline: install-test system-deps
	PYTHON=$(abspath $(PY)) bash recipes/cpu_pipeline.sh

# vLLM 0.24.0 built from source for its CPU backend, in its own venv (.venv-vllm: torch 2.11.0, verl 0.9.1, bots-verl);
# resumable, not in CI (bots_verl/verl_cpu/README.md, "vLLM on CPU")
vllm-cpu:
	bash bots_verl/verl_cpu/build_vllm_cpu.sh

# BOTS through verl's vLLM rollout on vLLM's CPU build (tests marked vllm_cpu, skipped elsewhere; not in CI): the toy
# task trained through verl's vLLM server and weight sync (recipes/results/vllm_cpu.md has its time). Here a Python
# without the build fails the tests (BOTS_REQUIRE_VLLM_CPU=1) instead of skipping them all and passing.
VLLM_PY ?= .venv-vllm/bin/python
test-vllm-cpu:
	@test -x $(VLLM_PY) || { echo "test-vllm-cpu: no $(VLLM_PY); make vllm-cpu builds it" >&2; exit 2; }
	$(VLLM_PY) -m pip install -q pytest
	BOTS_REQUIRE_VLLM_CPU=1 $(VLLM_PY) -m pytest -q tests/integration/test_vllm_rollout_on_cpu.py -p no:cacheprovider

demo: install-demo
	$(PY) -m bots_verl.sim --preset demo

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .mypy_cache
