"""What every operator check reports: a named finding, its level and the fix."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum


class Level(str, Enum):  # noqa: UP042 - the shared shape of the operator checks
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
    """1 where a finding is an ERROR (or a WARNING when ``strict``), else 0."""
    failing = {Level.ERROR, Level.WARNING} if strict else {Level.ERROR}
    return 1 if any(f.level in failing for f in findings) else 0
