"""Shared pieces of the config schema."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

#: An environment's name: its file's name, also used in resource names.
ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{1,15}$")


class WrittenInt(int):
    """An integer YAML read from something other than plain decimal digits, with the text as
    written: YAML 1.1 reads ``011111111111`` as octal (1227133513) and ``0x1f``, ``1_000``, ``+5``
    as numbers too, so an error must quote ``written``, not the number."""

    written: str

    @classmethod
    def of(cls, value: int, written: str) -> WrittenInt:
        out = cls(value)
        out.written = written
        return out


class Strict(BaseModel):
    """Frozen, and unknown keys are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
