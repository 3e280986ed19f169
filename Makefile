# lenet-levels: one rule per artifact. `make run-all` and `make test` are the two commands;
# `make help` lists every target (the `## ...` after each target's name is its line there).
# The first target that needs Python creates .venv (with --system-site-packages, so a GPU
# server's preinstalled CuPy and cuDNN are reused) and installs the project into it.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
EXTRAS ?= dev,torch
# torch 2.13.0 has a CPU-only wheel on this project's package mirror; the index's newer torch
# builds bring ~5 GB of CUDA wheels. A GPU server: make install-gpu (keeps or fetches a CUDA torch).
# No torch at all: make run-all EXTRAS=dev (its cells are then skipped, with the install command).
TORCH  ?= $(if $(findstring torch,$(EXTRAS)),torch==2.13.0)
comma  := ,
STAMP  := $(VENV)/.installed-$(subst $(comma),-,$(EXTRAS))
WEIGHTS := weights/lenet5_mnist.weights.h5
RESULTS := reports/results
STUDIES := api_levels overhead backends batch_sweep precision training
# Every registered level that runs on the device (harness/registry.py; read when a recipe needs them).
CPU_IMPLS = $(shell $(PY) -m harness list --device cpu)
GPU_IMPLS = $(shell $(PY) -m harness list --device gpu)
# verify on the GPU only where one is present (nvidia-smi answers).
DEVICES ?= $(shell nvidia-smi -L >/dev/null 2>&1 && echo cpu,gpu || echo cpu)

.PHONY: install install-gpu run-all test test-fast weights verify verify-gpu studies explain crosscheck smoke \
        loc figures report doctor lint clean offline-bundle gpu-study import-results init-weights lab-kit help \
        reproduce budget test-emulation docs house

install: $(STAMP)  ## create .venv and install the project into it (what plain `make` does)
$(STAMP): pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[$(EXTRAS)]' $(TORCH)
	touch $@

install-gpu:  ## CUDA 12 server: CuPy + the cuDNN 9 wheel, and a CUDA build of torch
	$(MAKE) install EXTRAS=dev,gpu,torch TORCH=

run-all: $(STAMP)  ## verify, every study, explain, crosscheck, LOC, figures, report
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory verify studies explain crosscheck loc figures report && \
	echo "run-all finished in $$(( $$(date +%s) - start )) s"

