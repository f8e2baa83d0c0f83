"""A parent image to build on, faked, and the component documents run on it the way AWSTOE runs them.

``FakeSystem`` lays out a fake root (``GPU_PLATFORM_ROOT``: /etc/os-release of the image's OS, /etc/apt, /opt, ...),
a state file describing the parent (``Parent``) and a PATH whose first folder holds the fake tools
(tests/scripts/image/fake_tools.py, fake_devices.py; each a small bash script calling this test process's
tests/scripts/image/fake_tool_server.py, which runs them without an interpreter start per call). ``run`` takes a component's
document as Image Builder receives it (config/image_components.py ``document``, its includes expanded), fills in the
parameters and runs the steps of the phases asked for: ExecuteBash as a bash script, CreateFile and WebDownload as
files under the root (the downloads are made up from their URL: an EFA installer tarball whose installer leaves what
the real one does, a CloudWatch agent .deb; what a step fetches with curl, AWS PCS's installers among it, is served by
fake_downloads.py), Reboot as nothing. It stops at the first failed step, as AWSTOE does.
"""

from __future__ import annotations

import atexit
import functools
import io
import json
import re
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from config.image import DEFAULT_VERSIONS
from tests.scripts.image import fake_tool_server, fake_tools
from tests.scripts.image.documents import NODE_OS_RELEASE, versions

HERE = Path(__file__).resolve().parent
KERNEL = "6.14.0-1017-aws"
TOOLS = [
    "apt-get",
    "apt-cache",
    "dpkg-query",
    "dpkg",
    "nvidia-smi",
    "modinfo",
    "modprobe",
    "systemctl",
    "lspci",
    "ldconfig",
    "update-initramfs",
    "update-alternatives",
    "apt-mark",
    "uname",
    "linux-version",
    "gpg",
    "gpgv",
    "curl",
    "nvidia-persistenced",
    "nv-hostengine",
    "dcgmi",
    "fake-efa-install",
    "fake-pcs-install",
]
OS_RELEASE = (
    'PRETTY_NAME="Ubuntu {version} LTS"\nNAME="Ubuntu"\nVERSION_ID="{version}"\nVERSION_CODENAME={codename}\nID={id}\n'
)
FOLDERS = (
    "etc/apt/sources.list.d",
    "etc/apt/preferences.d",
    "usr/share/keyrings",
    "etc/modprobe.d",
    "etc/ld.so.conf.d",
    "usr/lib/x86_64-linux-gnu",
    "usr/local",
    "var/tmp",
)


@dataclass
class Parent:
    """What the parent image carries: dpkg's packages, what the apt repositories offer (newest first), the loaded
    NVIDIA driver (None: no driver), the EFA installer release and its plugin's Debian version (None: none).

    Beside dpkg, the way the Deep Learning AMI carries them: ``cuda`` the CUDA toolkits under /usr/local that no
    package owns (``MAJOR.MINOR`` -> what their version.json says), ``cuda_default`` the one /usr/local/cuda points at,
    ``toolkit_nccl`` the NCCL a toolkit holds in its own lib/ (``MAJOR.MINOR`` -> NCCL version), ``ld_conf`` folders
    the parent lists in /etc/ld.so.conf.d ahead of the system's. ``pending_kernel``: a newer kernel the repositories
    offer, which unattended-upgrades installs the first time apt runs while its timer is live and the kernel is not
    held. ``persistenced_unit``: the driver ships nvidia-persistenced.service (a runfile install does not).
    ``pcs_agent``, ``pcs_slurm``: the AWS PCS agent and PCS Slurm build AWS's installers left (VERSION-RELEASE)."""

    installed: dict[str, str]
    offered: dict[str, list[str]]
    driver: str | None = None
    efa: tuple[str, str] | None = None
    os_release: tuple[str, str, str] = NODE_OS_RELEASE
    kernel: str = KERNEL
    gpus: int = 4
    cuda: dict[str, str] = field(default_factory=dict)
    cuda_default: str | None = None
    toolkit_nccl: dict[str, str] = field(default_factory=dict)
    ld_conf: tuple[str, ...] = ()
    pending_kernel: str | None = None
    persistenced_unit: bool = True
    pcs_agent: str | None = None
    pcs_slurm: str | None = None


