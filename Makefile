# The commands a person types. `make synth` and `make test` work from nothing:
# they create the virtual environment and install the pinned Node.js and CDK CLI.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
ENV    ?=

# The pinned Node.js 22 (npm package "node") and CDK CLI come first on PATH, so
# that neither jsii nor the CLI runs on an end-of-life system Node.
export PATH := $(CURDIR)/node_modules/.bin:$(CURDIR)/$(VENV)/bin:$(PATH)
export CDK_DISABLE_CLI_TELEMETRY := true
export CDK_DISABLE_VERSION_CHECK := true

CDK := cdk --no-notices
ENV_CONTEXT := $(if $(ENV),-c env=$(ENV),)$(if $(CONFIG_DIR), -c config_dir=$(CONFIG_DIR),)
GPU_PLATFORM := $(VENV)/bin/gpu-platform
NEED_ENV = @test -n "$(ENV)" || { echo "usage: make $@ ENV=<dev|staging|prod>" >&2; exit 2; }

.DEFAULT_GOAL := help
.PHONY: help setup venv-too-old synth synth-pipeline lint-templates test lint bench diff deploy bootstrap clean \
	validate preflight cost status destroy diagram

## help: this list (what a bare `make` prints)
help:
	@echo "make <target> (ENV=dev|staging|prod where a target needs one):"
	@sed -n 's/^## \([a-z-]*\): \(.*\)/\1|\2/p' $(MAKEFILE_LIST) | awk -F'|' '{printf "  %-16s %s\n", $$1, $$2}'

## setup: the venv (Python 3.11+, requirements, this project: .venv/bin/gpu-platform), Node.js 22, the CDK CLI
setup: $(VENV)/.installed $(VENV)/.project node_modules/.installed

# A venv an older Python made (or one whose Python is gone) is rebuilt, with a message saying so.
VENV_TOO_OLD := $(shell test -e $(VENV) || exit 0; $(PY) -c 'import sys; print(sys.version_info < (3, 11))' 2>/dev/null || echo True)
ifeq ($(VENV_TOO_OLD),True)
$(VENV)/.installed: venv-too-old
endif
venv-too-old:
	@echo "$(VENV) was made by $$($(PY) --version 2>&1 || echo 'a Python that no longer runs'); this project needs 3.11+: rebuilding it with $(PYTHON)" >&2
	rm -rf $(VENV)

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "$(PYTHON) is $$($(PYTHON) --version 2>&1); this project needs 3.11+; fix: make setup PYTHON=python3.11 (or newer)" >&2; exit 2; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

$(VENV)/.project: $(VENV)/.installed pyproject.toml
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e .
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	node --version | grep -q '^v22\.'
	touch $@

# The real Slurm the tests start on loopback (tests/flows/slurm): Debian 12's packages (Slurm 22.05; PCS runs 24.11+)
# and Debian's CPU PyTorch for the sbatch template's training run (gloo). Nothing is started or configured here.
SLURM_PACKAGES := slurm-wlm slurmdbd munge mariadb-server python3-torch
SLURM_PROGRAMS := slurmctld slurmd slurmdbd sbatch sacct sreport sacctmgr munged mariadbd mariadb-install-db
SUDO = $(if $(filter 0,$(shell id -u)),,$(if $(shell command -v sudo),sudo -n,))
## setup-slurm: Debian's slurm-wlm, slurmdbd, munge, mariadb-server, python3-torch (apt-get, as root or with sudo) when missing; make test runs it
.PHONY: setup-slurm
setup-slurm:
	@export PATH="$$PATH:/usr/sbin:/sbin"; missing=; for p in $(SLURM_PROGRAMS); do command -v $$p >/dev/null || missing+=" $$p"; done; \
	/usr/bin/python3 -c 'import importlib.util as u, sys; sys.exit(u.find_spec("torch") is None)' 2>/dev/null || missing+=" torch"; \
	[[ -z "$$missing" ]] && exit 0; \
	command -v apt-get >/dev/null || { echo "setup-slurm: missing$$missing and no apt-get here: install $(SLURM_PACKAGES) (Debian 12 names) yourself" >&2; exit 2; }; \
	[[ "$$(id -u)" == 0 || -n "$(SUDO)" ]] || { echo "setup-slurm: missing$$missing: run as root or with sudo (apt-get install $(SLURM_PACKAGES))" >&2; exit 2; }; \
	echo "setup-slurm: installing $(SLURM_PACKAGES) (missing:$$missing)"; \
	{ $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(SLURM_PACKAGES) >/dev/null; } \
		|| { echo "setup-slurm: apt-get install $(SLURM_PACKAGES) failed (output above)" >&2; exit 2; }
test: setup-slurm

## synth: every environment (or ENV=dev) into cdk.out/, rule packs enforced, then cfn-lint (a failed synth keeps the previous cdk.out/)
synth: setup
	rm -rf cdk.out.new
	$(CDK) synth --quiet $(ENV_CONTEXT) --output cdk.out.new || { rm -rf cdk.out.new; echo "synth failed: the previous cdk.out/ is kept" >&2; exit 1; }
	rm -rf cdk.out && mv cdk.out.new cdk.out
	$(MAKE) --no-print-directory lint-templates

## synth-pipeline: the pipeline stack with every environment of its promotion list under it, into cdk.out/
## (what the pipeline's Build step runs, scripts/ci/synth.sh), rule packs enforced, then cfn-lint
synth-pipeline: setup
	rm -rf cdk.out.new
	$(CDK) synth --quiet -c pipeline=true --output cdk.out.new || { rm -rf cdk.out.new; echo "synth failed: the previous cdk.out/ is kept" >&2; exit 1; }
	rm -rf cdk.out && mv cdk.out.new cdk.out
	$(MAKE) --no-print-directory lint-templates

