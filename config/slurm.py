"""The ``slurm:`` section: the environment's one AWS Parallel Computing Service (PCS) cluster, managed Slurm, for
its ``scheduler: slurm`` training fleets (config/fleets/scheduler.py), its login nodes, and the people who use it.

PCS facts the section checks, and where each comes from:

- ``SLURM_VERSIONS``: the Slurm versions PCS offers, the valid values of ``scheduler.version`` in PCS's API model
  (botocore ``pcs/2023-02-10/service-2.json``, ``SchedulerRequest``; tests/config/test_slurm_errors.py reads it).
  All are 24.11 or newer, the first with PCS's managed Slurm accounting.
- ``CLUSTER_SIZES``: what a cluster size manages (same model, ``CreateClusterRequest.size``).
- ``PCS_REGIONS``: the regions where CloudFormation has ``AWS::PCS::Cluster`` (cfn-lint's copy of the registry
  schemas, per region; the test compares them), as the AWS General Reference lists PCS's endpoints.
- ``scale_down_idle_seconds``: ``SlurmConfiguration.ScaleDownIdleTimeInSeconds`` of AWS::PCS::Cluster, 1 to
  10,000,000 (the API's default is 600).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated

from pydantic import BeforeValidator, Field, field_validator, model_validator

from config.base import Strict
from config.fleets import Fleet, Scheduler

SLURM_VERSIONS = ("24.11", "25.05", "25.11", "26.05")
#: The newest Slurm PCS offers: a new cluster's version unless the config names another.
LATEST_SLURM_VERSION = SLURM_VERSIONS[-1]

PCS_REGIONS = (
    "af-south-1",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-south-1",
    "ap-south-2",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-6",
    "ca-central-1",
    "eu-central-1",
    "eu-isoe-west-1",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eusc-de-east-1",
    "me-south-1",
    "sa-east-1",
    "us-east-1",
    "us-east-2",
    "us-gov-east-1",
    "us-gov-west-1",
    "us-iso-east-1",
    "us-iso-west-1",
    "us-isob-east-1",
    "us-isob-west-1",
    "us-isof-east-1",
    "us-isof-south-1",
    "us-west-2",
)


class ClusterSize(StrEnum):
    SMALL = "small"
    MEDIUM = "medium"
    LARGE = "large"


#: Compute nodes (login nodes included) and jobs, active and queued, a cluster of each size manages.
CLUSTER_SIZES: dict[ClusterSize, tuple[int, int]] = {
    ClusterSize.SMALL: (32, 256),
    ClusterSize.MEDIUM: (512, 8192),
    ClusterSize.LARGE: (2048, 16384),
}

_POSIX_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
_ACCOUNT = re.compile(r"^[a-z][a-z0-9_-]{0,30}$")
_CPU_TYPE = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")


def _quoted_version(value: object) -> object:
    """``25.11`` unquoted is a YAML number (and ``25.10`` would read 25.1): ask for the text as written."""
    if isinstance(value, float | int) and not isinstance(value, bool):
        raise ValueError(
            f'{value} is read by YAML as a number; fix: quote the version, e.g. slurm_version: "{LATEST_SLURM_VERSION}"'
        )
    return value


class Login(Strict):
    """The login nodes: a compute node group in no queue, where people log in (Session Manager) and submit.
    Any EC2 type of the region's x86_64 CPU families; the golden AMI boots on them (its NVIDIA driver idles)."""

    instance_type: str = "m7i.large"
    count: Annotated[int, Field(ge=1, le=4)] = 1

    @field_validator("instance_type")
    @classmethod
    def _type(cls, value: str) -> str:
        if not _CPU_TYPE.match(value):
            raise ValueError(f"{value!r} is not an EC2 instance type; fix: write a type such as m7i.large")
        return value


#: The QoS people submit urgent work with (``--qos urgent``): its priority puts it ahead of fair share.
URGENT_QOS = "urgent"
URGENT_PRIORITY = 1000


class Team(Strict):
    """A team: a Slurm account that its members' jobs are charged to, with its fair-share ``shares`` (a team's part
    of the cluster is its shares over all teams' shares)."""

    name: str
    shares: Annotated[int, Field(ge=1, le=1_000_000, description="Slurm Fairshare= of the team's account")] = 1

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _ACCOUNT.match(value):
            raise ValueError(
                f"{value!r} is not a Slurm account name; fix: 1-31 lowercase letters, digits, '_' and '-', "
                "starting with a letter"
            )
        return value


