"""The bootstrap on an image that lacks what the golden AMI adds: the real bootstrap.sh (tests/scripts/node/test_bootstrap.py's
fakes), on the public Deep Learning AMI the fleets launch until the first golden AMI exists (no
/opt/gpu-platform/image-versions.json) and on the golden AMI (that file present).

- boto3 for the services' Python: checked at the units step, before the termination watcher starts, in one line
  that names the fix (the watcher would meet its absence only when the node leaves).
- The Lustre client: lustre-mount.service runs the real mount-lustre.sh (a fake oneshot unit, the fake mount of
  tests/scripts/node/fake_disks.py, fake apt-get / curl / gpg). Missing on the DLAMI, it is installed from AWS's repository;
  where that fails, the node goes in service without /fsx and the log says so (abandoning would relaunch the same
  image for ever); missing on the golden AMI, the launch fails."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from tests.scripts.node.fake_node import Node, assert_abandoned, lifecycle_call
from tests.scripts.node.helpers import NODE_DIR

KERNEL = "6.8.0-1024-aws"
PACKAGE = f"lustre-client-modules-{KERNEL}"
DEVICE = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh"

# apt-get: the update succeeds; the install fails with FAKE_APT_FAIL, else it puts the client's mount helper in place.
FAKE_APT_GET = """#!/usr/bin/env bash
printf 'apt-get %s\\n' "$*" >>"$FAKE_CALLS"
[[ "$*" == *" install "* ]] || exit 0
if [[ -n "${FAKE_APT_FAIL:-}" ]]; then
  echo "E: Unable to locate package ${*: -1}" >&2
  exit 100
