"""A real Slurm on one machine for the tests: munge, MariaDB, slurmdbd, slurmctld and two slurmd nodes (a, b).

Debian 12's packages (Slurm 22.05; PCS runs 24.11 or newer), installed by ``make setup-slurm``. Everything
lives under one temporary folder (on /dev/shm where it exists: MariaDB's first start syncs much less there):
its own configs, state, logs and sockets, ports picked free on 127.0.0.1; nothing under /etc. The two nodes
are two slurmd of the same host (``slurmd -N a``, ``-N b``, each with its own Port=, spool and pid file).
Accounting goes through slurmdbd to MariaDB: cluster ``gpu-test``, one account per team (``vision``, ``nlp``),
the user ``root`` in both (the tests run as root), fair share (priority/multifactor) and the QoS ``urgent``.
Every daemon is a child of tests/flows/slurm/keeper.py, which stops them all, and what they started, when the test
process closes its pipe or dies.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.flows.slurm import config

PROGRAMS = ("munged", "mungekey", "mariadbd", "mariadb-install-db", "slurmdbd", "slurmctld", "slurmd", "sacctmgr")
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"
NODES = ("a", "b")
KEEPER = Path(__file__).with_name("keeper.py")


class Unavailable(Exception):
    """What is missing for a real Slurm here (one line)."""


def missing_programs() -> list[str]:
    return [name for name in PROGRAMS if shutil.which(name, path=SBIN) is None]


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def wait_for(what: str, ready, timeout_s: float = 20.0, log: Path | None = None) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() >= deadline:
            tail = "" if log is None or not log.exists() else " | ".join(log.read_text().splitlines()[-3:])
            raise Unavailable(f"{what} not ready within {timeout_s:g} s{': ' + tail if tail else ''}")
        time.sleep(0.05)


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class SlurmCluster:
    root: Path
    ports: dict[str, int]
    keeper: subprocess.Popen[str] | None = None
    pids: dict[str, int] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """What Slurm's commands and the node scripts need: this cluster's slurm.conf, Slurm on PATH."""
        return {"PATH": SBIN, "HOME": str(self.root), "LANG": "C.UTF-8", "SLURM_CONF": str(self.conf)}

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    # -- the daemons, through the keeper --

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        assert self.keeper is not None and self.keeper.stdin is not None and self.keeper.stdout is not None
        request = {"argv": argv, "env": env or self.env, "log": str(self.path("log", f"{name}.out"))}
        self.keeper.stdin.write(json.dumps(request) + "\n")
        self.keeper.stdin.flush()
        answer = self.keeper.stdout.readline().strip()
        if not answer.isdigit():
            raise Unavailable(f"{name} did not start: {answer or 'the keeper ended'}")
        self.pids[name] = int(answer)

    def stop(self) -> None:
        """Every daemon, job and process they left (the keeper stops them), then the folder."""
        if self.keeper is None:
            return
        if self.keeper.stdin is not None:
            self.keeper.stdin.close()
        try:
            self.keeper.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.keeper.kill()
            self.keeper.wait(timeout=10)
        self.keeper = None
        shutil.rmtree(self.root, ignore_errors=True)

    # -- commands against the cluster --

    def run(self, *argv: str, check: bool = True, timeout: float = 30, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            list(argv), env={**self.env, **(env or {})}, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip() or done.stdout}")
        return done.stdout

    def sbatch(self, *args: str, env: dict[str, str] | None = None) -> str:
        return self.run("sbatch", "--parsable", *args, env=env).strip().split(";")[0]

    def job_field(self, job: str, name: str) -> str:
        line = self.run("scontrol", "--oneliner", "show", "job", job)
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        return fields.get(name, "")

    def wait_job(self, job: str, states: set[str], timeout_s: float = 60.0) -> str:
        """Wait until scontrol shows the job in one of ``states``; its state."""
        deadline = time.monotonic() + timeout_s
        while (state := self.job_field(job, "JobState")) not in states:
            assert time.monotonic() < deadline, f"job {job} is {state} after {timeout_s:g} s, not {sorted(states)}"
            time.sleep(0.2)
        return state

    def wait_accounted(self, job: str, state: str = "COMPLETED", timeout_s: float = 20.0) -> str:
        """slurmdbd records a job's end a moment after slurmctld: wait until sacct shows it."""
        deadline = time.monotonic() + timeout_s
        while (seen := self.run("sacct", "--noheader", "-X", "-j", job, "--format=State").strip()) != state:
            assert time.monotonic() < deadline, f"sacct shows job {job} as {seen!r} after {timeout_s:g} s"
            time.sleep(0.2)
        return seen

    def node(self, name: str) -> dict[str, str]:
        line = self.run("scontrol", "--oneliner", "show", "node", name)
        return dict(word.split("=", 1) for word in line.split() if "=" in word and "Reason=" not in word) | {
            "Reason": line.split("Reason=", 1)[1].split(" [", 1)[0] if "Reason=" in line else ""
        }

    def resume(self, *nodes: str) -> None:
        for name in nodes:
            if "DRAIN" in self.node(name)["State"]:
                self.run("scontrol", "update", f"NodeName={name}", "State=RESUME")

    def idle(self) -> bool:
        states = self.run("sinfo", "--noheader", "--Node", "--format=%N %T", check=False).split("\n")
        return sorted(line.split()[1] for line in states if line.strip()) == ["idle"] * len(NODES)


