"""Tests of gpu-platform cost (ops/cost/)."""
