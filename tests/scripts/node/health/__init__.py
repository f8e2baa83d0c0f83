"""Tests of the node's GPU health check (scripts/node/gpu_health.py and scripts/node/health/)."""
