"""Reusable L3 constructs of the GPU platform, one concern each.

A construct receives typed keyword-only arguments and never reads files,
environment variables or context.
"""
