"""mount-lustre.sh and lustre-mount.service, with a fake `mount` and a mount table in a temporary file."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.scripts.node.helpers import NODE_DIR

# isort: split
# Importable once tests.scripts.node.helpers has put scripts/node on sys.path.
import layout

SCRIPT = NODE_DIR / "mount-lustre.sh"
UNIT = NODE_DIR / "systemd" / "lustre-mount.service"
BASH = shutil.which("bash") or "/bin/bash"
DNS = "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com"
MOUNT_NAME = "abcdefgh"
DEVICE = f"{DNS}@tcp:/{MOUNT_NAME}"
# The script's defaults, as its start-up line states them (checked below): the unit's
# TimeoutStartSec must outlast every attempt and every delay.
DEFAULT_ATTEMPTS, DEFAULT_DELAY, DEFAULT_DELAY_MAX, DEFAULT_ATTEMPT_TIMEOUT, KILL_AFTER = 10, 15, 60, 60, 5

# Stands in for mount(8): records each call's arguments, fails while FAKE_MOUNT_FAILURES calls
# have not yet failed ("always": every call), then adds a Lustre line, as the kernel shows it
# (the server's NID, not the DNS name), to PROC_MOUNTS. FAKE_MOUNT_MODE=lie exits 0 without
# mounting; FAKE_MOUNT_MODE=hang never returns.
FAKE_MOUNT = """#!/usr/bin/env bash
set -euo pipefail
printf '%s\\n' "$*" >>"$FAKE_MOUNT_CALLS"
case "${FAKE_MOUNT_MODE:-}" in
  lie) exit 0 ;;
  hang) exec sleep 30 ;;
esac
calls="$(wc -l <"$FAKE_MOUNT_CALLS")"
if [[ "$FAKE_MOUNT_FAILURES" == always ]] || ((calls <= FAKE_MOUNT_FAILURES)); then
  echo "mount.lustre: mount $5 at $6 failed: Input/output error" >&2
  echo "Is the MGS running?" >&2
  exit 32
fi
printf '10.0.1.23@tcp:/%s %s lustre rw,relatime,flock,lazystatfs 0 0\\n' "${5##*/}" "$6" >>"$PROC_MOUNTS"
"""

# Records what the script asked to sleep, without sleeping.
FAKE_SLEEP = """#!/usr/bin/env bash
printf '%s\\n' "$1" >>"$FAKE_SLEEP_CALLS"
"""

MOUNT_TABLE = """\
/dev/nvme0n1p1 / ext4 rw,relatime,discard 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
/dev/nvme1n1 /scratch xfs rw,noatime 0 0
"""


class Node:
    """A temporary node: fake mount (and sleep), mount table and mount point under tmp_path."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        self.mount_bin = bin_dir / "fake-mount"
        self.mount_bin.write_text(FAKE_MOUNT)
        (bin_dir / "sleep").write_text(FAKE_SLEEP)
        for tool in bin_dir.iterdir():
            tool.chmod(0o755)
        self.bin_dir = bin_dir
        self.calls_file = tmp_path / "mount-calls"
        self.sleeps_file = tmp_path / "sleep-calls"
        self.proc_mounts = tmp_path / "mounts"
        self.proc_mounts.write_text(MOUNT_TABLE)
        self.mount_point = tmp_path / "fsx"

    def env(self, **overrides: str) -> dict[str, str]:
        base = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("FSX_", "FAKE_"))
            and key not in ("MOUNT_BIN", "PROC_MOUNTS", "MOUNT_LUSTRE_BIN", "IMAGE_VERSIONS_FILE", "KERNEL_RELEASE")
        }
        base.update(
            {
                "FSX_DNS_NAME": DNS,
                "FSX_MOUNT_NAME": MOUNT_NAME,
                "FSX_MOUNT_POINT": str(self.mount_point),
                "FSX_MOUNT_RETRY_DELAY": "0",
                "MOUNT_BIN": str(self.mount_bin),
                "PROC_MOUNTS": str(self.proc_mounts),
                "FAKE_MOUNT_CALLS": str(self.calls_file),
                "FAKE_SLEEP_CALLS": str(self.sleeps_file),
                "FAKE_MOUNT_FAILURES": "0",
                # Never the real apt-get here: the tests that install give fakes and turn it back to auto.
                "FSX_CLIENT_INSTALL": "off",
                "IMAGE_VERSIONS_FILE": str(self.tmp_path / "no-image-versions.json"),
            }
        )
        base.update(overrides)
        return {key: value for key, value in base.items() if value != "<unset>"}

    def run(self, *args: str, fake_sleep: bool = False, **env: str) -> subprocess.CompletedProcess[str]:
        environment = self.env(**env)
        if fake_sleep:
            environment["PATH"] = f"{self.bin_dir}{os.pathsep}{environment['PATH']}"
        return subprocess.run(
            [BASH, str(SCRIPT), *args], env=environment, capture_output=True, text=True, timeout=30, check=False
        )

    @property
    def calls(self) -> list[str]:
        return self.calls_file.read_text().splitlines() if self.calls_file.exists() else []

    @property
    def sleeps(self) -> list[str]:
        return self.sleeps_file.read_text().splitlines() if self.sleeps_file.exists() else []

    def expected_call(self) -> str:
        return f"-t lustre -o relatime,flock {DEVICE} {self.mount_point}"


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def err(line: str) -> str:
    return f"mount-lustre: {line}\n"