@dataclass
class StepResult:
    where: str
    returncode: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return f"{self.where} exited {self.returncode}\n{self.stdout}\n{self.stderr}"


@dataclass
class FakeSystem:
    tmp: Path
    parent: Parent
    efa_plugins: dict[str, str] = field(
        default_factory=lambda: {DEFAULT_VERSIONS["EfaInstallerVersion"]: DEFAULT_VERSIONS["AwsOfiNcclVersion"] + "-1"}
    )
    """EFA installer release -> the Debian version of the aws-ofi-nccl package its tarball installs (default: the
    pinned installer ships the pinned plugin, as its release notes say)."""

    def __post_init__(self) -> None:
        self.root, self.bin, self.state = self.tmp / "root", self.tmp / "bin", self.tmp / "state.json"
        for folder in FOLDERS:
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        os_id, version, codename = self.parent.os_release
        (self.root / "etc/os-release").write_text(OS_RELEASE.format(id=os_id, version=version, codename=codename))
        state: dict[str, Any] = {
            "installed": {},
            "offered": self.parent.offered,
            "driver": self.parent.driver,
            "efa": None,
            "kernel": self.parent.kernel,
            "kernels": [self.parent.kernel],
            "pending_kernel": self.parent.pending_kernel,
            "persistenced_unit": self.parent.persistenced_unit,
            "gpus": self.parent.gpus,
            "enabled": [],
            "masked": [],
            "held": [],
            "log": [],
        }
        for name, version in self.parent.installed.items():
            fake_tools.install(state, name, version, self.root)
        self.state.write_text(json.dumps(state))
        self._lay_out_libraries()
        self.bin.mkdir()
        port = tool_server_port()
        for tool in TOOLS:
            self._write_tool(tool, fake_tool_server.wrapper(tool, port))
        # The image's python3 runs the steps' stdlib-only snippets: no site-packages (-S), as on a bare image.
        self._write_tool("python3", f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
        if self.parent.efa:
            self._tool("fake-efa-install", *self.parent.efa)
        for what, release in (("agent", self.parent.pcs_agent), ("slurm", self.parent.pcs_slurm)):
            if release:
                self._tool("fake-pcs-install", what, *release.rsplit("-", 1), "-y")

    def _lay_out_libraries(self) -> None:
        """The system's library folder in the linker's configuration, and the parent's toolkits outside dpkg."""
        conf = self.root / "etc/ld.so.conf.d"
        (conf / "x86_64-linux-gnu.conf").write_text("# Multiarch support\n/usr/lib/x86_64-linux-gnu\n")
        if self.parent.ld_conf:
            (conf / "000_cuda.conf").write_text("".join(f"{folder}\n" for folder in self.parent.ld_conf))
        for minor, version in self.parent.cuda.items():
            toolkit = self.root / f"usr/local/cuda-{minor}"
            fake_tools.nvcc(toolkit, minor, version)
            (toolkit / "version.json").write_text(
                json.dumps({"cuda": {"name": "CUDA SDK", "version": version}, "cuda_nvcc": {"version": version}})
            )
        for minor, version in self.parent.toolkit_nccl.items():
            fake_tools.library(self.root / f"usr/local/cuda-{minor}/lib", "libnccl.so.2", version)
        if self.parent.cuda_default:
            (self.root / "usr/local/cuda").symlink_to(f"cuda-{self.parent.cuda_default}")

    @property
    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "GPU_PLATFORM_ROOT": str(self.root),
            "FAKE_STATE": str(self.state),
            "HOME": str(self.tmp),
            "LANG": "C.UTF-8",
        }

    def run(
        self, name: str, phases: tuple[str, ...], parameters: dict[str, str], steps: tuple[str, ...] = ()
    ) -> list[StepResult]:
        """The steps of ``phases`` of component ``name`` (those named in ``steps``, if any), in order, until one
        fails."""
        text = re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: parameters[m.group(1)], versions.document(name))
        results = []
        for phase in _phases(text):
            if phase["name"] not in phases:
                continue
            for step in phase["steps"]:
                if steps and step["name"] not in steps:
                    continue
                results.append(self._step(f"{name}/{phase['name']}/{step['name']}", step))
                if results[-1].returncode:
                    return results
        return results

    def snapshot(self) -> dict[str, Any]:
        return json.loads(self.state.read_text())

    def recorded(self) -> dict[str, str]:
        return json.loads((self.root / versions.IMAGE_VERSIONS_FILE.lstrip("/")).read_text())

    def _step(self, where: str, step: dict[str, Any]) -> StepResult:
        action, inputs = step["action"], step["inputs"]
        if action == "ExecuteBash":
            done = subprocess.run(
                ["bash", "-c", "\n".join(inputs["commands"])],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                env=self.env,
                cwd=self.tmp,
                check=False,
            )
            return StepResult(where, done.returncode, done.stdout, done.stderr)
        for entry in inputs if action in ("CreateFile", "WebDownload") else []:
            if action == "CreateFile":
                self._write(entry["path"], entry["content"].encode(), int(entry["permissions"], 8))
            else:
                url = entry["source"]
                self._write(entry["destination"] + url.rsplit("/", 1)[1], self._download(url), 0o644)
        return StepResult(where, 0, "", "")

    def _write(self, path: str, content: bytes, mode: int) -> None:
        target = self.root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(mode)

    def _download(self, url: str) -> bytes:
        """What the URL serves: an EFA installer tarball, a CloudWatch agent .deb, a signature or a key."""
        if match := re.search(r"aws-efa-installer-([\d.]+)\.tar\.gz$", url):
            return _efa_tarball(match.group(1), self.efa_plugins[match.group(1)])
        if match := re.search(r"/amd64/([^/]+)/amazon-cloudwatch-agent\.deb$", url):
            return f"Package: amazon-cloudwatch-agent\nVersion: {match.group(1)}-1\n".encode()
        return b"-----BEGIN PGP PUBLIC KEY BLOCK-----\nfake\n" if url.endswith((".key", ".gpg")) else b"signature"

    def _write_tool(self, name: str, text: str) -> None:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)

    def _tool(self, *argv: str) -> None:
        subprocess.run([str(self.bin / argv[0]), *argv[1:]], env=self.env, stdin=subprocess.DEVNULL, check=True)


@functools.cache
def _phases(text: str) -> list[dict[str, Any]]:
    """A document's phases, parsed once per text (the tests run the same documents with the same parameters)."""
    return yaml.safe_load(text)["phases"]


_server: subprocess.Popen[str] | None = None
_port: int | None = None


def tool_server_port() -> int:
    """The port of this test process's fake-tool server (tests/scripts/image/fake_tool_server.py), started on first use."""
    global _server, _port
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(
            [sys.executable, "-S", str(HERE / "fake_tool_server.py")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert _server.stdout is not None
        _port = int(_server.stdout.readline())
        atexit.register(_stop_server, _server)
    assert _port is not None
    return _port


def _stop_server(server: subprocess.Popen[str]) -> None:
    server.kill()
    server.wait()


def _efa_tarball(version: str, plugin: str) -> bytes:
    script = f"#!/bin/sh\nexec fake-efa-install {version} {plugin}\n".encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("aws-efa-installer/efa_installer.sh")
        info.size, info.mode = len(script), 0o755
        tar.addfile(info, io.BytesIO(script))
    return buffer.getvalue()
