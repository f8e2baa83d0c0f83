"""What a check reports: a named check, a level and a message with its fix; and the exit code they give."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from enum import Enum


class Level(str, Enum):  # noqa: UP042 - the shape every ops module shares
    ERROR = "ERROR"
    WARNING = "WARNING"
    INFO = "INFO"
    #: A check that could not run (no permission, AWS unreachable): it passed nothing and failed nothing.
    UNCHECKED = "UNCHECKED"


@dataclass(frozen=True)
class Finding:
    check: str
    level: Level
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {**asdict(self), "level": self.level.value}


def exit_code(findings: Iterable[Finding], strict: bool = False) -> int:
    """1 when any finding is an ERROR (or, with ``strict``, a WARNING or a check that could not run), else 0."""
    failing = {Level.ERROR, Level.WARNING, Level.UNCHECKED} if strict else {Level.ERROR}
    return 1 if any(f.level in failing for f in findings) else 0
