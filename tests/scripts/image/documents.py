"""The component documents as the tests read them: config/image_components.py, each document
as Image Builder receives it, and its steps, scripts and parameters."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[3]
IMAGE_DIR = ROOT / "scripts" / "image"
NODE_DIR = ROOT / "scripts" / "node"
COMPONENTS_DIR = IMAGE_DIR / "components"
LIB_DIR = IMAGE_DIR / "lib"

# The node scripts import each other as top-level modules (tests/scripts/node/helpers.py does the same).
if str(NODE_DIR) not in sys.path:
    sys.path.insert(0, str(NODE_DIR))

import layout  # noqa: E402 - scripts/node/layout.py, found through the path above

#: Ubuntu's codename of each release the image may run (the apt suites are named by it).
UBUNTU_CODENAMES = {"22.04": "jammy", "24.04": "noble"}
#: The image's OS as /etc/os-release names it: (ID, VERSION_ID, VERSION_CODENAME), from layout.NODE_OS.
NODE_OS_RELEASE = (*layout.NODE_OS, UBUNTU_CODENAMES[layout.NODE_OS[1]])


from config import image_components as versions  # noqa: E402 - after the paths above

DOCUMENTS = {path.stem: path for path in sorted(COMPONENTS_DIR.glob("*.yaml"))}

# AWSTOE action modules. Source: the CDK construct library's ComponentAction enum
# (aws/aws-cdk, packages/@aws-cdk/aws-imagebuilder-alpha/lib/component.ts; AWS CDK Python
# reference aws_cdk.aws_imagebuilder_alpha.ComponentAction), which mirrors the EC2 Image
# Builder user guide page "Action modules supported by AWSTOE component manager".
ACTION_MODULES = frozenset(
    {
        "Assert",
        "AppendFile",
        "CopyFile",
        "CopyFolder",
        "CreateFile",
        "CreateFolder",
        "CreateSymlink",
        "DeleteFile",
        "DeleteFolder",
        "ExecuteBash",
        "ExecuteBinary",
        "ExecuteDocument",
        "ExecutePowerShell",
        "InstallMSI",
        "ListFiles",
        "MoveFile",
        "MoveFolder",
        "ReadFile",
        "Reboot",
        "S3Download",
        "S3Upload",
        "SetFileEncoding",
        "SetFileOwner",
        "SetFilePermissions",
        "SetFolderOwner",
        "SetFolderPermissions",
        "SetRegistry",
        "UninstallMSI",
        "UpdateOS",
        "WebDownload",
    }
)


def load(name: str) -> dict[str, Any]:
    """The document as Image Builder receives it (its ``# include:`` lines expanded)."""
    return yaml.safe_load(versions.document(name))


def declared_parameters(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`parameters:` is a list of one-key maps (AWSTOE syntax); flatten it."""
    result: dict[str, dict[str, Any]] = {}
    for entry in document.get("parameters") or []:
        assert isinstance(entry, dict) and len(entry) == 1, f"a parameters entry must be a one-key map, got {entry!r}"
        ((name, spec),) = entry.items()
        result[name] = spec
    return result


def steps(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(phase["name"], step) for phase in document["phases"] for step in phase["steps"]]


def bash_scripts(document: dict[str, Any]) -> list[tuple[str, str]]:
    """(phase/step, script) of every ExecuteBash step; AWSTOE joins the commands into one file."""
    scripts = []
    for phase, step in steps(document):
        if step["action"] == "ExecuteBash":
            commands = step["inputs"]["commands"]
            assert isinstance(commands, list) and commands, f"{phase}/{step['name']}: commands must be a non-empty list"
            scripts.append((f"{phase}/{step['name']}", "\n".join(commands)))
    return scripts


def script_of(name: str, step_name: str) -> str:
    return next(script for where, script in bash_scripts(load(name)) if where.endswith(f"/{step_name}"))


def created_shell_files(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(path, shell, content) of the shell files a document writes with CreateFile."""
    files = []
    for _, step in steps(document):
        if step["action"] != "CreateFile":
            continue
        for entry in step["inputs"]:
            content = entry.get("content", "")
            if entry["path"].endswith(".sh"):
                files.append((entry["path"], "sh", content))
            elif content.startswith("#!"):
                shell = "bash" if "bash" in content.splitlines()[0] else "sh"
                files.append((entry["path"], shell, content))
    return files


def body_text(document: dict[str, Any]) -> str:
    """Everything Image Builder runs or writes: the phases, without the parameters block."""
    return yaml.safe_dump(document["phases"], width=10_000)