def last_line(text: str) -> str:
    return text.splitlines()[-1]


# ---------------------------------------------------------------------------------------------
# Rendering (--print-only needs no root and touches nothing)
# ---------------------------------------------------------------------------------------------


def test_print_only_renders_the_documented_mount_command(node: Node) -> None:
    result = node.run("--print-only", FSX_MOUNT_POINT="<unset>", MOUNT_BIN="<unset>")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"mount -t lustre -o relatime,flock {DEVICE} /fsx\n"
    assert result.stderr == ""
    assert node.calls == []
    assert not node.mount_point.exists()


def test_flags_override_the_environment(node: Node) -> None:
    china = "fs-0fedcba9876543210.fsx.cn-north-1.amazonaws.com.cn"
    result = node.run(
        "--dns-name",
        china,
        "--mount-name",
        "fsx",
        "--mount-point",
        "/mnt/lustre/",
        "--retries",
        "3",
        "--retry-delay",
        "5",
        "--print-only",
        FSX_DNS_NAME="not-a-dns-name",
        MOUNT_BIN="<unset>",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"mount -t lustre -o relatime,flock {china}@tcp:/fsx /mnt/lustre\n"


def test_help_exits_0(node: Node) -> None:
    result = node.run("--help")
    assert result.returncode == 0
    assert result.stdout.startswith("usage: mount-lustre.sh ")
    assert node.calls == []


# ---------------------------------------------------------------------------------------------
# Bad input: one line each, exit 64, mount never called
# ---------------------------------------------------------------------------------------------

BAD_INPUT = [
    pytest.param(
        {"FSX_DNS_NAME": "<unset>"},
        (),
        "FSX_DNS_NAME is not set: give the file system's DNSName, e.g. fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
        id="dns-missing",
    ),
    pytest.param(
        {"FSX_DNS_NAME": "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com"},
        (),
        "FSX_DNS_NAME 'fs-0123456789abcdef0.efs.us-east-1.amazonaws.com' is not an FSx for Lustre DNS name"
        " (fs-<id>.fsx.<region>.amazonaws.com)",
        id="dns-efs",
    ),
    pytest.param(
        {},
        ("--dns-name", "FS-0123456789ABCDEF0.fsx.us-east-1.amazonaws.com"),
        "--dns-name 'FS-0123456789ABCDEF0.fsx.us-east-1.amazonaws.com' is not an FSx for Lustre DNS name"
        " (fs-<id>.fsx.<region>.amazonaws.com)",
        id="dns-uppercase-flag",
    ),
    pytest.param(
        {"FSX_MOUNT_NAME": ""},
        (),
        "FSX_MOUNT_NAME is not set: give the file system's LustreConfiguration.MountName",
        id="mount-name-empty",
    ),
    pytest.param(
        {"FSX_MOUNT_NAME": "ABCDEFGH"},
        (),
        "FSX_MOUNT_NAME 'ABCDEFGH' is not an FSx mount name (8 lowercase letters or digits, or fsx for SCRATCH_1)",
        id="mount-name-uppercase",
    ),
    pytest.param(
        {"FSX_MOUNT_NAME": "abcdefgh9"},
        (),
        "FSX_MOUNT_NAME 'abcdefgh9' is not an FSx mount name (8 lowercase letters or digits, or fsx for SCRATCH_1)",
        id="mount-name-9-chars",
    ),
    pytest.param(
        {"FSX_MOUNT_POINT": "fsx"},
        (),
        "FSX_MOUNT_POINT 'fsx' must be an absolute path of letters, digits, '.', '_' and '-', e.g. /fsx",
        id="mount-point-relative",
    ),
    pytest.param(
        {},
        ("--mount-point", "/mnt/../etc"),
        "--mount-point '/mnt/../etc' must be an absolute path of letters, digits, '.', '_' and '-', e.g. /fsx",
        id="mount-point-dotdot",
    ),
    pytest.param(
        {"FSX_MOUNT_POINT": "/"},
        (),
        "FSX_MOUNT_POINT '/' must be an absolute path of letters, digits, '.', '_' and '-', e.g. /fsx",
        id="mount-point-root",
    ),
    pytest.param(
        {"FSX_MOUNT_RETRIES": "0"},
        (),
        "FSX_MOUNT_RETRIES '0' must be a whole number of attempts, 1 or more",
        id="retries-zero",
    ),
    pytest.param(
        {},
        ("--retries", "ten"),
        "--retries 'ten' must be a whole number of attempts, 1 or more",
        id="retries-word-flag",
    ),
    pytest.param(
        {"FSX_MOUNT_RETRY_DELAY": "1.5"},
        (),
        "FSX_MOUNT_RETRY_DELAY '1.5' must be whole seconds, 0 or more",
        id="delay-fraction",
    ),
    pytest.param(
        {"FSX_MOUNT_RETRY_DELAY_MAX": "-1"},
        (),
        "FSX_MOUNT_RETRY_DELAY_MAX '-1' must be whole seconds, 0 or more",
        id="delay-max-negative",
    ),
    pytest.param(
        {"FSX_MOUNT_ATTEMPT_TIMEOUT": "1m"},
        (),
        "FSX_MOUNT_ATTEMPT_TIMEOUT '1m' must be whole seconds, 0 or more",
        id="attempt-timeout-unit",
    ),
    pytest.param({}, ("--mount-name",), "--mount-name needs a value", id="flag-without-value"),
    pytest.param({}, ("--force",), "unknown argument '--force' (see --help)", id="unknown-flag"),
]


@pytest.mark.parametrize(("env", "args", "line"), BAD_INPUT)
def test_bad_input_is_one_line_and_exit_64(node: Node, env: dict[str, str], args: tuple[str, ...], line: str) -> None:
    for print_only in ((), ("--print-only",)):
        result = node.run(*print_only, *args, **env)
        assert result.returncode == 64
        assert result.stderr == err(line)
        assert result.stdout == ""
    assert node.calls == []
    assert not node.mount_point.exists()


def test_every_bad_input_is_reported_at_once(node: Node) -> None:
    result = node.run(FSX_DNS_NAME="<unset>", FSX_MOUNT_NAME="<unset>", FSX_MOUNT_RETRIES="0")
    assert result.returncode == 64
    assert [line.split(" ", 2)[1] for line in result.stderr.splitlines()] == [
        "FSX_DNS_NAME",
        "FSX_MOUNT_NAME",
        "FSX_MOUNT_RETRIES",
    ]


# ---------------------------------------------------------------------------------------------
# Mounting
# ---------------------------------------------------------------------------------------------


def test_mounts_on_the_first_attempt_and_creates_the_mount_point(node: Node) -> None:
    result = node.run()
    assert result.returncode == 0, result.stderr
    assert node.calls == [node.expected_call()]
    assert node.mount_point.is_dir()
    assert last_line(result.stderr) == f"mount-lustre: mounted {DEVICE} on {node.mount_point} (attempt 1/10)"


def test_already_mounted_exits_0_without_calling_mount(node: Node) -> None:
    with node.proc_mounts.open("a") as table:
        table.write(f"10.0.1.23@tcp:/{MOUNT_NAME} {node.mount_point} lustre rw,relatime,flock,lazystatfs 0 0\n")
    result = node.run(FSX_MOUNT_POINT=f"{node.mount_point}/")  # a trailing slash still matches
    assert result.returncode == 0, result.stderr
    assert result.stderr == err(f"{node.mount_point} is already mounted (10.0.1.23@tcp:/{MOUNT_NAME}); nothing to do")
    assert node.calls == []


def test_running_twice_mounts_once(node: Node) -> None:
    assert node.run().returncode == 0
    second = node.run()
    assert second.returncode == 0, second.stderr
    assert "already mounted" in second.stderr
    assert node.calls == [node.expected_call()]


def test_another_file_system_at_the_mount_point_exits_78(node: Node) -> None:
    with node.proc_mounts.open("a") as table:
        table.write(f"/dev/nvme2n1 {node.mount_point} xfs rw,noatime 0 0\n")
    result = node.run()
    assert result.returncode == 78
    assert result.stderr == err(f"{node.mount_point} already has a xfs mount of /dev/nvme2n1; expected lustre {DEVICE}")
    assert node.calls == []


def test_a_different_lustre_file_system_at_the_mount_point_exits_78(node: Node) -> None:
    with node.proc_mounts.open("a") as table:
        table.write(f"10.0.9.9@tcp:/zyxwvuts {node.mount_point} lustre rw,flock 0 0\n")
    result = node.run()
    assert result.returncode == 78
    assert "already has a lustre mount of 10.0.9.9@tcp:/zyxwvuts" in result.stderr


def test_mount_point_that_cannot_be_created_exits_73(node: Node) -> None:
    blocker = node.tmp_path / "a-file"
    blocker.write_text("")
    result = node.run(FSX_MOUNT_POINT=str(blocker / "fsx"))
    assert result.returncode == 73
    assert result.stderr == err(f"cannot create the mount point {blocker / 'fsx'}")
    assert node.calls == []


def test_without_a_lustre_client_on_the_golden_ami_exits_69_before_mounting_and_installs_nothing(node: Node) -> None:
    search_path = os.pathsep.join([os.environ.get("PATH", ""), "/sbin", "/usr/sbin"])
    if shutil.which("mount.lustre", path=search_path):
        pytest.skip("this machine has a Lustre client")
    versions = node.tmp_path / "image-versions.json"
    versions.write_text("{}")
    result = node.run(MOUNT_BIN="<unset>", FSX_MOUNT_RETRIES="1", IMAGE_VERSIONS_FILE=str(versions),
                      FSX_CLIENT_INSTALL="auto", APT_GET_BIN="/nonexistent/apt-get")  # fmt: skip
    assert result.returncode == 69
    assert result.stderr == err(
        f"no Lustre client: mount.lustre is not installed, but this is the golden AMI ({versions}), which must carry"
        " it; fix: rebuild the image (its lustre-client component)"
    )
    assert not node.mount_point.exists()


def test_without_a_lustre_client_and_install_off_exits_69(node: Node) -> None:
    result = node.run(MOUNT_LUSTRE_BIN=str(node.tmp_path / "sbin" / "mount.lustre"))
    assert result.returncode == 69
    assert result.stderr == err(
        "no Lustre client: mount.lustre is not installed (FSX_CLIENT_INSTALL=off); fix: launch the golden AMI,"
        " which carries it"
    ).replace("mount.lustre", str(node.tmp_path / "sbin" / "mount.lustre"), 1)
    assert node.calls == []


# apt-get that records its calls; the install puts the mount helper in place unless FAKE_APT_FAIL.
FAKE_APT = """#!/usr/bin/env bash
printf '%s\\n' "$*" >>"$FAKE_APT_CALLS"
[[ "$*" == *" install "* ]] || exit "${FAKE_APT_UPDATE_RC:-0}"
if [[ -n "${FAKE_APT_FAIL:-}" ]]; then
  echo "Reading package lists..."
  echo "E: Unable to locate package ${*: -1}" >&2
  exit 100
fi
printf '#!/bin/sh\\nexit 0\\n' >"$MOUNT_LUSTRE_BIN"
chmod 0755 "$MOUNT_LUSTRE_BIN"
"""
FAKE_FETCH = """#!/usr/bin/env bash
while (($#)); do
  [[ "$1" != -o ]] || out="$2"
  shift
done
echo key >"$out"
"""


def installing(node: Node, **extra: str) -> dict[str, str]:
    """The environment of an image that is not the golden AMI, no client, and fakes for the install."""
    for name, text in (("apt-get", FAKE_APT), ("fetch", FAKE_FETCH)):
        (node.bin_dir / name).write_text(text)
        (node.bin_dir / name).chmod(0o755)
    (node.tmp_path / "sbin").mkdir(exist_ok=True)
    os_release = node.tmp_path / "os-release"
    os_release.write_text('PRETTY_NAME="Ubuntu 24.04.3 LTS"\nVERSION_CODENAME=noble\n')
    return {
        "FSX_CLIENT_INSTALL": "auto",
        "MOUNT_LUSTRE_BIN": str(node.tmp_path / "sbin" / "mount.lustre"),
        "APT_GET_BIN": str(node.bin_dir / "apt-get"),
        "CURL_BIN": str(node.bin_dir / "fetch"),
        "GPG_BIN": str(node.bin_dir / "fetch"),
        "KERNEL_RELEASE": "6.8.0-1024-aws",
        "OS_RELEASE": str(os_release),
        "FSX_APT_KEYRING": str(node.tmp_path / "keyrings" / "fsx.gpg"),
        "FSX_APT_LIST": str(node.tmp_path / "sources" / "fsx.list"),
        "FAKE_APT_CALLS": str(node.tmp_path / "apt-calls"),
        **extra,
    }


def test_without_a_client_elsewhere_the_running_kernels_module_is_installed_then_mounted(node: Node) -> None:
    env = installing(node)
    result = node.run(**env)
    assert result.returncode == 0, result.stderr
    apt_calls = Path(env["FAKE_APT_CALLS"]).read_text().splitlines()
    assert apt_calls == [
        f"-o DPkg::Lock::Timeout=30 -o Dir::Etc::sourcelist={env['FSX_APT_LIST']} -o Dir::Etc::sourceparts=-"
        " -o APT::Get::List-Cleanup=0 update",  # only AWS's repository: another one out of reach must not stop it
        "-o DPkg::Lock::Timeout=30 install -y --no-install-recommends lustre-client-modules-6.8.0-1024-aws",
    ]
    assert Path(env["FSX_APT_LIST"]).read_text() == (
        f"deb [signed-by={env['FSX_APT_KEYRING']}] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu noble main\n"
    )
    assert Path(env["FSX_APT_KEYRING"]).exists() and not Path(env["FSX_APT_KEYRING"] + ".asc").exists()
    assert node.calls == [node.expected_call()]
    assert result.stderr.splitlines()[:2] == [
        "mount-lustre: no Lustre client on this image (not the golden AMI): installing"
        " lustre-client-modules-6.8.0-1024-aws from https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu noble",
        "mount-lustre: installed lustre-client-modules-6.8.0-1024-aws",
    ]


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"FAKE_APT_FAIL": "1"}, "apt-get install lustre-client-modules-6.8.0-1024-aws failed: Reading package lists...;"
         " E: Unable to locate package lustre-client-modules-6.8.0-1024-aws"),
        ({"FAKE_APT_UPDATE_RC": "100"}, "apt-get update of https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu failed"),
        ({"CURL_BIN": "/bin/false"}, "cannot fetch the repository's key"
         " https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc"),
    ],
    ids=["no-module-for-the-kernel", "repository-out-of-reach", "key-out-of-reach"],
)  # fmt: skip
def test_a_client_that_cannot_be_installed_exits_69_naming_why_and_the_fix(
    node: Node, extra: dict[str, str], why: str
) -> None:
    result = node.run(**installing(node, **extra))
    assert result.returncode == 69
    assert last_line(result.stderr) == (
        f"mount-lustre: no Lustre client: {node.tmp_path / 'sbin' / 'mount.lustre'} is not installed and installing"
        f" it failed: {why}; fix: launch the golden AMI (it carries the client), or let the nodes reach"
        " https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu"
    )
    assert node.calls == []
    assert not node.mount_point.exists()


