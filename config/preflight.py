"""The ``preflight:`` section: which preflight checks may not report WARNINGs for this environment.

``gpu-platform preflight`` runs named checks against the account (``ops/preflight/``). A WARNING
the team has accepted (e.g. the fleets' combined maximum above the vCPU quota, which they never
reach together) is silenced here by the check's name; its findings are then shown as INFO, marked
suppressed. ERRORs cannot be suppressed: they are what makes a deploy fail.
"""

from __future__ import annotations

import difflib

from pydantic import Field, field_validator

from config.base import Strict

#: Every preflight check, by name (ops/preflight/command.py runs them in this order).
CHECK_NAMES = (
    "account",
    "region",
    "cdk-bootstrap",
    "instance-offerings",
    "efa-support",
    "vcpu-quotas",
    "capacity-reservations",
    "capacity-blocks",
    "ami-parameters",
    "fsx-quota",
    "nat-eip-quotas",
    "pcs",
)


class Preflight(Strict):
    suppress: list[str] = Field(default_factory=list)

    @field_validator("suppress")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        problems = []
        for i, name in enumerate(value):
            if name not in CHECK_NAMES:
                close = difflib.get_close_matches(name, CHECK_NAMES, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                problems.append(
                    f"@[{i}]: {name!r} is not a preflight check; fix: {hint}use one of {', '.join(CHECK_NAMES)}"
                )
        if problems:
            raise ValueError("\n".join(problems))
        return value