# The cuDNN wheel (no deps: its libraries need only libz) lets the cuDNN level's descriptor
# tests use the real libcudnn without a GPU; the frontend's wheel (no deps: its CuTe DSL is not
# needed) builds cudnn/frontend's graphs in the tests. Best effort: without it they skip, saying why.
CUDNN_STAMP := $(VENV)/.cudnn-wheel
$(CUDNN_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --no-deps 'nvidia-cudnn-cu12>=9,<10' || \
	  echo "cuDNN wheel not installed: the descriptor tests will be skipped"
	$(BIN)/pip install --quiet --no-deps 'nvidia-cudnn-frontend==1.32.0' || \
	  echo "cuDNN frontend wheel not installed: the cudnn/frontend graph tests will be skipped"
	touch $@

# The suite in TEST_WORKERS processes (pytest-xdist): most tests wait on subprocesses that use one
# core each, and about a third of the suite's time is spent waiting on no core at all (sandboxed
# hangs running into their deadlines, Slurm's scheduling, one user waiting on another's lock), so
# three workers keep the two cores of a small machine busy. Each test file runs whole on one
# worker, the Slurm and GPU tests on one worker between them, the longest first (tests/conftest.py;
# --no-loadscope-reorder keeps that order); TEST_WORKERS=0 runs everything in one process, as plain
# `pytest` does. The ten slowest tests are listed at the end, so a slow newcomer is seen.
TEST_WORKERS ?= 3
PYTEST := $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=10

test: $(STAMP) $(CUDNN_STAMP)  ## the test suite (GPU tests run where a GPU is present, else skip with the reason)
	$(PYTEST)

test-fast: $(STAMP)  ## the test suite without the end-to-end runs marked slow
	$(PYTEST) -m "not slow"

test-emulation: $(STAMP)  ## the CUDA kernels emulated on the CPU at every batch size to 512 (opt-in)
	LENET_EMULATE_ALL=1 $(PYTEST) tests/test_cuda_level.py -k emulated_every_variant

weights: $(STAMP)  ## retrain the shared weights (Keras, fixed seeds)
	$(PY) -m harness.data.train --out $(WEIGHTS)

init-weights: $(STAMP)  ## the seeded initial weights every level's training starts from (byte-reproducible)
	$(PY) -m harness.data.init_weights --seed 0 --out weights/lenet5_init.weights.h5

verify: $(STAMP)  ## every level against the NumPy oracle: inference, then SGD steps (GPU too where present)
	$(PY) -m harness verify --implementations $(CPU_IMPLS) --device cpu \
	  --json $(RESULTS)/verify-cpu-$$(hostname).json || test $$? -eq 3
	$(PY) -m harness verify-train --implementations $(CPU_IMPLS) --device cpu \
	  --json $(RESULTS)/verify-train-cpu-$$(hostname).json || test $$? -eq 3
	@if echo "$(DEVICES)" | grep -q gpu; then $(MAKE) --no-print-directory verify-gpu; fi

verify-gpu: $(STAMP)  ## inference verify on the GPU only
	$(PY) -m harness verify --implementations $(GPU_IMPLS) --device gpu \
	  --json $(RESULTS)/verify-gpu-$$(hostname).json || test $$? -eq 3

# Every cell of every study: GPU cells on a machine without a GPU are recorded as skipped,
# with the reason, so the report says why a row is missing.
studies: $(STAMP)  ## every study in STUDIES (GPU cells recorded as skipped where no GPU)
	@for study in $(STUDIES); do \
	  $(PY) -m harness run $$study || exit $$?; \
	done

# Why Keras is slow: each Keras backend's predict, and the framework-ops levels, stage by stage (the
# targets the registry's entries opt into: ImplSpec.explain; 3: a target's framework is not installed).
EXPLAIN = $(shell $(PY) -m harness list --explain --device cpu)
explain: $(STAMP)  ## why Keras is slow (each backend's predict and the framework ops, stage by stage); the CPU's arithmetic peak; the CUDA kernels' static work
	$(PY) -m harness arithmetic --out $(RESULTS)
	$(PY) -m harness gpu-explain --out $(RESULTS) || test $$? -eq 3  # no GPU needed; 3: no NVRTC here
	$(PY) -m harness explain $(EXPLAIN) --calls 40 --rounds 5 --out $(RESULTS) || test $$? -eq 3

crosscheck: $(STAMP)  ## the harness's timer against timeit, on the NumPy level
	$(PY) -m harness crosscheck --json $(RESULTS)/crosscheck-$$(hostname).json

# A second run of STUDY in fresh processes, held against its newest run on this machine: the share of
# cells whose new median and within-round ratio fall inside the first run's intervals (a row in
# reports/results/reproduce/; DETAILS' validity section shows the newest of each machine).
STUDY ?= api_levels
reproduce: $(STAMP)  ## run STUDY (default api_levels) again and say how much of its newest run it reproduces
	$(PY) -m harness reproduce $(STUDY)

smoke: $(STAMP)  ## a seconds-long study, to check the plumbing
	$(PY) -m harness run smoke --out $${TMPDIR:-/tmp}/lenet-smoke-$$(id -u)  # per user: /tmp is shared

loc: $(STAMP)  ## count code lines per implementation package (reports/loc.csv)
	$(PY) -m harness loc

# MACHINE='vm: AMD EPYC (2 cores)': the machine whose runs answer (default: the newest run's)
figures: $(STAMP)  ## draw reports/figures/*.png from the result files
	$(PY) -m harness figures $(if $(MACHINE),--machine "$(MACHINE)")

report: $(STAMP)  ## write reports/REPORT.md and DETAILS.md from the result files (MACHINE=: whose runs answer)
	$(PY) -m harness report $(if $(MACHINE),--machine "$(MACHINE)")

doctor: $(STAMP)  ## what can run here, and why not
	$(PY) -m harness doctor

# The checkout's files and the offline bundle (scripts/offline_bundle.json) against the 52 MiB a GPU
# run may carry (it takes 64); `make test` checks the same (tests/test_budget.py).
budget: $(STAMP)  ## what a GPU run carries (the checkout and the offline bundle), largest first, against its budget
	$(PY) -m harness.campaign.budget

# --- The GPU half on a server with no package index (docs/gpu.md) ----------------------------
# On a machine with pip: the wheels the GPU half imports and the server lacks, for the server's Python
# (recorded in scripts/offline_bundle.json; `make budget` prints its size).
BUNDLE_PY ?= 3.12
BUNDLE_DIR ?= dist/offline-bundle-py$(BUNDLE_PY)
offline-bundle:  ## the wheels Keras needs, for a GPU server with no package index (BUNDLE_PY)
	$(PYTHON) scripts/offline_bundle.py build --python $(BUNDLE_PY) --out $(BUNDLE_DIR)

# On the GPU server: no venv, no index. BUNDLE=DIR installs the bundle's missing wheels into
# .bundle-site (on PYTHONPATH); QUICK=1 is the first smoke; STEPS=a,b runs some steps only;
# LEVELS=cuda,cudnn verifies, profiles and grades the labs of those levels only, their targets' steps
# first; PART=1|2 runs one command of a GPU loan (PLAN=1 alone prints both); PLAN=1 prints the
# steps with their last measured seconds (no GPU). The archive and the console log in GPU_OUT.
BUNDLE ?=
GPU_OUT ?= gpu-study-out
GPU_PYTHON ?= $(PYTHON)
gpu-study:  ## the whole GPU half into one archive (BUNDLE=DIR, PART=1|2, QUICK=1, STEPS=a,b, LEVELS=a,b, PLAN=1, GPU_OUT)
	@if [ -n "$(BUNDLE)" ]; then \
	  $(GPU_PYTHON) scripts/offline_bundle.py install --bundle $(BUNDLE) --target .bundle-site || exit $$?; fi
	PYTHONPATH=$(CURDIR)/.bundle-site:$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} \
	  $(GPU_PYTHON) -m harness gpu-study --out $(GPU_OUT) $(if $(QUICK),--quick) $(if $(STEPS),--steps $(STEPS)) $(if $(LEVELS),--levels $(LEVELS)) $(if $(PART),--part $(PART)) $(if $(PLAN),--plan)

