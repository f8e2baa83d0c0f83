"""What the pipeline package's tests share besides their fixtures (conftest.py)."""

from __future__ import annotations

#: The account of the one stage the small pipeline deploys to.
TARGET_ACCOUNT = "222222222222"
