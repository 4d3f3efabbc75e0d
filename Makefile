# oversmooth: `make demo` runs the whole pipeline on the embedded CPU default; `make test` runs the tests.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CORES ?= all
# pytest-xdist workers of `make test`: the unit tests run beside the smoke run's group (tests/conftest.py)
TEST_WORKERS ?= 2
STAMP := $(VENV)/.installed

.PHONY: install lock demo demo-teacher report test dryrun check plan profile status docs clean

install: $(STAMP)

# The locked install: every package of requirements.lock at its version, hash-checked (--no-deps: the lock holds
# every dependency); then torch by its pin, outside the hashed part, so that each machine gets the build its index
# gives for that pin (the CPU wheel of pip's find-links here, PyPI's CUDA build with the CUDA libraries it pins on a
# GPU node; their hashes differ). torch comes after the lock, so that its other dependencies (in the lock) are the
# lock's. Then the package itself, editable, without dependencies. An unpinned torch pulls a multi-GB CUDA build.
TORCH := torch==2.13.0
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r requirements.lock
	$(BIN)/python -m pip install --quiet $(TORCH)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

# Refresh requirements.lock (uv, from pyproject.toml and requirements-nodeps.txt; each pin kept unless it must move
# or LOCK_ARGS upgrade it: LOCK_ARGS="--upgrade-package scipy", or "--upgrade" for all) and envs/ from it; then
# `make install`. Needs PyPI. uv lives in a venv of its own, outside the locked one.
UV_VERSION := 0.13.9
UV_VENV := .venv-uv
LOCK_ARGS ?=
lock:
	test -x $(UV_VENV)/bin/uv || { $(PYTHON) -m venv $(UV_VENV) && $(UV_VENV)/bin/pip install --quiet uv==$(UV_VERSION); }
	$(PYTHON) envs/lock.py --uv $(UV_VENV)/bin/uv $(LOCK_ARGS)

demo: install
	$(BIN)/snakemake --cores $(CORES) all
	$(BIN)/snakemake --report results/report.html

# The demo on a teacher's language (config/teacher.yaml), in its own folder: the family against the exact
# truth and two proxies, in Tables 3.1, 4.1, 4.2, 6.1, E.1-E.4, E.7, E.8, F.1, 5.3, 6.2, 6.3, the truncation samplers'
# metrics against the truth, TBAT and quality (samples scored by the truth: the share of each method's samples outside
# the truth's support), the loss-matched table and figure, the support-recovery table and figure, and the
# findings.
TEACHER_DIR ?= runs/teacher
TEACHER_TARGETS := $(foreach t,table_3_1 table_4_1 table_4_2 table_6_1 table_e_1 table_e_2 table_e_3 table_e_4 \
	table_e_7 table_e_8 table_f_1 table_loss_matched table_5_3 table_6_2 table_6_3 table_truncation_teacher \
	table_truncation_tbat table_truncation_quality table_support table_findings,results/tables/$(t).csv) \
	results/figures/figure_loss_matched.png results/figures/figure_support.png
demo-teacher: install
	$(BIN)/snakemake --cores $(CORES) --directory $(TEACHER_DIR) --configfile config/teacher.yaml -- $(TEACHER_TARGETS)

report: install
	$(BIN)/snakemake --report results/report.html

test: install
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

dryrun: install
	$(BIN)/snakemake -n all

# What the Snakefile checks before any job, on config files over config/config.yaml, naming the file and line of a
# YAML error (Snakemake's own message names neither): make check CONFIG="config/thesis.yaml config/cluster.yaml"
check: install
	$(BIN)/python -m oversmooth.workflow.config --check $(filter-out config/config.yaml,$(CONFIG))

# The compute plan of a config before submitting it: make plan CONFIG=config/thesis.yaml [PLAN_ARGS="--gpu h100"]
CONFIG ?= config/config.yaml
plan: install
	$(BIN)/python -m oversmooth.workflow.plan --configfile $(CONFIG) $(PLAN_ARGS)

# Where a finished run's time went: per stage, start-up, kernel share, critical path (WORKDIR: the run's folder)
WORKDIR ?= .
profile: install
	$(BIN)/python -m oversmooth.workflow.runprofile --workdir $(WORKDIR)

# Where a run stands, running or finished, beside the workflow (no lock): its trainings, its jobs per stage, and
# each rule's requested runtime and memory beside what its jobs used (WORKDIR: the run's folder)
status: install
	$(BIN)/python -m oversmooth.workflow.status --workdir $(WORKDIR)

# The docs' generated blocks (config reference, rule graph) and docs/rulegraph.svg (needs Graphviz's dot).
docs: install
	$(BIN)/python docs/update_docs.py

clean:
	rm -rf results .snakemake runs
