"""gpu-platform validate --since: an edit since the deployed (committed) config that would replace a resource
in use is an ERROR with the safe way, a WARNING with --allow-replacement; a file git does not have is an INFO."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from config.loader import CONFIG_DIR
from ops.findings import Level, exit_code
from ops.validate import validate

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository whose committed config/ is the shipped one: the deployed config."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG_DIR, config, ignore=shutil.ignore_patterns("__pycache__", "*.py", "catalog"))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.com", "add", ".")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "deployed")
    return config


def _edit_port(config: Path) -> None:
    path = config / "dev.yaml"
    data = yaml.safe_load(path.read_text())
    served = next(f for f in data["fleets"] if f.get("service"))
    served["service"]["port"] += 1
    served["service"]["command"] = served["service"]["command"].replace("--port 8080", "--port 8081")
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _replacing(findings: list) -> list:
    return [f for f in findings if f.check == "replaces-in-use"]


def test_an_uncommitted_port_edit_is_an_error_with_the_safe_way(repo: Path) -> None:
    assert _replacing(validate(["dev"], repo, since="HEAD")) == []
    _edit_port(repo)
    (finding,) = _replacing(validate(["dev"], repo, since="HEAD"))
    assert finding.level is Level.ERROR
    assert "dev.yaml: fleets[1].service.port" in finding.message
    assert "8080 -> 8081" in finding.message and "second served fleet" in finding.fix
    assert exit_code(validate(["dev"], repo, since="HEAD")) == 1


def test_allow_replacement_reports_it_as_a_warning(repo: Path) -> None:
    _edit_port(repo)
    (finding,) = _replacing(validate(["dev"], repo, since="HEAD", allow_replacement=True))
    assert finding.level is Level.WARNING and "--allow-replacement" not in finding.fix


def test_without_since_nothing_is_compared(repo: Path) -> None:
    _edit_port(repo)
    assert _replacing(validate(["dev"], repo)) == []


def test_an_environment_git_does_not_have_yet_is_an_info(repo: Path) -> None:
    shutil.copy(repo / "staging.yaml", repo / "qa.yaml")
    text = (
        (repo / "qa.yaml")
        .read_text()
        .replace("name: staging", "name: qa")
        .replace("Environment: staging", "Environment: qa")
    )
    text = text.replace("222222222222", "444444444444")
    (repo / "qa.yaml").write_text(text)
    dev = (repo / "dev.yaml").read_text()
    (repo / "dev.yaml").write_text(dev.replace("share_with: [staging, prod]", "share_with: [staging, prod, qa]"))
    findings = [f for f in validate(["qa"], repo, since="HEAD") if f.check == "deployed-config"]
    assert [f.level for f in findings] == [Level.INFO] and "a new environment" in findings[0].message


@pytest.mark.parametrize("ref", ["no-such-revision", "HEAD~5"])
def test_a_revision_that_cannot_be_read_fails_when_asked_for(repo: Path, ref: str) -> None:
    _edit_port(repo)
    findings = [f for f in validate(["dev"], repo, since=ref) if f.check == "deployed-config"]
    assert [f.level for f in findings] == [Level.ERROR]
    assert "not compared with the deployed config" in findings[0].message and findings[0].fix
    assert exit_code(validate(["dev"], repo, since=ref)) == 1
    # The default (HEAD, not asked for) only informs: a config/ outside git is still validated.
    quiet = [f for f in validate(["dev"], repo, since=ref, since_required=False) if f.check == "deployed-config"]
    assert [f.level for f in quiet] == [Level.INFO]
