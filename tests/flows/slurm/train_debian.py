#!/usr/bin/python3
"""examples/train_ddp.py under Debian 12's torch 1.13, as the tests' TRAIN_SCRIPT: that torch's weights-only
loader (``torch.load(weights_only=True)``) predates floats in the pickle (the optimizer's learning rate), so it
refuses every checkpoint the example writes and a resume would start afresh. The checkpoints here are the
test's own; on torch 1.x only they are loaded with ``weights_only=False``. The golden AMI's torch 2.x loads them
as the example asks. (torch is imported before the example's signal handlers: no signal comes that early here.)"""

import runpy
import sys
from pathlib import Path

import torch

EXAMPLE = str(Path(__file__).resolve().parents[3] / "examples" / "train_ddp.py")

if torch.__version__.startswith("1."):
    _load = torch.load

    def _trusted_load(*args, **kwargs):  # type: ignore[no-untyped-def]
        return _load(*args, **{**kwargs, "weights_only": False})

    torch.load = _trusted_load

if __name__ == "__main__":
    sys.argv[0] = EXAMPLE
    runpy.run_path(EXAMPLE, run_name="__main__")
