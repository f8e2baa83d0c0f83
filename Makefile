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
ENV_CONTEXT := $(if $(ENV),-c env=$(ENV),)

.PHONY: setup synth synth-pipeline lint-templates test lint bench diff deploy clean

setup: $(VENV)/.installed node_modules/.installed

$(VENV)/.installed: requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	node --version | grep -q '^v22\.'
	touch $@

## synth: every environment (or ENV=dev) into cdk.out/, rule packs enforced, then cfn-lint
synth: setup
	rm -rf cdk.out
	$(CDK) synth --quiet $(ENV_CONTEXT)
	$(MAKE) --no-print-directory lint-templates

## synth-pipeline: the pipeline stack with every environment of its promotion list under it, into cdk.out/
## (what the pipeline's Build step runs, scripts/ci/synth.sh), rule packs enforced, then cfn-lint
synth-pipeline: setup
	rm -rf cdk.out
	$(CDK) synth --quiet -c pipeline=true
	$(MAKE) --no-print-directory lint-templates

lint-templates:
	$(VENV)/bin/cfn-lint
	@echo "cfn-lint: $$(find cdk.out -name '*.template.json' | wc -l) templates clean"

## test: the whole suite on two workers (pytest-xdist; one shared synth per worker)
test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy config gpu_constructs stacks scripts app.py $(wildcard ops)
	$(PY) -m pytest -n 2

## test-fast: the suite without the tests marked slow (CLI synth, cfn-lint, the shipped-config copy run,
## node flows that wait on timers), to iterate; make test runs everything
.PHONY: test-fast
test-fast: setup
	$(PY) -m pytest -n 2 -m "not slow"

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

## bench: full synth wall time against an empty CDK app, measured in the same run
bench: setup
	$(PY) scripts/bench_synth.py

## diff / deploy one environment from a laptop with credentials: make deploy ENV=dev
## Both synthesize and lint the environment first, then work from that cloud assembly (cdk.out/).
diff: setup
	@test -n "$(ENV)" || { echo "usage: make diff ENV=<dev|staging|prod>" >&2; exit 2; }
	$(MAKE) --no-print-directory synth ENV=$(ENV)
	$(CDK) diff --app cdk.out '$(ENV)/*'

deploy: setup
	@test -n "$(ENV)" || { echo "usage: make deploy ENV=<dev|staging|prod>" >&2; exit 2; }
	$(MAKE) --no-print-directory synth ENV=$(ENV)
	$(CDK) deploy --app cdk.out '$(ENV)/*' --require-approval broadening

clean:
	rm -rf cdk.out .pytest_cache
