"""Tests of a served fleet's service on the node (scripts/node/serving/)."""