# ---------------------------------------------------------------------------------------------
# Retries
# ---------------------------------------------------------------------------------------------


def test_two_failures_then_success_exits_0_after_3_calls(node: Node) -> None:
    result = node.run(FAKE_MOUNT_FAILURES="2")
    assert result.returncode == 0, result.stderr
    assert node.calls == [node.expected_call()] * 3
    lines = result.stderr.splitlines()
    failure = f"mount exited 32: mount.lustre: mount {DEVICE} at {node.mount_point} failed: Input/output error; Is the MGS running?"
    assert lines[1:] == [
        f"mount-lustre: attempt 1/10 failed ({failure}); next in 0 s",
        f"mount-lustre: attempt 2/10 failed ({failure}); next in 0 s",
        f"mount-lustre: mounted {DEVICE} on {node.mount_point} (attempt 3/10)",
    ]


def test_every_attempt_failing_exits_75_with_one_line_after_n_calls(node: Node) -> None:
    result = node.run(FAKE_MOUNT_FAILURES="always", FSX_MOUNT_RETRIES="4")
    assert result.returncode == 75
    assert len(node.calls) == 4
    assert last_line(result.stderr) == (
        f"mount-lustre: giving up: could not mount {DEVICE} on {node.mount_point} in 4 attempts;"
        f" last: mount exited 32: mount.lustre: mount {DEVICE} at {node.mount_point} failed: Input/output error;"
        " Is the MGS running?"
    )
    assert result.stderr.count("giving up") == 1


