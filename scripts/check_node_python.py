"""Check every Python file that runs on a node against the node's own Python, not this machine's.

The node scripts, the examples and the Python inside the image components run on the node's
interpreter (``layout.NODE_PYTHON``, version ``layout.NODE_PYTHON_VERSION``), which is not the Python
that runs the tests. Two checks, both against that version:

- vermin (minimum-version analysis): no module, member, syntax or keyword newer than the node's Python;
- mypy with ``--python-version`` (typeshed's version markers): scripts/node and examples type-check
  against the node's standard library.

Usage: python scripts/check_node_python.py [--no-mypy] [--python-version X.Y] [PATH ...]
(no PATH: every node source of the repository). Exit 0 clean, 1 a finding (one line each), 2 bad usage.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "node"))

import layout  # noqa: E402

from config.image import COMPONENTS as versions  # noqa: E402  (config/image_components.py)

#: vermin's command, installed beside this Python by requirements-dev.txt.
VERMIN = Path(sys.executable).with_name("vermin")
#: Folders whose every ``*.py`` runs on a node (examples: unpacked under /opt/gpu-platform/examples).
NODE_FOLDERS = ("scripts/node", "examples")
#: Python a component's bash runs: a quoted heredoc (``<<'PY'`` ... ``PY``) or a single-quoted ``-c '...'``.
_HEREDOC = re.compile(r"<<-?'(?P<tag>[A-Z]+)'\n(?P<body>.*?)\n[ \t]*(?P=tag)$", re.S | re.M)
_DASH_C = re.compile(r"python3?\S*\s+-c\s+'(?P<body>[^']+)'")


def node_python_files() -> list[Path]:
    """Every Python file of the repository that runs on a node (git's view: ignored files are not shipped)."""
    listed = subprocess.run(
        ["git", "ls-files", "--", *(f"{folder}/*.py" for folder in NODE_FOLDERS)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    return [ROOT / name for name in listed]


def _commands(document: str) -> Iterator[str]:
    for phase in yaml.safe_load(document).get("phases", []):
        for step in phase.get("steps", []):
            inputs = step.get("inputs")
            if isinstance(inputs, dict):
                yield from inputs.get("commands", [])


def embedded_python(document: str) -> list[str]:
    """The Python sources a component document runs (heredocs tagged PY/EOF and ``python -c '...'``)."""
    found: list[str] = []
    for command in _commands(document):
        found += [m.group("body") for m in _HEREDOC.finditer(command) if m.group("tag") == "PY"]
        found += [m.group("body") for m in _DASH_C.finditer(command)]
    return found


def write_embedded(folder: Path) -> list[Path]:
    """Each component's embedded Python as ``<component>-<n>.py`` under folder."""
    paths = []
    for name in versions.component_names():
        for i, source in enumerate(embedded_python(versions.document(name))):
            path = folder / f"{name}-{i}.py"
            path.write_text(source + "\n", encoding="utf-8")
            paths.append(path)
    return paths


def vermin_findings(paths: list[Path], target: tuple[int, int]) -> list[str]:
    """One line per construct that needs a Python newer than target, naming its file."""
    version = f"{target[0]}.{target[1]}"
    result = subprocess.run(
        [
            str(VERMIN),
            f"-t={version}-",
            "--violations",
            "--no-tips",
            "--no-parse-comments",
            "--processes=1",
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
    )
    if result.returncode == 0:
        return []
    lines, current = [], ""
    for line in result.stdout.splitlines():
        if re.match(r"^\S.*\.py$", line) or re.match(r"^!2, [0-9.]+\s+\S", line):
            current = line.split()[-1]
        elif line.startswith("  ") and "requires" in line:
            lines.append(f"{current}: {line.strip()}, but the node runs Python {version}")
    return lines or [f"vermin found code newer than Python {version}: {result.stdout.strip() or result.stderr.strip()}"]


def mypy_findings(paths: list[Path], target: tuple[int, int]) -> list[str]:
    """mypy's errors for paths when type-checked against the node's standard library."""
    from mypy import api  # imported here: the vermin check alone needs no mypy

    args = ["--config-file", str(ROOT / "mypy.ini"), "--python-version", f"{target[0]}.{target[1]}"]
    stdout, stderr, status = api.run([*args, *map(str, paths)])
    if status == 0:
        return []
    return [line for line in stdout.splitlines() if ": error:" in line] or [stdout.strip() or stderr.strip()]


def _version(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"3\.(\d{1,2})", text)
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python 3 version; fix: write it as 3.12")
    return 3, int(match.group(1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path, help="files to check (default: every node source)")
    parser.add_argument("--python-version", type=_version, default=layout.NODE_PYTHON_VERSION)
    parser.add_argument("--no-mypy", action="store_true", help="the vermin check only")
    args = parser.parse_args(argv)
    target = args.python_version
    with tempfile.TemporaryDirectory(prefix="node-python-") as tmp:
        paths = list(args.paths) or [*node_python_files(), *write_embedded(Path(tmp))]
        findings = vermin_findings(paths, target)
        if not args.no_mypy:
            typed = [p for p in paths if p.is_relative_to(ROOT) and not p.is_relative_to(Path(tmp))]
            findings += mypy_findings(typed, target) if typed else []
    for finding in findings:
        print(finding, file=sys.stderr)
    version = ".".join(map(str, target))
    print(f"node Python {version}: {len(paths)} files, {len(findings)} finding(s)")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
