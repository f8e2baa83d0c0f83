"""Stacks of the GPU platform: each composes gpu_constructs and wires them."""
