"""Tests of the node's job runner (scripts/node/jobs/)."""
