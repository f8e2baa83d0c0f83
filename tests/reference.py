"""Public reference data kept beside the project, never inside it.

``../shared/reference/`` holds the CloudWatch agent's JSON schema and outputs recorded on real GPU
servers (its README names each source and license). The project must not copy them; the tests
that need them read them from there through :func:`reference_path`, which skips the test and names
the missing path when the folder is absent (a bare clone). CI always has it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFERENCE_DIR = ROOT.parent / "shared" / "reference"


def reference_path(*parts: str) -> Path:
    """The file or folder under ../shared/reference; the calling test skips, naming it, when it is absent."""
    path = REFERENCE_DIR.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"reference data {path} is absent: it is public data kept outside the project "
            "(../shared/reference/README.md) and must not be copied into it"
        )
    return path
