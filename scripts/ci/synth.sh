#!/usr/bin/env bash
# The pipeline's Build step (stacks/pipeline_stack.py runs only this script).
#
# The same commands as CI (.ci/run, .github/workflows/pr.yml) on a fresh checkout:
# make installs the virtual environment and the pinned Node.js and CDK CLI from
# the repository's own files, runs lint and the test suite, then synthesizes the
# cloud assembly the pipeline deploys: the pipeline stack and, under it, every
# environment of config/pipeline/pipeline.yaml's promotion list, into cdk.out/
# (rule packs enforced, then cfn-lint). A failure stops the pipeline before it
# updates itself or deploys anything.
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then  # the comment above is the usage; run nothing
    sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"
    exit 0
fi
set -euo pipefail
cd "$(dirname "$0")/../.."

export CDK_DISABLE_CLI_TELEMETRY=true
make test
make synth-pipeline