def test_default_delays_double_up_to_the_cap(node: Node) -> None:
    result = node.run(FAKE_MOUNT_FAILURES="always", FSX_MOUNT_RETRY_DELAY="<unset>", fake_sleep=True)
    assert result.returncode == 75
    assert len(node.calls) == DEFAULT_ATTEMPTS
    assert node.sleeps == ["15", "30", "60", "60", "60", "60", "60", "60", "60"]
    assert result.stderr.splitlines()[0] == (
        f"mount-lustre: mounting {DEVICE} on {node.mount_point}: up to {DEFAULT_ATTEMPTS} attempts of"
        f" {DEFAULT_ATTEMPT_TIMEOUT} s at most, {DEFAULT_DELAY} s apart doubling to {DEFAULT_DELAY_MAX} s"
    )


def test_retry_delay_flag_and_cap(node: Node) -> None:
    result = node.run(
        "--retry-delay", "7", "--retries", "4", FAKE_MOUNT_FAILURES="always", FSX_MOUNT_RETRY_DELAY_MAX="20",
        fake_sleep=True,
    )  # fmt: skip
    assert result.returncode == 75
    assert node.sleeps == ["7", "14", "20"]


def test_mount_that_reports_success_without_mounting_is_a_failed_attempt(node: Node) -> None:
    result = node.run(FAKE_MOUNT_MODE="lie", FSX_MOUNT_RETRIES="2")
    assert result.returncode == 75
    assert len(node.calls) == 2
    assert last_line(result.stderr).endswith(
        f"last: mount exited 0 but {node.mount_point} is not a lustre mount of {MOUNT_NAME} in {node.proc_mounts}"
    )


