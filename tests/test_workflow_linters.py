"""The linters of `make lint` find nothing, and each finds what it is there for.

actionlint and zizmor (offline) read the pull-request workflow as GitHub would run it; bandit reads the
project's Python with pyproject's ``[tool.bandit]``. The negative controls plant in a temporary copy
what the workflow had before (an action on Node 20, a tag instead of a commit, a checkout that keeps
its token), a job token that may write everything, and an unsafe YAML load, and expect each tool to
report it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.synth import ROOT

BIN = Path(sys.executable).parent
WORKFLOW = ROOT / ".github" / "workflows" / "pr.yml"
CHECKOUT = re.compile(r"actions/checkout@[0-9a-f]{40} # v[\d.]+")
#: A `uses:` of an action at a full commit, its release tag in the comment.
PINNED = re.compile(r"^\s*(- )?uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+(\.\d+)*$")


def _run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    """One linter from the venv, offline: no GitHub token, the venv first on PATH (actionlint's shellcheck)."""
    env = {k: v for k, v in os.environ.items() if k not in {"GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN"}}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    argv = (str(BIN / str(argv[0])), *map(str, argv[1:]))
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120, check=False)


def _planted(tmp_path: Path, old: str | re.Pattern[str], new: str) -> Path:
    """A copy of the workflow with ``old`` (text or pattern, which must occur) replaced by ``new``."""
    text = WORKFLOW.read_text(encoding="utf-8")
    changed = re.sub(old, new, text) if isinstance(old, re.Pattern) else text.replace(old, new)
    assert changed != text, f"nothing to plant: {old} is not in {WORKFLOW.name}"
    copy = tmp_path / ".github" / "workflows" / WORKFLOW.name
    copy.parent.mkdir(parents=True)
    copy.write_text(changed, encoding="utf-8")
    return copy


def test_actionlint_finds_nothing_in_the_workflows() -> None:
    done = _run("actionlint", "-oneline", *sorted(WORKFLOW.parent.glob("*.y*ml")))
    assert (done.returncode, done.stdout) == (0, ""), done.stdout + done.stderr


def test_zizmor_finds_nothing_in_the_workflows_offline() -> None:
    done = _run("zizmor", "--offline", "--persona", "auditor", WORKFLOW.parent)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_action_is_pinned_to_a_commit_with_its_tag_in_a_comment() -> None:
    uses = [line for line in WORKFLOW.read_text(encoding="utf-8").splitlines() if "uses:" in line]
    assert uses
    assert [line for line in uses if not PINNED.match(line)] == []


def test_bandit_finds_nothing_in_the_project() -> None:
    done = _run("bandit", "-q", "-c", "pyproject.toml", "-r", ".")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("tool", "old", "new", "reported"),
    [
        ("actionlint", CHECKOUT, "actions/checkout@v4", 'runtime "node20" is deprecated'),
        ("zizmor", CHECKOUT, "actions/checkout@v7", "unpinned-uses"),
        ("zizmor", re.compile(r"\n\s*persist-credentials: false.*"), "", "artipacked"),
        ("zizmor", re.compile(r"permissions:\n\s+contents: read.*"), "permissions: write-all", "excessive-permissions"),
    ],
    ids=["actionlint-node20", "zizmor-unpinned", "zizmor-persisted-token", "zizmor-write-all"],
)
def test_a_planted_defect_in_a_copy_of_the_workflow_is_reported(
    tmp_path: Path, tool: str, old: str | re.Pattern[str], new: str, reported: str
) -> None:
    copy = _planted(tmp_path, old, new)
    done = _run(tool, "-oneline", copy) if tool == "actionlint" else _run(tool, "--offline", copy)
    assert done.returncode != 0 and reported in done.stdout, done.stdout + done.stderr


def test_bandit_with_the_project_config_reports_a_planted_unsafe_yaml_load(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('import yaml\n\nDATA = yaml.load("a: 1", Loader=yaml.Loader)\n', encoding="utf-8")
    done = _run("bandit", "-q", "-c", "pyproject.toml", "-r", tmp_path)
    assert done.returncode != 0 and "B506" in done.stdout, done.stdout + done.stderr