class User(Strict):
    """A person: POSIX name and uid on the cluster's nodes, and the team (Slurm account) they submit as."""

    name: str
    uid: Annotated[int, Field(ge=2000, le=60000, description="above the OS's and the image's own users")]
    team: str

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _POSIX_NAME.match(value):
            raise ValueError(
                f"{value!r} is not a POSIX user name; fix: 1-32 lowercase letters, digits, '_' and '-', "
                "starting with a letter or '_'"
            )
        return value


class Slurm(Strict):
    """``cluster_size``: small, medium or large (``CLUSTER_SIZES``). ``slurm_version``: one of ``SLURM_VERSIONS``,
    quoted; the newest by default. ``accounting``: PCS's managed Slurm accounting (per team usage, fair share).
    ``scale_down_idle_seconds``: how long an idle node stays before PCS stops it. ``login``, ``teams``, ``users``."""

    cluster_size: ClusterSize = ClusterSize.SMALL
    slurm_version: Annotated[str, BeforeValidator(_quoted_version)] = LATEST_SLURM_VERSION
    accounting: bool = True
    scale_down_idle_seconds: Annotated[
        int, Field(ge=1, le=10_000_000, description="ScaleDownIdleTimeInSeconds of an AWS::PCS::Cluster")
    ] = 600
    login: Login = Field(default_factory=Login)
    teams: list[Team] = Field(default_factory=list)
    users: list[User] = Field(default_factory=list)

    @field_validator("slurm_version")
    @classmethod
    def _offered(cls, value: str) -> str:
        if value not in SLURM_VERSIONS:
            raise ValueError(
                f"{value!r} is not a Slurm version AWS PCS offers; fix: use one of {', '.join(SLURM_VERSIONS)} "
                f"(the newest, {LATEST_SLURM_VERSION}, when left out)"
            )
        return value

    @model_validator(mode="after")
    def _people(self) -> Slurm:
        problems = []
        teams = [t.name for t in self.teams]
        problems += [
            f"@teams[{i}].name: {name!r} is already listed; fix: list each team once"
            for i, name in enumerate(teams)
            if name in teams[:i]
        ]
        names: dict[str, int] = {}
        uids: dict[int, int] = {}
        for i, user in enumerate(self.users):
            if user.team not in teams:
                known = ", ".join(teams) or "none yet"
                problems.append(
                    f"@users[{i}].team: {user.team!r} is not a team of this cluster ({known}); fix: add it to teams "
                    "or use one of them"
                )
            if user.name in names:
                problems.append(
                    f"@users[{i}].name: {user.name!r} is users[{names[user.name]}] too; fix: list each person once"
                )
            if user.uid in uids:
                problems.append(
                    f"@users[{i}].uid: {user.uid} is the uid of users[{uids[user.uid]}] too; fix: give each person their own uid"
                )
            names.setdefault(user.name, i)
            uids.setdefault(user.uid, i)
        if problems:
            raise ValueError("\n".join(problems))
        return self

    @property
    def node_limit(self) -> int:
        return CLUSTER_SIZES[self.cluster_size][0]


def slurm_problems(env_name: str, region: str, slurm: Slurm | None, fleets: Sequence[Fleet]) -> list[str]:
    """The rules between the ``slurm:`` section and the fleets: one needs the other, PCS's regions, and the nodes
    the cluster size manages (every Slurm fleet's ``capacity.max`` and the login nodes)."""
    chosen = [(i, f) for i, f in enumerate(fleets) if f.scheduler is Scheduler.SLURM]
    if slurm is None:
        return [
            f"@fleets[{i}].scheduler: slurm needs the environment's PCS cluster and {env_name} has no slurm "
            "section; fix: add 'slurm: {}' (a small cluster of the newest Slurm PCS offers, accounting on) or "
            "remove scheduler"
            for i, _ in chosen[:1]
        ]
    if not chosen:
        return [
            "@slurm: no fleet sets scheduler: slurm, and a PCS cluster with no queue would run (and cost) for "
            "nothing; fix: set scheduler: slurm on a training fleet, or remove the slurm section"
        ]
    problems = []
    if region not in PCS_REGIONS:
        problems.append(
            f"@slurm: AWS Parallel Computing Service does not run in {region}; fix: deploy the environment to a "
            "region where it runs (e.g. us-east-1, us-west-2, eu-west-1) or remove slurm and the fleets' "
            "scheduler: slurm"
        )
    nodes = sum(f.capacity.max for _, f in chosen) + slurm.login.count
    if nodes > slurm.node_limit:
        problems.append(
            f"@slurm.cluster_size: {slurm.cluster_size} manages at most {slurm.node_limit} nodes and the Slurm "
            f"fleets' capacity.max and the login nodes add up to {nodes}; fix: choose a larger cluster_size "
            "(medium: 512, large: 2048) or lower capacity.max"
        )
    return problems
