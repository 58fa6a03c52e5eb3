# The two commands of the README:
#   make demo   set up .venv and run the study's demo preset (CIFAR-10 subset, CPU)
#   make test   set up .venv and run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Dataset archives come from data/raw, a local mirror folder, or the official downloads. Offline,
# set STUDY_DATA_MIRROR to a folder holding the archives (README, "Data"); the recipes see it
# as any environment variable, and nothing here names a folder outside the checkout.
CORES ?= 2
# Python's bytecode cache on, whatever the environment says: a test run or the demo starts a
# hundred or so processes, and each would otherwise compile the package's sources (and pytest
# re-rewrite every test module's asserts) again.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup report pull pull-records plots demo test test-compile test-pipeline lint paper clean-results check-install test-slurm slurm-commands gpu-bundle gpu-check

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch/torchvision first: here torch==2.13.0 is the local CPU build; pyproject.toml declares a
	# range that keeps it, so the next line installs no other torch and no CUDA packages. (From
	# PyPI alone this pin is a CUDA build: see the README for the PyTorch index to take instead.)
	$(BIN)/pip install --quiet torch==2.13.0 torchvision==0.28.0
	$(BIN)/pip install --quiet -e '.[workflow,dev]'
	touch $@

setup: $(VENV)/.installed

# The report of a preset (results/<preset>/report.html: the finding with its numbers, every figure with its
# caption, the reproduction table as a page): what it shows is built first (the Snakefile's rule
# report_inputs: the figures, the reproduction report, the landing text), then `--report` on it.
#   make report PRESET=ci      (any preset; the demo's by default)
PRESET ?= demo
REPORT ?= results/$(PRESET)/report.html
report: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --profile workflow/profiles/cpu --cores $(CORES) \
		--config preset=$(PRESET) -- report_inputs
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --profile workflow/profiles/cpu --cores $(CORES) \
		--config preset=$(PRESET) --report $(REPORT) -- report_inputs
	@# DVC's record of the report (no job makes it, so no Snakemake run records it): it travels with the jobs' files
	@if [ -d .dvc ]; then $(BIN)/study record --also $(REPORT); fi
	@echo "The study's report ($(PRESET) preset): $(REPORT) (open it in a browser). Figures: results/$(PRESET)/figures/; reproduction: results/$(PRESET)/reproduction.md"

# A result set that someone pushed (docs/usage.md, "Sharing results"): every file DVC recorded
# (versions/*.dvc), fetched from the default remote, each set to its job's end time so that
# Snakemake finds it up to date; `make pull-records` leaves the model weights (the *.pt files under
# results/) on the remote: every table, figure and report page rebuilds without them.
pull: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/study pull

pull-records: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/study pull --records-only

# DVC's plots (dvc.yaml `plots:`: one panel per run) as a page that draws offline: the vega
# libraries inline (study plots-template), not loaded from a CDN. Reads the tables of params.yaml's
# preset, results/<preset>/tables (dvc.yaml's `${preset}`: the preset `dvc repro` runs).
plots: setup
	$(BIN)/study plots-template --out results/plots/template.html
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/dvc plots show --html-template results/plots/template.html -o results/plots
	@echo "DVC's plots: results/plots/index.html (open it in a browser; no network needed)"

# The demo's results, then the report that opens on them.
demo: setup
	$(MAKE) report PRESET=demo

# tests/ is one folder per tier, each folder's tests marked with its name (tests/helpers/tiers.py).
# `make test`: unit, integration, workflow and docs. The end-to-end runs (tests/pipeline: the ci
# preset's whole DAG through Snakemake and DVC, the zoo's jobs, the bench's processes: minutes on
# 2 cores) and tests/hardware (the inductor compile: 15-60 s of CPU for one tiny step; the report
# in a browser; the SLURM profile; CUDA) are their own steps, `make test-pipeline`,
# `make test-compile`, `make test-slurm` and `make gpu-check`, so that `make test` keeps its
# budget; CI runs all but the last.
test: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "not pipeline and not hardware"; \
	rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; exit $$rc

