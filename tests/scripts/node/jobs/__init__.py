"""Tests of the node's job runner (scripts/node/jobs/) and the fabric benchmark (scripts/node/fabric/)."""
