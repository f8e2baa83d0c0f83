"""Checks of the operator command's own arguments, run before any config or AWS call.

Each check returns the value as it will be used (a working directory normalised, a size in bytes) or raises
``ArgumentError``, whose text is the one line printed (exit 2). The limits are those of what receives the
value on the nodes: the job document's ``allowedPattern``s (``gpu_constructs/fleet/job_document.py``), the
job runner (``scripts/node/jobs/runner.py``) and the all-reduce benchmark
(``scripts/node/fabric/allreduce_bench.py``), so a value they would refuse is refused here first.
``gpu-platform job`` uses them; ``job fabric-test`` takes ``byte_size``, ``gpu_buffers`` and ``seconds``.
"""

from __future__ import annotations

import math
import posixpath
import re
import shlex
from collections.abc import Sequence

#: The job document's JobId (systemd unit, pid file, checkpoints, log streams).
JOB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
#: The job document's WorkingDirectory: /fsx or a path below it.
FSX_PATH = re.compile(r"^/fsx(/[A-Za-z0-9._-]+)*$")
FSX = "/fsx"
#: The job document's Command: one line of at most this many characters.
MAX_COMMAND = 4096
#: The benchmark's sizes: digits and an optional binary multiple (nccl-tests' -b/-e), as parse_size reads them.
_SIZE = re.compile(r"^([0-9]+)([KMG]?)$")
_MULTIPLE = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
#: The benchmark's smallest message (``--min-bytes 8``): the largest may not be smaller.
MIN_MESSAGE_BYTES = 8


class ArgumentError(ValueError):
    """An argument the nodes would refuse; ``str()`` is the one line printed."""


def job_name(value: str, option: str = "--name") -> str:
    if not JOB_NAME.match(value):
        raise ArgumentError(
            f"{option}: {value!r} is not a job name; fix: 1-128 characters, letters, digits, '.', '_' and '-', "
            "not starting with '.' or '-'"
        )
    return value


def fsx_path(value: str, option: str = "--workdir") -> str:
    """``value`` normalised (``.``, ``..`` and repeated ``/`` resolved as the node would), if it stays at or
    below /fsx and each part fits the job document's pattern."""
    if not value.startswith("/"):
        raise ArgumentError(f"{option}: {value!r} is not an absolute path; fix: a path such as /fsx/jobs/NAME")
    normal = posixpath.normpath(value)
    if normal != FSX and not normal.startswith(FSX + "/"):
        shown = f" (it is {normal})" if normal != value else ""
        raise ArgumentError(f"{option}: {value!r} is not below /fsx{shown}; fix: a path such as /fsx/jobs/NAME")
    if not FSX_PATH.match(normal):
        raise ArgumentError(
            f"{option}: {value!r} has a character the job document refuses; fix: letters, digits, '.', '_' and "
            "'-' in each part of the path"
        )
    return normal


def job_command(argv: Sequence[str]) -> str:
    """The command as the one string the runner splits again (``shlex.join``)."""
    if not argv:
        raise ArgumentError("no command; fix: give the job's command after --, e.g. -- python3 train.py --epochs 3")
    if not argv[0].strip():
        raise ArgumentError(f"the command's first word {argv[0]!r} is empty; fix: start with a program, e.g. python3")
    command = shlex.join(argv)
    if "\n" in command or "\r" in command:
        raise ArgumentError("the command holds a line break; fix: put multi-line logic in a script on /fsx and run it")
    if "\0" in command:
        raise ArgumentError("the command holds a NUL character; fix: remove it")
    if len(command) > MAX_COMMAND:
        raise ArgumentError(
            f"the command is {len(command)} characters, the job document takes at most {MAX_COMMAND}; "
            "fix: put the arguments in a file on /fsx and pass its path"
        )
    return command


def byte_size(value: str, option: str = "--max-bytes") -> int:
    """``8``, ``64K``, ``128M``, ``1G`` (binary multiples, case ignored) to bytes, at least 8."""
    found = _SIZE.match(value.strip().upper())
    if not found:
        raise ArgumentError(
            f"{option}: {value!r} is not a size; fix: a whole number of bytes with an optional K, M or G, e.g. "
            "64M, 1G, 16G"
        )
    size = int(found.group(1)) * _MULTIPLE[found.group(2)]
    if size < MIN_MESSAGE_BYTES:
        raise ArgumentError(f"{option}: {value!r} is below the smallest message (8 bytes); fix: 8 or more, e.g. 1G")
    return size


def gpu_buffers(size: int, gpu_memory_gib: float, instance_type: str, option: str = "--max-bytes") -> int:
    """The benchmark holds two buffers of the largest message on every GPU (source and result): both must fit
    in the GPU memory of the smallest GPU of the fleet."""
    gib = 1024**3
    if 2 * size <= gpu_memory_gib * gib:
        return size
    fits = 2 ** int(math.log2(gpu_memory_gib / 2)) if gpu_memory_gib >= 2 else 0
    fix = f"at most {fits}G" if fits else "a smaller size"
    raise ArgumentError(
        f"{option}: {size / gib:g} GiB per message needs two buffers ({2 * size / gib:g} GiB) on each GPU, more "
        f"than the {gpu_memory_gib:g} GiB of {instance_type}'s GPUs; fix: {fix}"
    )


def seconds(value: float, option: str = "--timeout") -> float:
    """A wait in seconds: positive and finite."""
    if math.isnan(value) or math.isinf(value) or value <= 0:
        raise ArgumentError(f"{option}: {value:g} is not a wait; fix: a positive number of seconds, e.g. 600")
    return value