def start(base: Path | None = None) -> SlurmCluster:
    """The whole cluster, ready for jobs; Unavailable (one line) when it cannot run here."""
    missing = missing_programs()
    if missing:
        raise Unavailable(f"no {', '.join(missing)} here: `make setup-slurm` installs Debian's packages")
    if base is None:
        base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix="gpu-platform-slurm-", dir=base))
    ports = dict(zip(("mysql", "dbd", "ctld", "rdzv", *NODES), free_ports(4 + len(NODES)), strict=True))
    cluster = SlurmCluster(root, ports)
    keeper = subprocess.Popen(
        [sys.executable, str(KEEPER), str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    cluster.keeper = keeper
    try:
        config.write_all(root, ports, NODES)
        _start_daemons(cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _start_daemons(cluster: SlurmCluster) -> None:
    root, ports = cluster.root, cluster.ports
    run = {"check": True, "capture_output": True, "timeout": 60, "env": cluster.env}
    subprocess.run(["mungekey", "--create", "--keyfile", str(root / "munge" / "key" / "munge.key")], **run)  # type: ignore[call-overload]
    cluster.spawn("munged", config.munged_argv(root))
    subprocess.run(["mariadb-install-db", f"--defaults-file={root / 'etc' / 'my.cnf'}", *config.INSTALL_DB], **run)  # type: ignore[call-overload]
    cluster.spawn("mariadbd", ["mariadbd", f"--defaults-file={root / 'etc' / 'my.cnf'}"])
    wait_for("munged", lambda: (root / "munge" / "munge.socket").exists(), log=root / "log" / "munged.out")
    wait_for("mariadbd", lambda: port_open(ports["mysql"]), log=root / "log" / "mariadbd.err")
    cluster.spawn("slurmdbd", ["slurmdbd", "-D"])
    wait_for("slurmdbd", lambda: port_open(ports["dbd"]), log=root / "log" / "slurmdbd.log")
    cluster.run("sacctmgr", "--immediate", "add", "qos", *config.URGENT_QOS)
    cluster.run("sacctmgr", "--immediate", "load", f"file={root / 'etc' / 'accounts.cfg'}")
    cluster.spawn("slurmctld", ["slurmctld", "-D", "-i"])
    for name in NODES:
        cluster.spawn(f"slurmd-{name}", ["slurmd", "-D", "-N", name])
    wait_for("the two slurmd nodes", cluster.idle, log=root / "log" / "slurmctld.log")
