"""The config as deployed, read from git, and what an edit of it would do to the running environment.

GitOps: what a branch's pipeline deployed is that branch's committed config/. ``validate`` compares each
environment's file with its version at a git revision (``--since``, HEAD by default: the edits not yet
committed) and reports the edits CloudFormation would apply by replacing something in use
(config/changes.py). ``--allow-replacement`` turns those ERRORs into WARNINGs for an edit made the safe way.
"""

from __future__ import annotations

import shutil
import subprocess  # nosec B404 - git, with fixed arguments
import tempfile
from pathlib import Path

from config.changes import unsafe_changes
from config.loader import ConfigError, load_environment
from config.schema import Environment
from ops.findings import Finding, Level


def deployed_environment(path: Path, ref: str) -> Environment | str:
    """The environment in ``path`` as committed at ``ref``, or why it cannot be read (not an error: a new file)."""
    git = shutil.which("git")
    if git is None:
        return "git is not installed"
    shown = subprocess.run(  # nosec B603 - fixed command, the ref is an argument, never a shell
        [git, "show", f"{ref}:./{path.name}"], cwd=path.parent, capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        return f"{path.name} is not in git at {ref} ({(shown.stderr.strip().splitlines() or ['no output'])[-1]})"
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / path.name
        copy.write_text(shown.stdout, encoding="utf-8")
        try:
            return load_environment(copy)
        except ConfigError as err:
            return f"{path.name} at {ref} is not a valid config ({err.lines[0] if err.lines else err})"


def change_findings(env: Environment, path: Path, shown: str, ref: str | None, allow: bool) -> list[Finding]:
    """An ERROR (WARNING with ``allow``) per edit since ``ref`` that replaces a resource in use; INFO when the
    deployed config cannot be read."""
    if ref is None:
        return []
    deployed = deployed_environment(path, ref)
    if isinstance(deployed, str):
        return [Finding("deployed-config", Level.INFO, f"{shown}: not compared with the deployed config: {deployed}")]
    level = Level.WARNING if allow else Level.ERROR
    return [
        Finding(
            "replaces-in-use",
            level,
            f"{shown}: {change.field}: {change.message}",
            change.safe_way + ("" if allow else " (done that way: validate --allow-replacement)"),
        )
        for change in unsafe_changes(deployed, env)
    ]