test-pipeline: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -n 2 --dist loadgroup -m "pipeline or browser"; \
	rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no end-to-end test: failing" >&2; exit 1; fi; exit $$rc

test-compile: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -m inductor; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no inductor test: failing" >&2; exit 1; fi; exit $$rc

# ruff on the code, and mypy on study/ (its settings: pyproject.toml's [tool.mypy]): a mapping passed
# where a typed value belongs fails here, before anything runs.
lint: setup
	$(BIN)/ruff check study tests tools workflow
	$(BIN)/mypy

# The package as a user installs it: `pip install .` (not editable) into a fresh venv, after the
# local CPU torch that its range keeps; then its `study` command. The build runs in a copy of the
# sources (no build/ left in the checkout); the venv is removed after. CI runs it (.ci/run).
check-install:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && start=$$(date +%s) && \
	mkdir "$$tmp/src" && cp -R pyproject.toml study "$$tmp/src/" && \
	echo "check-install: fresh venv in $$tmp" && $(PYTHON) -m venv "$$tmp/venv" && \
	"$$tmp/venv/bin/pip" install --quiet torch==2.13.0 torchvision==0.28.0 && \
	echo "check-install: pip install ." && (cd "$$tmp/src" && "$$tmp/venv/bin/pip" install --quiet .) && \
	(cd "$$tmp" && "$$tmp/venv/bin/study" --help >/dev/null) && \
	echo "check-install: study --help runs in the fresh venv ($$(( $$(date +%s) - start )) s)"

paper: setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake --profile workflow/profiles/local results/figures/all

# The SLURM profile on a real one-node Slurm cluster started in a temporary folder: the ci
# preset's DAG through workflow/profiles/slurm, compared with a local run's records
# (tools/slurm/check.py), after the tests of the profile and its partitions (marked
# slurm: the executor plugin's view of them). Needs Slurm and MUNGE installed, and root.
SLURM_COMMANDS := slurmctld slurmd munged sbatch srun squeue sinfo scontrol scancel
test-slurm: slurm-commands setup
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m pytest -q -m slurm; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no slurm test: failing" >&2; exit 1; fi; [ $$rc -eq 0 ]
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python tools/slurm/check.py

# (before setup: without Slurm, one line and no venv built)
slurm-commands:
	@for c in $(SLURM_COMMANDS); do command -v $$c >/dev/null || { \
		echo "make test-slurm needs Slurm and MUNGE ($$c is missing): apt-get install slurm-wlm munge (as root)" >&2; \
		exit 1; }; done

# On a bare GPU machine (docs/performance.md, "On a GPU machine"). gpu-bundle, here with PyPI:
# gpu-bundle/ (git-ignored; name it to travel with the checkout) holds the wheels the check
# needs and such a machine lacks (CPython 3.12, manylinux x86_64) and the CIFAR-10 JPEG archive
# from $STUDY_DATA_MIRROR; under 40 MiB or it fails. gpu-check, there with its own python3 and
# no network: one line and exit 2 without CUDA; else its parts, each under its own time
# budget, into results/gpu-check/report.{md,json}. GPU_CHECK_ARGS: e.g. --parts bench --budget bench=540.
gpu-bundle:
	$(PYTHON) tools/gpu/bundle.py

# (make's own error, one line and exit 2, where the probe refuses; not under make -n)
GPU_CHECK_ARGS ?=
DRY_RUN := $(findstring n,$(firstword -$(MAKEFLAGS)))
gpu-check:
	$(if $(DRY_RUN),,$(eval GPU_REFUSAL := $(shell $(PYTHON) tools/gpu/check.py --probe 2>&1))$(if $(GPU_REFUSAL),$(error $(GPU_REFUSAL))))
	$(PYTHON) tools/gpu/check.py $(GPU_CHECK_ARGS)
