"""Schema of the ``notifications:`` section: who receives the platform's alerts."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from config.base import Strict

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class Notifications(Strict):
    emails: list[str] = Field(default_factory=list)

    @field_validator("emails")
    @classmethod
    def _emails(cls, value: list[str]) -> list[str]:
        problems = [
            f"@[{i}]: {address!r} is not an email address; fix: write it like ml-oncall@example.com"
            for i, address in enumerate(value)
            if not _EMAIL.match(address)
        ]
        if problems:
            raise ValueError("\n".join(problems))
        return value
