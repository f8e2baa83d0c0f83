"""Tests of gpu-platform job fabric-test (ops/fabric/)."""
