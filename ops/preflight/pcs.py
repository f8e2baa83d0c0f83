"""AWS PCS, for an environment with a ``slurm:`` section: does PCS answer in the region, is another cluster being
created, and do the account's PCS quotas take the environment's cluster, node groups, queues and instances.

- PCS answers: ``pcs:ListClusters`` (the config already refuses a region where CloudFormation has no
  ``AWS::PCS::Cluster``, config/slurm.py ``PCS_REGIONS``; this asks the account).
- One cluster in Creating at a time: "There can only be 1 cluster in a Creating state per AWS Region per AWS
  account. CreateCluster fails with a ServiceQuotaExceededException if there is already a cluster in a Creating
  state." (AWS PCS API Reference, CreateCluster.) A deploy that creates this environment's cluster while another
  cluster of the account is ``CREATING`` in the region fails.
- Quotas: Service Quotas, service code ``pcs`` (PCS's ServiceQuotaExceededException carries ``serviceCode`` and
  ``quotaCode``: botocore's pcs service model), each found by its name (applied value, else AWS's default), since
  their codes are not published where this was written: clusters per account and region, compute node groups per
  cluster, queues per cluster, and instances per cluster (the total of ``maxInstances`` of a cluster's node groups:
  the model's examples of that exception). A quota Service Quotas does not list is UNCHECKED, never a pass.

This environment's cluster is the one tagged ``Project`` and ``Environment`` as the environment's stacks tag it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botocore.exceptions import ClientError

from config.fleets.scheduler import node_group_plans
from config.schema import Environment
from ops.findings import Finding, Level
from ops.preflight.aws import Aws, describe_failure

CHECK = "pcs"
SERVICE_CODE = "pcs"
QUOTAS_PAGE = "AWS PCS User Guide, Endpoints and service quotas"


def _named(*words: str, without: tuple[str, ...] = ()) -> Callable[[str], bool]:
    """A test of a quota's name: it has every one of ``words`` and none of ``without`` (case aside)."""
    return lambda name: all(w in name.lower() for w in words) and not any(w in name.lower() for w in without)


#: (what, how its quota's name reads): matched by name, the codes not being published where this was written.
QUOTA_KINDS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("clusters", _named("cluster", without=("node group", "queue", "instance", "per cluster", "creat"))),
    ("compute node groups per cluster", _named("node group", without=("instance",))),
    ("queues per cluster", _named("queue", without=("node group",))),
    ("instances per cluster", _named("instance", "cluster")),
)


def needs(env: Environment) -> dict[str, int]:
    """What the environment's cluster asks of each per-cluster quota: a node group for the login nodes and one
    per purchase option of each Slurm fleet (config/fleets/scheduler.py), a queue per Slurm fleet, and the node
    groups' maxima (every fleet's ``capacity.max`` and the login nodes). Nothing without a ``slurm:`` section."""
    if env.slurm is None:
        return {}
    fleets = env.slurm_fleets
    return {
        "compute node groups per cluster": 1 + sum(len(node_group_plans(f)) for f in fleets),
        "queues per cluster": len(fleets),
        "instances per cluster": sum(f.capacity.max for f in fleets) + env.slurm.login.count,
    }


def _ours(aws: Aws, env: Environment, cluster: dict[str, Any]) -> bool:
    tags = aws.client("pcs").list_tags_for_resource(resourceArn=cluster["arn"]).get("tags") or {}
    return tags.get("Project") == env.tags["Project"] and tags.get("Environment") == env.name


def _creating(env: Environment, clusters: list[dict[str, Any]], ours: dict[str, Any] | None) -> list[Finding]:
    others = [c for c in clusters if c["status"] == "CREATING" and c is not ours]
    if not others:
        return []
    names = ", ".join(f"{c['name']} ({c['id']})" for c in others)
    wait = f"aws pcs get-cluster --cluster-identifier {others[0]['id']} --region {env.region}"
    if ours is None:
        return [
            Finding(
                CHECK,
                Level.ERROR,
                f"{names} is being created in {env.region}, and PCS creates one cluster at a time per account and "
                f"region: the deploy's CreateCluster for {env.name} would fail (ServiceQuotaExceededException)",
                f"wait until it is ACTIVE ({wait}), then deploy; deploy environments of one account and region one "
                "after another",
            )
        ]
    return [
        Finding(
            CHECK,
            Level.WARNING,
            f"{names} is being created in {env.region}: a deploy that replaces {env.name}'s cluster (a new "
            "slurm.cluster_size) would fail until it is ACTIVE; other changes are not held up",
            f"wait until it is ACTIVE ({wait}) before changing slurm.cluster_size",
        )
    ]


def _quotas(env: Environment, aws: Aws, clusters: int, new: bool) -> list[Finding]:
    """The account's PCS quotas against what the environment adds; UNCHECKED where Service Quotas cannot say."""
    asks = {"clusters": clusters + (1 if new else 0), **needs(env)}
    try:
        listed = aws.quotas_named(SERVICE_CODE, lambda _: True)
    except ClientError as err:
        return [
            Finding(
                CHECK,
                Level.UNCHECKED,
                f"the PCS quotas could not be read: {describe_failure(err)}",
                f"allow servicequotas:ListServiceQuotas and ListAWSDefaultServiceQuotas, or compare by hand with "
                f"the {QUOTAS_PAGE}: {', '.join(f'{k} {v}' for k, v in asks.items())}",
            )
        ]
    findings = []
    for what, matches in QUOTA_KINDS:
        quotas, ask = [q for q in listed if matches(q["QuotaName"])], asks[what]
        if not quotas:
            findings.append(
                Finding(
                    CHECK,
                    Level.UNCHECKED,
                    f"Service Quotas lists no PCS quota for {what} (service code {SERVICE_CODE}): {env.name} needs "
                    f"{ask}, not checked",
                    f"compare {ask} with the {QUOTAS_PAGE}",
                )
            )
            continue
        quota = min(quotas, key=lambda q: float(q["Value"]))
        value, label = float(quota["Value"]), f"'{quota['QuotaName']}' ({quota['QuotaCode']})"
        if ask > value:
            subject = "the account's clusters and this one" if what == "clusters" else f"{env.name}'s cluster"
            findings.append(
                Finding(
                    CHECK,
                    Level.ERROR,
                    f"{subject} {'need' if what == 'clusters' else 'needs'} {ask} {what}; {label} is {value:g}",
                    f"request {quota['QuotaCode']} >= {ask} in Service Quotas ({SERVICE_CODE}, {env.region})"
                    + (", or fewer Slurm fleets or lower capacity.max" if what != "clusters" else ""),
                )
            )
        else:
            findings.append(Finding(CHECK, Level.INFO, f"{label}: {value:g} covers the {ask} {what} {env.name} needs"))
    return findings


def check_pcs(env: Environment, aws: Aws) -> list[Finding]:
    """PCS answers in the region, no other cluster is being created while this one would be, and the PCS quotas
    take the environment's cluster. Nothing to check without a ``slurm:`` section."""
    if env.slurm is None:
        return []
    clusters = aws.pages("pcs", "list_clusters", "clusters")
    ours = next((c for c in clusters if _ours(aws, env, c)), None)
    state = "not created yet" if ours is None else f"{ours['name']} ({ours['id']}), {ours['status']}"
    findings = [
        Finding(
            CHECK,
            Level.INFO,
            f"AWS PCS answers in {env.region}: {len(clusters)} cluster(s) in the account; {env.name}'s: {state}",
        )
    ]
    findings += _creating(env, clusters, ours)
    findings += _quotas(env, aws, len(clusters), new=ours is None)
    return findings