def test_a_hung_mount_is_killed_after_the_attempt_timeout(node: Node) -> None:
    result = node.run(FAKE_MOUNT_MODE="hang", FSX_MOUNT_RETRIES="1", FSX_MOUNT_ATTEMPT_TIMEOUT="1")
    assert result.returncode == 75
    assert last_line(result.stderr).endswith("in 1 attempts; last: mount timed out after 1 s")


# ---------------------------------------------------------------------------------------------
# The systemd unit
# ---------------------------------------------------------------------------------------------


def unit_settings() -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] = {}
    for raw in UNIT.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


def seconds(value: str) -> int:
    number, unit = (value[:-3], 60) if value.endswith("min") else (value.rstrip("s"), 1)
    return int(number) * unit


def test_unit_is_a_oneshot_that_stays_active_and_does_not_restart() -> None:
    unit = unit_settings()
    service = unit["Service"]
    assert service["Type"] == ["oneshot"]
    assert service["RemainAfterExit"] == ["yes"]
    assert "Restart" not in service  # the script retries; the bootstrap reads the failure
    assert service["EnvironmentFile"] == [layout.ENV_FILE]  # no "-": no env file, no mount
    assert service["ExecStart"] == [f"{layout.INSTALL_PREFIX}/{SCRIPT.name}"]
    assert os.access(SCRIPT, os.X_OK)
    assert "network-online.target" in unit["Unit"]["After"][0].split()
    assert "network-online.target" in unit["Unit"]["Wants"][0].split()