## lint-templates: cfn-lint on the templates in cdk.out/
lint-templates:
	$(VENV)/bin/cfn-lint
	@echo "cfn-lint: $$(find cdk.out -name '*.template.json' | wc -l) templates clean"

# The suite on three pytest-xdist workers (work stealing; each synth shared by all of them): what make test and
# make bench-tests run. Three, not two: the suite waits on timers and daemons, which a third worker fills.
PYTEST_ARGS := -n 3 --dist worksteal

## test: make test-checks, then the whole suite (pytest -n 3 --dist worksteal: PYTEST_ARGS)
test: setup
	$(MAKE) --no-print-directory test-checks
	$(PY) -m pytest $(PYTEST_ARGS)

## test-checks: what make test runs before the suite: make lint (ruff, bandit, actionlint, zizmor), mypy, the node code against the node's Python (scripts/check_node_python.py)
.PHONY: test-checks
test-checks: setup
	$(MAKE) --no-print-directory lint
	$(VENV)/bin/mypy config gpu_constructs stacks scripts examples app.py $(wildcard ops)
	$(PY) scripts/check_node_python.py

## test-fast: the suite without the tests marked slow (CLI synth, cfn-lint, the shipped-config copy, timed node flows)
.PHONY: test-fast
test-fast: setup
	$(PY) -m pytest $(PYTEST_ARGS) -m "not slow"

## lint: ruff check, ruff format --check, bandit (pyproject.toml), actionlint and zizmor (offline) on .github/workflows/
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/bandit -q -c pyproject.toml -r .
	$(VENV)/bin/actionlint
	$(VENV)/bin/zizmor --offline -q .github/workflows

## bench: make bench-synth, then make bench-tests; fails when either misses its target
bench: setup
	@status=0; $(MAKE) --no-print-directory bench-synth || status=$$?; \
	$(MAKE) --no-print-directory bench-tests || status=$$?; exit $$status

## bench-synth: full synth wall time against an empty CDK app, measured in the same run (target: at most 2x)
.PHONY: bench-synth bench-tests
bench-synth: setup
	$(PY) scripts/bench_synth.py

## bench-tests: make test once set up, BENCH_RUNS times (default 2): its checks and pytest timed, medians against the targets (pytest <= 90 s, make test <= 120 s), pytest's CPU by test folder
BENCH_RUNS ?= 2
bench-tests: setup setup-slurm
	$(PY) scripts/bench_tests.py --runs $(BENCH_RUNS) --pytest-args='$(PYTEST_ARGS)' \
		--checks-command='$(MAKE) --no-print-directory test-checks'


# diff / deploy one environment from a laptop with credentials: make deploy ENV=dev
# Both synthesize and lint the environment first, then work from that cloud assembly (cdk.out/).
## diff: make synth ENV=.., then cdk diff of that assembly against the account (credentials)
diff: setup
	@test -n "$(ENV)" || { echo "usage: make diff ENV=<dev|staging|prod>" >&2; exit 2; }
	$(MAKE) --no-print-directory synth ENV=$(ENV)
	$(CDK) diff --app cdk.out '$(ENV)/*'

## bootstrap: cdk bootstrap of the account and region config/ENV.yaml names, once per account (credentials); BOOTSTRAP_ARGS adds flags (--trust for the pipeline)
bootstrap: setup
	$(NEED_ENV)
	$(CDK) bootstrap "$$($(PY) scripts/environment_target.py $(ENV))" $(BOOTSTRAP_ARGS)

## deploy: make synth ENV=.., then cdk deploy of that assembly (credentials, a bootstrapped account)
deploy: setup
	@test -n "$(ENV)" || { echo "usage: make deploy ENV=<dev|staging|prod>" >&2; exit 2; }
	$(MAKE) --no-print-directory synth ENV=$(ENV)
	$(CDK) deploy --app cdk.out '$(ENV)/*' --require-approval broadening

## validate: gpu-platform validate: the config as synth reads it, clock checks and placeholders (no AWS, under 1 s)
validate: setup
	$(GPU_PLATFORM) validate $(if $(ENV),--env $(ENV),)

## preflight: gpu-platform preflight --env ENV: will a deploy succeed in this account (credentials)
preflight: setup
	$(NEED_ENV)
	$(GPU_PLATFORM) preflight --env $(ENV)

## cost: gpu-platform cost --env ENV: hourly and monthly cost per fleet and in total
cost: setup
	$(NEED_ENV)
	$(GPU_PLATFORM) cost --env $(ENV)

## status: gpu-platform status --env ENV: what runs now (credentials)
status: setup
	$(NEED_ENV)
	$(GPU_PLATFORM) status --env $(ENV)

## destroy: stop the log writers (trail, load balancer and bucket access logs), empty the buckets (again after a late delivery), delete one environment's stacks (make destroy ENV=dev; protected ones: ARGS=--allow-prod)
destroy: setup
	$(NEED_ENV)
	$(MAKE) --no-print-directory synth ENV=$(ENV)
	$(PY) scripts/destroy_environment.py $(ENV) $(ARGS)

## diagram: docs/architecture.svg from the synthesized dev assembly (a test fails when it is stale)
diagram: setup
	$(MAKE) --no-print-directory synth ENV=dev
	$(PY) scripts/diagram.py

## node-selftest: every probe a node runs, one verdict each, on this machine (a GPU machine: its PATH's torch, examples/)
.PHONY: node-selftest
node-selftest:
	python3 scripts/node/selftest.py --instance-type none --workload-path "$$PATH" --examples examples

## clean: remove cdk.out/ and test caches
clean:
	rm -rf cdk.out cdk.out.new .pytest_cache
