"""What a command found: a named check, a level, a message and the fix, and the exit code they give."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Level(str, Enum):  # noqa: UP042 - str mixin: JSON and comparisons see the plain value
    ERROR = "ERROR"
    WARNING = "WARNING"
    INFO = "INFO"


@dataclass(frozen=True)
class Finding:
    check: str
    level: Level
    message: str
    fix: str = ""


def exit_code(findings: Iterable[Finding], strict: bool = False) -> int:
    """1 when any finding is an ERROR (or a WARNING with ``strict``), else 0."""
    failing = {Level.ERROR, Level.WARNING} if strict else {Level.ERROR}
    return 1 if any(f.level in failing for f in findings) else 0
