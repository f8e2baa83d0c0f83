"""The one parent of the test cluster's daemons, so that none outlives the test run.

    python keeper.py ROOT        # reads JSON lines {"argv": [...], "env": {...}, "log": "file"}, answers each pid

Each line starts one daemon in the foreground, as a child of this process that dies with it (PR_SET_PDEATHSIG).
This process is a child subreaper (PR_SET_CHILD_SUBREAPER): what the daemons leave behind (slurmd's
slurmstepd, the jobs' processes) is reparented here rather than to init. When its standard input ends, because
the tests are done or because the pytest process died, whatever closed it, it stops everything it holds
(SIGTERM, then SIGKILL after a grace time, again for whatever is reparented meanwhile) and removes ROOT.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE_S = 2.0
LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def children() -> list[int]:
    """Every live child of this process (its own and those reparented to it)."""
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found += [int(pid) for pid in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def signal_all(signum: int) -> None:
    for pid in children():
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue


def stop_everything() -> None:
    """SIGTERM to every child, SIGKILL to what is left after GRACE_S, until no child remains."""
    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while children():
        reap()
        if time.monotonic() >= deadline:
            signal_all(signal.SIGKILL)
        time.sleep(0.05)
    reap()


def start(request: dict[str, object]) -> int:
    with open(str(request["log"]), "ab") as log:
        process = subprocess.Popen(
            [str(word) for word in request["argv"]],  # type: ignore[attr-defined]
            env={str(k): str(v) for k, v in request["env"].items()},  # type: ignore[attr-defined]
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # a child of this single-threaded process: preexec_fn is safe here
        )
    return process.pid


def main(root: str) -> int:
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1)
    try:
        for line in sys.stdin:
            try:
                pid = start(json.loads(line))
            except (OSError, ValueError, KeyError) as err:
                print(f"error {err}", flush=True)
                continue
            print(pid, flush=True)
    finally:
        stop_everything()
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
