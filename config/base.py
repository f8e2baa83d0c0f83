"""Shared pieces of the config schema."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

#: An environment's name: its file's name, also used in resource names.
ENV_NAME = re.compile(r"^[a-z][a-z0-9-]{1,15}$")


class Strict(BaseModel):
    """Frozen, and unknown keys are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