fi
printf '#!/bin/sh\\nexit 0\\n' >"$MOUNT_LUSTRE_BIN"
chmod 0755 "$MOUNT_LUSTRE_BIN"
"""
FAKE_CURL = """#!/usr/bin/env bash
printf 'curl %s\\n' "$*" >>"$FAKE_CALLS"
while (($#)); do
  [[ "$1" != -o ]] || out="$2"
  shift
done
echo "-----BEGIN PGP PUBLIC KEY BLOCK-----" >"$out"
"""
FAKE_GPG = """#!/usr/bin/env bash
printf 'gpg %s\\n' "$*" >>"$FAKE_CALLS"
while (($#)); do
  [[ "$1" != -o ]] || out="$2"
  shift
done
echo "binary keyring" >"$out"
"""


def on_the_dlami_without_a_lustre_client(node: Node) -> None:
    """lustre-mount.service runs mount-lustre.sh with node.env (its EnvironmentFile=), on an image whose kernel
    has no Lustre module installed."""
    bin_dir = node.tmp / "bin"
    for name, text in (("apt-get", FAKE_APT_GET), ("curl", FAKE_CURL), ("gpg", FAKE_GPG)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    os_release = node.tmp / "os-release"
    os_release.write_text('NAME="Ubuntu"\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n')
    node.env.update(
        {
            "APT_GET_BIN": str(bin_dir / "apt-get"),
            "CURL_BIN": str(bin_dir / "curl"),
            "GPG_BIN": str(bin_dir / "gpg"),
            "MOUNT_LUSTRE_BIN": str(node.tmp / "sbin" / "mount.lustre"),
            "KERNEL_RELEASE": KERNEL,
            "OS_RELEASE": str(os_release),
            "FSX_APT_KEYRING": str(node.tmp / "keyrings" / "fsx-ubuntu-public-key.gpg"),
            "FSX_APT_LIST": str(node.tmp / "sources.list.d" / "fsxlustreclientrepo.list"),
            "FSX_MOUNT_RETRY_DELAY": "0",
        }
    )
    (node.tmp / "sbin").mkdir()
    mount_point = node.tmp / "fsx"
    script = shlex.quote(str(NODE_DIR / "mount-lustre.sh"))
    node.units.oneshot(
        "lustre-mount.service",
        f'set -a; . "$NODE_ENV_FILE"; set +a; FSX_MOUNT_POINT={shlex.quote(str(mount_point))} exec bash {script}',
    )


def golden(node: Node) -> None:
    versions = Path(node.env["IMAGE_VERSIONS_FILE"])
    versions.parent.mkdir(parents=True)
    versions.write_text('{"LustreClientVersion": "2.15.6"}\n')


def lustre_output(node: Node) -> str:
    return (node.units.state / "lustre-mount.service" / "output").read_text()


# ---------------------------------------------------------------------------------------------
# boto3
# ---------------------------------------------------------------------------------------------


def test_a_python_without_boto3_fails_the_units_step_in_one_line_naming_the_fix(node: Node) -> None:
    # /usr/bin/python3 of an image without boto3: the real interpreter, with boto3 shadowed by a package that
    # cannot be imported.
    shadow = node.tmp / "no-boto3" / "boto3"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'boto3'\", name='boto3')\n")
    python = node.tmp / "bin" / "python3-without-boto3"
    python.write_text(
        f"#!/bin/sh\nPYTHONPATH={shlex.quote(str(shadow.parent))}${{PYTHONPATH:+:$PYTHONPATH}} "
        f'exec {shlex.quote(sys.executable)} "$@"\n'
    )
    python.chmod(0o755)
    node.env["PYTHON_BIN"] = str(python)
    result = node.run()

    assert result.steps("FAILED") == ["units"]
    (line,) = [line for line in result.log.splitlines() if "cannot import boto3" in line]
    assert line.endswith(
        f"bootstrap: {python} cannot import boto3 (ModuleNotFoundError: No module named 'boto3'): the termination hook "
        "and the health metrics need it; fix: launch the golden AMI (its node-runtime component installs "
        f"python3-boto3) or an image whose {python} has boto3 (apt-get install python3-boto3)"
    )
    assert "systemctl enable --now lifecycle-watcher.service" not in result.calls  # it would fail only at scale-in
    # lifecycle.py needs boto3 too: ABANDON cannot be sent, the hook's DefaultResult (ABANDON) applies at its timeout.
    assert result.returncode == 2
    assert node.aws.calls == []


# ---------------------------------------------------------------------------------------------
# The Lustre client
# ---------------------------------------------------------------------------------------------


def test_on_the_dlami_the_client_is_installed_from_awss_repository_then_mounted(node: Node) -> None:
    on_the_dlami_without_a_lustre_client(node)
    result = node.run()

    assert result.returncode == 0, result.log
    assert node.aws.calls == [lifecycle_call(node, "CONTINUE")]
    apt = [call for call in result.calls if call.startswith("apt-get")]
    keyring, sources = node.env["FSX_APT_KEYRING"], node.env["FSX_APT_LIST"]
    assert apt == [
        f"apt-get -o DPkg::Lock::Timeout=30 -o Dir::Etc::sourcelist={sources} -o Dir::Etc::sourceparts=- "
        "-o APT::Get::List-Cleanup=0 update",
        f"apt-get -o DPkg::Lock::Timeout=30 install -y --no-install-recommends {PACKAGE}",
    ]
    assert Path(sources).read_text() == (
        f"deb [signed-by={keyring}] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu noble main\n"
    )
    assert f"mount -t lustre -o relatime,flock {DEVICE} {node.tmp / 'fsx'}" in result.calls
    assert "bootstrap: WARNING" not in result.log
    assert f"installed {PACKAGE}" in lustre_output(node)


def test_on_the_dlami_a_client_that_cannot_be_installed_leaves_the_node_in_service_without_fsx(node: Node) -> None:
    on_the_dlami_without_a_lustre_client(node)
    node.env["FAKE_APT_FAIL"] = "1"  # e.g. no module for this kernel, or no route to the repository
    result = node.run()

    assert result.returncode == 0, result.log
    assert node.aws.calls == [lifecycle_call(node, "CONTINUE")]  # not ABANDON: the same image would come back
    assert "lustre" in result.steps("ok")
    (warning,) = [line for line in result.log.splitlines() if "bootstrap: WARNING" in line]
    assert warning.endswith(
        "bootstrap: WARNING: no Lustre client on this image (not the golden AMI: no "
        f"{node.env['IMAGE_VERSIONS_FILE']}) and none could be installed: the node goes in service WITHOUT /fsx (no "
        "shared data, no checkpoints there; jobs that need it fail); fix: launch the golden AMI, which carries the client"
    )
    assert "systemctl show --property=ExecMainStatus lustre-mount.service" in result.calls
    assert not any(call.startswith("mount -t lustre") for call in result.calls)
    assert not (node.tmp / "fsx").exists()  # no empty /fsx on the root disk for a job to write into
    assert f"apt-get install {PACKAGE} failed: E: Unable to locate package {PACKAGE}" in lustre_output(node)
    assert "systemctl enable --now spot-watcher.service" in result.calls  # the steps after it ran


def test_on_the_golden_ami_a_missing_client_fails_the_launch_and_nothing_is_installed(node: Node) -> None:
    on_the_dlami_without_a_lustre_client(node)
    golden(node)
    result = node.run()

    assert_abandoned(node, result, "lustre")
    assert "bootstrap: WARNING" not in result.log
    assert not any(call.startswith(("apt-get", "curl")) for call in result.calls)
    assert "but this is the golden AMI" in lustre_output(node)


def test_a_lustre_mount_that_fails_otherwise_still_fails_the_launch_on_the_dlami(node: Node) -> None:
    on_the_dlami_without_a_lustre_client(node)
    (node.tmp / "sbin" / "mount.lustre").write_text("#!/bin/sh\n")  # the client is there ...
    (node.tmp / "sbin" / "mount.lustre").chmod(0o755)
    node.env.update({"FAKE_MOUNT_FAIL": "1", "FSX_MOUNT_RETRIES": "2"})  # ... but the file system does not answer
    result = node.run()

    assert_abandoned(node, result, "lustre")
    assert "bootstrap: WARNING" not in result.log
    assert not any(call.startswith("apt-get") for call in result.calls)
