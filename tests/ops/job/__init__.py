"""Tests of gpu-platform job (ops/job/)."""
