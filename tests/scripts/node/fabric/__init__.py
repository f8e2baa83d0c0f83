"""Tests of the fabric benchmark (scripts/node/fabric/)."""