# Back on this machine: ARCHIVE=gpu-study-....tar.gz into reports/results, then make figures report.
import-results: $(STAMP)  ## unpack ARCHIVE (a gpu-study archive) into reports/results
	$(PY) -m harness import-results $(ARCHIVE)

# A lab's students' kit: dist/lab-kit-LAB.zip (the interface, the weights, the starter, the gate's
# images with the oracle's answers; no LeNet inside). docs/staff.md.
LAB ?= cpu_numpy
lab-kit: $(STAMP)  ## the students' kit of LAB (cpu_numpy, cudnn, cuda): dist/lab-kit-LAB.zip
	$(PY) -m harness lab kit $(LAB)

# --- Checks and housekeeping ----------------------------------------------------------------
lint: $(STAMP)  ## ruff and mypy
	$(BIN)/ruff check .
	$(BIN)/mypy

# The house's measures (issue 92), read from the code with ast: the grader's class depth, the places
# that ask which kind a lab is, rooms of one or two modules, forwarders, the registry entry's hooks.
house: $(STAMP)  ## the house's measures, each beside its target (scripts/house.py; --where lists the places)
	$(PY) scripts/house.py

# docs/ as a site (mkdocs.yml); strict, so a broken link or a page left out of the nav
# fails it. `make test` runs the same build (tests/test_docs.py).
docs: $(STAMP)  ## the documentation site, built strictly into build/site/ (MkDocs)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict  # without Material's banner about its future

# dist/ also holds the students' kits (lab-kit-*.zip, built by `make lab-kit`) and may hold files
# this Makefile did not make: only the offline bundle goes; the rest is listed, not deleted.
clean:  ## remove .venv, build outputs and caches (the students' kits in dist/ are kept)
	rm -rf $(VENV) build dist/offline-bundle-py* .bundle-site *.egg-info .pytest_cache .ruff_cache
	@if [ -d dist ] && [ -n "$$(ls -A dist)" ]; then echo "kept dist/ (students' kits and other files): $$(ls dist | tr '\n' ' ')"; \
	  else rm -rf dist; fi
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

# Every target with its `## ...` line, in the file's order.
help:  ## this list
	@grep -E '^[a-zA-Z_-]+:.*## ' $(firstword $(MAKEFILE_LIST)) | \
	  awk 'BEGIN {FS = ":[^#]*## "}; {printf "  %-16s %s\n", $$1, $$2}'
