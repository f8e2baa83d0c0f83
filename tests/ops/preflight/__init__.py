"""Tests of gpu-platform preflight (ops/preflight/)."""
