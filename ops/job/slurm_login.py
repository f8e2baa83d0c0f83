"""The way in to a Slurm environment: its login node, the caller's POSIX user, and a script run there as that user.

The login node is found from the deployed cluster, not from names: the environment's PCS cluster is the one
tagged with its ``Project`` and ``Environment`` (as preflight finds it, ops/preflight/pcs.py); its login node
group is the compute node group that no queue uses (gpu_constructs/scheduler/login_nodes.py); its instances carry
PCS's tag ``aws:pcs:compute-node-group-id``. A script runs there through SSM Run Command (``AWS-RunShellScript``,
as root) and hands each Slurm command to the caller's user with ``runuser -u <user> --``: Slurm sees that user's
uid, so the job is theirs, charged to their team, and ``scancel`` can only cancel what they may cancel.

The user is ``--as-user`` when given, else the name at the end of the caller's ARN (an IAM user's name, or an
assumed role's session name, which IAM Identity Center sets to the person's user name; the part before an ``@``),
and must be one of the config's ``slurm.users``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from config.schema import Environment
from config.slurm import User
from ops.job import remote
from ops.job.context import JobContext, JobError

#: Where AWS's PCS Slurm installer puts Slurm's commands, per Slurm version (AWS PCS User Guide, "Software installers
#: to build custom AMIs"; scripts/image/components/pcs-slurm.yaml installs it): nothing puts them on root's PATH.
PCS_SLURM_BIN = "/opt/aws/pcs/scheduler/slurm-{version}/bin"


def preamble(environment: Environment) -> tuple[str, str]:
    """What a script needs before Slurm's commands: the cluster's Slurm version's commands first on PATH."""
    slurm_bin = PCS_SLURM_BIN.format(version=environment.slurm.slurm_version if environment.slurm else "")
    return ("set -euo pipefail", f"export PATH={slurm_bin}:/usr/local/bin:/usr/bin:/bin")


#: PCS's tag on the instances of a compute node group.
NODE_GROUP_TAG = "aws:pcs:compute-node-group-id"
#: Run Command's limit on StandardOutputContent (GetCommandInvocation keeps the first 24,000 characters).
MAX_OUTPUT = 24_000


def slurm_user(environment: Environment, shown: str, name: str, option: str = "--as-user") -> User:
    """The ``slurm.users`` entry named ``name``; a ``JobError`` naming the listed ones when there is none."""
    users = {u.name: u for u in (environment.slurm.users if environment.slurm else [])}
    if name not in users:
        known = ", ".join(users) or "none yet"
        raise JobError(
            f"{option}: {name!r} is not a user of {shown} (slurm.users: {known}); fix: pass --as-user with one of "
            "them, or ask an administrator to add you to slurm.users"
        )
    return users[name]


def caller_name(arn: str) -> str:
    """``arn:aws:iam::1:user/alice`` and ``arn:aws:sts::1:assumed-role/Role/alice@example.com`` name alice."""
    return arn.rsplit("/", 1)[-1].split("@", 1)[0].lower()


def caller_user(context: JobContext, as_user: str | None) -> User:
    """``--as-user`` (checked before the credentials were read), else the user named by the caller's ARN."""
    if as_user is not None:
        return slurm_user(context.environment, context.config_file, as_user)
    arn = context.aws.client("sts").get_caller_identity()["Arn"]
    return slurm_user(context.environment, context.config_file, caller_name(arn), f"the caller {arn}")


def _cluster_id(context: JobContext) -> str:
    environment = context.environment
    pcs = context.aws.client("pcs")
    for cluster in context.aws.pages("pcs", "list_clusters", "clusters"):
        tags = pcs.list_tags_for_resource(resourceArn=cluster["arn"]).get("tags") or {}
        if tags.get("Project") == environment.tags.get("Project") and tags.get("Environment") == environment.name:
            return str(cluster["id"])
    raise JobError(
        f"no PCS cluster of {environment.name} in {environment.account} {environment.region} (tagged Project="
        f"{environment.tags.get('Project')}, Environment={environment.name}); fix: deploy the environment "
        f"({context.names.stack_name('Fleets')})"
    )


def login_node(context: JobContext) -> str:
    """A running login node's instance id (the first by id, so every command of a caller lands on one node)."""
    cluster = _cluster_id(context)
    pcs = context.aws.client("pcs")
    groups = context.aws.pages("pcs", "list_compute_node_groups", "computeNodeGroups", clusterIdentifier=cluster)
    queued = {
        config["computeNodeGroupId"]
        for queue in context.aws.pages("pcs", "list_queues", "queues", clusterIdentifier=cluster)
        for config in pcs.get_queue(clusterIdentifier=cluster, queueIdentifier=queue["id"])["queue"].get(
            "computeNodeGroupConfigurations", []
        )
    }
    login = [g["id"] for g in groups if g["id"] not in queued]
    reservations = context.aws.pages(
        "ec2",
        "describe_instances",
        "Reservations",
        Filters=[
            {"Name": f"tag:{NODE_GROUP_TAG}", "Values": login or ["none"]},
            {"Name": "instance-state-name", "Values": ["running"]},
        ],
    )
    ids = sorted(i["InstanceId"] for r in reservations for i in r["Instances"])
    if not ids:
        raise JobError(
            f"no running login node in PCS cluster {cluster} (compute node groups in no queue: "
            f"{', '.join(login) or 'none'}); fix: wait until PCS has started it (slurm.login.count), or deploy "
            f"the environment ({context.names.stack_name('Fleets')})"
        )
    return ids[0]


def as_user(user: User, argv: Sequence[str]) -> str:
    """One shell line that runs ``argv`` as ``user`` (``runuser``: root, which Run Command is, needs no password)."""
    return shlex.join(["runuser", "-u", user.name, "--", *argv])


def run_script(context: JobContext, node: str, lines: Sequence[str], what: str, timeout_s: float = 180) -> str:
    """Run ``lines`` on ``node`` (``AWS-RunShellScript``) and return its output; a ``JobError`` (exit 1) with the
    script's last error line when it fails."""
    ssm = context.aws.client("ssm")
    command = ssm.send_command(
        DocumentName="AWS-RunShellScript",
        InstanceIds=[node],
        Parameters={"commands": [*preamble(context.environment), *lines], "executionTimeout": [str(int(timeout_s))]},
        Comment=remote.comment_for(what),
        TimeoutSeconds=remote.DELIVERY_TIMEOUT_S,
    )["Command"]
    invocation = remote.wait(context, {node: command["CommandId"]}, timeout_s=timeout_s + remote.DELIVERY_TIMEOUT_S)
    result = invocation[node]
    if result.status != "Success":
        raise JobError(f"{what} on login node {node}: {result.error}", code=1)
    return result.stdout
