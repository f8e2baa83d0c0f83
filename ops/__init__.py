"""The operator command gpu-platform: validate, preflight, cost, status."""
