"""Tests of gpu-platform job (ops/job/) and its fabric-test (ops/fabric/)."""
