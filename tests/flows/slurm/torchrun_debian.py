#!/usr/bin/python3
"""Debian 12's torchrun (torch 1.13) as the sbatch template starts it, with one fix: torch 1.13 looks its
``--redirects`` / ``--tee`` values up by iterating an IntFlag, which since Python 3.11 skips 0 and composite
members, so the defaults ("0") read as None and torchrun fails before it starts a worker. Newer torch (the
golden AMI's) has no such lookup; the tests pass this file as TORCHRUN."""

import sys

from torch.distributed.elastic.multiprocessing import api
from torch.distributed.run import main

_from_str = api.Std.from_str


def _std(value: str):  # type: ignore[no-untyped-def]
    if value in ("0", "3"):  # NONE and ALL: the two that iteration skips
        return api.Std(int(value))
    return _from_str(value)


api.Std.from_str = staticmethod(_std)  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main())
