"""The test cluster's files: slurm.conf, slurmdbd.conf, MariaDB's my.cnf, the accounts, and the nodes' prolog.

Settings a PCS cluster needs too (the CDK side sets them through PCS's custom Slurm settings where PCS allows):
accounting through slurmdbd; the priority and accounting policy the PCS cluster carries as custom settings
(config/slurm_settings.py: fair share with QoS weighted above it, so ``--qos urgent`` goes first), with the
multifactor plugin that Slurm 24.11 and newer (PCS) use by default and Debian's 22.05 does not;
``JobRequeue=1``; the platform's health check as ``Prolog=`` on every node of an allocation
(``PrologFlags=Alloc``), whose failure requeues the job without holding it
(``SchedulerParameters=nohold_on_prolog_fail,sched_interval=1``). Test-only: short timeouts (``KillWait``, ``cred_expire``: how
long a requeued job waits), loopback, root as SlurmUser.
"""

from __future__ import annotations

from pathlib import Path

from config.slurm import Slurm
from config.slurm_settings import cluster_settings

ROOT_DIR = Path(__file__).resolve().parents[3]
HEALTH_CHECK = ROOT_DIR / "scripts" / "node" / "slurm-health-check.sh"
CLUSTER = "gpu-test"
TEAMS = {"vision": 60, "nlp": 40}  # account: fair-share shares
URGENT_QOS = ("urgent", "Priority=1000", "Description=urgent work: ahead of fair share")
INSTALL_DB = ("--auth-root-authentication-method=normal", "--skip-test-db")


def munged_argv(root: Path) -> list[str]:
    munge = root / "munge"
    return [
        "munged",
        "--foreground",
        "--force",
        f"--key-file={munge / 'key' / 'munge.key'}",
        f"--socket={munge / 'munge.socket'}",
        f"--pid-file={munge / 'munged.pid'}",
        f"--log-file={root / 'log' / 'munged.log'}",
        f"--seed-file={munge / 'key' / 'munged.seed'}",
    ]


def my_cnf(root: Path, port: int) -> str:
    return f"""[mariadbd]
datadir={root / "db"}
socket={root / "mysql.sock"}
pid-file={root / "mysql.pid"}
log-error={root / "log" / "mariadbd.err"}
bind-address=127.0.0.1
port={port}
user=root
skip-name-resolve
innodb_buffer_pool_size=32M
innodb_log_file_size=8M
innodb_flush_log_at_trx_commit=0
innodb_doublewrite=0
innodb_lock_wait_timeout=900
"""


def slurmdbd_conf(root: Path, ports: dict[str, int]) -> str:
    return f"""AuthType=auth/munge
AuthInfo=socket={root / "munge" / "munge.socket"}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports["dbd"]}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports["mysql"]}
StorageUser=root
StorageLoc=slurm_acct_db
LogFile={root / "log" / "slurmdbd.log"}
PidFile={root / "state" / "slurmdbd.pid"}
"""


def pcs_policy_lines() -> str:
    """The settings the PCS cluster carries as custom settings (config/slurm_settings.py), as slurm.conf lines."""
    return "\n".join(f"{name}={value}" for name, value in cluster_settings(Slurm()).items())


def slurm_conf(root: Path, ports: dict[str, int], nodes: tuple[str, ...]) -> str:
    munge = root / "munge" / "munge.socket"
    node_lines = "\n".join(
        f"NodeName={name} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports[name]} CPUs=2 RealMemory=1000"
        for name in nodes
    )
    pcs_policy = pcs_policy_lines()
    return f"""ClusterName={CLUSTER}
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ports["ctld"]}
CommunicationParameters=NoInAddrAny
AuthType=auth/munge
AuthInfo=socket={munge},cred_expire=5
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root / "state" / "ctld"}
SlurmdSpoolDir={root / "spool" / "%n"}
SlurmctldPidFile={root / "state" / "slurmctld.pid"}
SlurmdPidFile={root / "state" / "slurmd-%n.pid"}
SlurmctldLogFile={root / "log" / "slurmctld.log"}
SlurmdLogFile={root / "log" / "slurmd-%n.log"}
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports["dbd"]}
AccountingStoragePass={munge}
PriorityType=priority/multifactor
{pcs_policy}
PriorityCalcPeriod=1
SchedulerType=sched/backfill
SchedulerParameters=nohold_on_prolog_fail,sched_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
JobRequeue=1
KillWait=10
Prolog={root / "etc" / "prolog.sh"}
PrologFlags=Alloc
{node_lines}
PartitionName=training Nodes={",".join(nodes)} Default=YES MaxTime=INFINITE State=UP
"""


def accounts_cfg() -> str:
    """``sacctmgr load`` file: the cluster, one account per team with its fair-share shares, root in each."""
    lines = [
        f"Cluster - '{CLUSTER}':Fairshare=1:QOS='normal,urgent'",
        "Parent - 'root'",
        "User - 'root':DefaultAccount='vision':AdminLevel='Administrator':Fairshare=1",
    ]
    lines += [
        f"Account - '{team}':Description='{team} team':Organization='ml':Fairshare={shares}"
        for team, shares in TEAMS.items()
    ]
    for team in TEAMS:
        lines += [f"Parent - '{team}'", "User - 'root':DefaultAccount='vision':Fairshare=1"]
    return "\n".join(lines) + "\n"


def prolog_sh(root: Path) -> str:
    """The Prolog slurmd runs (a bare environment): the node's real health check when the test has put recorded
    outputs for this node under health/<node>/ (args: one gpu_health.py flag or value a line), else nothing."""
    return f"""#!/bin/bash
dir="{root}/health/${{SLURMD_NODENAME}}"
[[ -f "$dir/args" ]] || exit 0
export PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF="{root / "etc" / "slurm.conf"}" NODE_ENV_FILE="$dir/node.env"
mapfile -t args <"$dir/args"
exec "{HEALTH_CHECK}" "${{args[@]}}" >>"$dir/prolog.log" 2>&1
"""


def write_all(root: Path, ports: dict[str, int], nodes: tuple[str, ...]) -> None:
    for folder in ("etc", "state/ctld", "log", "db", "munge/key", "health", *(f"spool/{n}" for n in nodes)):
        (root / folder).mkdir(parents=True, exist_ok=True)
    (root / "munge" / "key").chmod(0o700)
    (root / "munge").chmod(0o755)
    etc = root / "etc"
    (etc / "my.cnf").write_text(my_cnf(root, ports["mysql"]))
    (etc / "slurm.conf").write_text(slurm_conf(root, ports, nodes))
    (etc / "slurmdbd.conf").write_text(slurmdbd_conf(root, ports))
    (etc / "slurmdbd.conf").chmod(0o600)
    (etc / "accounts.cfg").write_text(accounts_cfg())
    (etc / "prolog.sh").write_text(prolog_sh(root))
    (etc / "prolog.sh").chmod(0o755)
