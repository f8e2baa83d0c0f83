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


class Unreadable(Exception):
    """The deployed config cannot be read at all: no git, not a repository, no such revision, an invalid file."""


def deployed_environment(path: Path, ref: str) -> Environment | None:
    """The environment in ``path`` as committed at ``ref``; None where ``ref`` has no such file (a new
    environment); ``Unreadable`` with the reason otherwise."""
    git = shutil.which("git")
    if git is None:
        raise Unreadable("git is not installed")
    verify = subprocess.run(  # nosec B603 - fixed command, the ref is an argument, never a shell
        [git, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        cwd=path.parent,
        capture_output=True,
        text=True,
        check=False,
    )
    if verify.returncode != 0:
        raise Unreadable(f"{ref} is not a revision of a git repository holding {path.parent}")
    shown = subprocess.run(  # nosec B603 - fixed command, the ref is an argument, never a shell
        [git, "show", f"{ref}:./{path.name}"], cwd=path.parent, capture_output=True, text=True, check=False
    )
    if shown.returncode != 0:
        return None
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / path.name
        copy.write_text(shown.stdout, encoding="utf-8")
        try:
            return load_environment(copy)
        except ConfigError as err:
            raise Unreadable(
                f"{path.name} at {ref} is not a valid config ({err.lines[0] if err.lines else err})"
            ) from None


def change_findings(
    env: Environment, path: Path, shown: str, ref: str | None, allow: bool, required: bool = True
) -> list[Finding]:
    """An ERROR (WARNING with ``allow``) per edit since ``ref`` that replaces a resource in use. A file that
    ``ref`` lacks (a new environment) is an INFO; a deployed config that cannot be read is an ERROR when
    ``required`` (``--since`` given: the check must not pass by checking nothing), else an INFO."""
    if ref is None:
        return []
    try:
        deployed = deployed_environment(path, ref)
    except Unreadable as err:
        level = Level.ERROR if required else Level.INFO
        fix = "pass --since a revision of this repository that holds the deployed config" if required else ""
        return [Finding("deployed-config", level, f"{shown}: not compared with the deployed config: {err}", fix)]
    if deployed is None:
        message = (
            f"{shown}: not compared with the deployed config: {path.name} is not in git at {ref} (a new environment)"
        )
        return [Finding("deployed-config", Level.INFO, message)]
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