def test_the_golden_ami_is_told_by_the_file_its_build_records() -> None:
    assert f'image_versions="${{IMAGE_VERSIONS_FILE:-{layout.IMAGE_VERSIONS_FILE}}}"' in SCRIPT.read_text()


def install_budget_s() -> int:
    """The client install's bounds (key, index, package), read from the script."""
    match = re.search(r"^readonly KEY_TIMEOUT_S=(\d+) UPDATE_TIMEOUT_S=(\d+) INSTALL_TIMEOUT_S=(\d+)$",
                      SCRIPT.read_text(), flags=re.M)  # fmt: skip
    assert match, "mount-lustre.sh bounds its install"
    return sum(int(group) for group in match.groups())


def test_unit_timeout_outlasts_every_attempt_and_delay() -> None:
    delays, delay = [], DEFAULT_DELAY
    for _ in range(DEFAULT_ATTEMPTS - 1):
        delays.append(min(delay, DEFAULT_DELAY_MAX))
        delay *= 2
    # An image without the client installs it first.
    worst_case = DEFAULT_ATTEMPTS * (DEFAULT_ATTEMPT_TIMEOUT + KILL_AFTER) + sum(delays) + install_budget_s()
    (timeout,) = unit_settings()["Service"]["TimeoutStartSec"]
    assert seconds(timeout) > worst_case


def test_unit_does_not_hide_the_mount_in_a_private_namespace() -> None:
    service = unit_settings()["Service"]
    for key in (
        "ProtectSystem",
        "ProtectHome",
        "PrivateTmp",
        "PrivateDevices",
        "PrivateMounts",
        "ProtectKernelModules",
    ):
        assert key not in service, key
