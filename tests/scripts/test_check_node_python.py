"""scripts/check_node_python.py: node code is checked against the node's Python, and the check can fail.

The node's interpreter is one fact (``layout.NODE_PYTHON`` at ``layout.NODE_PYTHON_VERSION``); every unit
and the bootstrap run that interpreter, and every Python file that runs on a node passes vermin and mypy
against that version. The negative controls plant what broke before: ``datetime.UTC`` (3.11) on a
Python 3.10 node, and an API newer than the node's Python.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import check_node_python as check  # noqa: E402
import layout  # noqa: E402  (check_node_python put scripts/node on sys.path)

NEWER_THAN_THE_NODE = """\
import copy
from dataclasses import dataclass


@dataclass
class Settings:
    interval: int


later = copy.replace(Settings(5), interval=10)
"""


def test_every_node_source_passes_against_the_nodes_python() -> None:
    paths = check.node_python_files()
    assert ROOT / "scripts/node/lifecycle_watcher.py" in paths
    assert ROOT / "examples/train_ddp.py" in paths
    assert check.vermin_findings(paths, layout.NODE_PYTHON_VERSION) == []


def test_the_command_checks_the_repository_clean() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/check_node_python.py")], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    version = ".".join(map(str, layout.NODE_PYTHON_VERSION))
    assert re.search(rf"^node Python {re.escape(version)}: \d+ files, 0 finding", done.stdout, re.M)


def test_the_old_lifecycle_watcher_fails_on_a_python_3_10_node(tmp_path: Path) -> None:
    # The watcher as it crash-looped on Ubuntu 22.04's Python 3.10: `from datetime import UTC` (3.11+).
    old = tmp_path / "lifecycle_watcher.py"
    old.write_text("from datetime import UTC, datetime\n\nprint(datetime.now(UTC))\n", encoding="utf-8")
    findings = check.vermin_findings([old], (3, 10))
    assert findings and "datetime.UTC" in findings[0] and "Python 3.10" in findings[0]
    assert check.vermin_findings([old], layout.NODE_PYTHON_VERSION) == []  # fine on the node's 3.12


def test_an_api_newer_than_the_nodes_python_fails_both_checks(tmp_path: Path) -> None:
    planted = ROOT / "scripts" / "node" / "_planted_newer_api.py"
    planted.write_text(NEWER_THAN_THE_NODE, encoding="utf-8")
    try:
        vermin = check.vermin_findings([planted], layout.NODE_PYTHON_VERSION)
        mypy = check.mypy_findings([planted], layout.NODE_PYTHON_VERSION)
    finally:
        planted.unlink()
    assert any("copy.replace" in line for line in vermin)
    assert any("_planted_newer_api.py:10: error" in line and "replace" in line for line in mypy)


def test_the_command_exits_1_naming_the_file_and_the_api(tmp_path: Path) -> None:
    planted = tmp_path / "job.py"
    planted.write_text(NEWER_THAN_THE_NODE, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/check_node_python.py"), "--no-mypy", str(planted)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert f"{planted}: 'copy.replace' member requires" in done.stderr


def test_a_bad_version_is_one_line_and_exit_2() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/check_node_python.py"), "--python-version", "twelve"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "'twelve' is not a Python 3 version; fix: write it as 3.12" in done.stderr


def test_the_components_python_is_found_and_checked(tmp_path: Path) -> None:
    written = check.write_embedded(tmp_path)
    names = {path.name.rsplit("-", 1)[0] for path in written}
    assert {"pytorch", "node-runtime", "gpu-validation"} <= names
    allreduce = [p for p in written if "init_process_group" in p.read_text(encoding="utf-8")]
    assert allreduce, "the gpu-validation all-reduce script was not extracted"
    assert check.vermin_findings(written, layout.NODE_PYTHON_VERSION) == []


def test_embedded_extraction_sees_heredocs_and_dash_c() -> None:
    document = """
phases:
  - name: build
    steps:
      - name: Run
        action: ExecuteBash
        inputs:
          commands:
            - |
              python3 -c 'import copy; copy.replace'
              /opt/venv/bin/python - <<'PY'
              from datetime import UTC
              PY
"""
    found = check.embedded_python(document)
    assert found == ["from datetime import UTC", "import copy; copy.replace"]


_PYTHON_TOKEN = re.compile(r"(?<![\w/.-])(/\S*/)?python3(\.\d+)?(?![\w.-])")


@pytest.mark.parametrize("unit", sorted(p.name for p in (ROOT / "scripts/node/systemd").glob("*.service")))
def test_every_unit_runs_the_nodes_python(unit: str) -> None:
    lines = (ROOT / "scripts/node/systemd" / unit).read_text(encoding="utf-8").splitlines()
    commands = [line.split("=", 1)[1].lstrip("+-@!:") for line in lines if re.match(r"^Exec\w+=", line)]
    interpreters = [m.group(0) for command in commands for m in _PYTHON_TOKEN.finditer(command.split()[0])]
    for command in commands:
        first = command.split()[0]
        if "python" in first:
            assert first == layout.NODE_PYTHON, f"{unit}: {command}"
    assert all(i == layout.NODE_PYTHON for i in interpreters)


def test_the_bootstrap_and_the_image_use_the_same_interpreter() -> None:
    bootstrap = (ROOT / "scripts/node/bootstrap.sh").read_text(encoding="utf-8")
    assert f'PYTHON_BIN="${{PYTHON_BIN:-{layout.NODE_PYTHON}}}"' in bootstrap
    runtime = check.versions.document("node-runtime")
    assert runtime.count(f"{layout.NODE_PYTHON} -c 'import boto3'") == 3


def test_the_node_reads_the_golden_amis_record_where_the_image_writes_it() -> None:
    assert layout.IMAGE_VERSIONS_FILE == check.versions.IMAGE_VERSIONS_FILE


def test_every_heredoc_a_component_feeds_to_python_is_one_the_check_reads() -> None:
    # The check extracts heredocs tagged PY: Python fed to an interpreter under another tag would go unchecked.
    fed = re.compile(r"python\S*\s+-(?:\s+\"[^\"]*\")*\s+<<-?'?(?P<tag>\w+)")
    seen = 0
    for name in check.versions.component_names():
        for command in check._commands(check.versions.document(name)):
            tags = [match.group("tag") for match in fed.finditer(command)]
            assert set(tags) <= {"PY"}, f"{name}: {tags}"
            seen += len(tags)
    assert seen >= 3  # efa's and gpu-validation's: the pattern matches what the components do
