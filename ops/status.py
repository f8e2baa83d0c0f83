"""What runs in an environment now: its fleets, their instances, GPU use, alarms and Spot notices.

Read-only calls on the environment's account and region: Auto Scaling (the groups and their
instances), EC2 (each instance's AMI, launch time, market, and the Spot request of a Spot instance),
SSM (the AMI parameter the fleets launch from), CloudWatch (the fleet GPU metric, alarms in ALARM).

A Spot interruption notice shows on the instance's Spot request: EC2 sets its status code to
``marked-for-termination`` (or ``marked-for-stop``) when it decides to reclaim the instance, the
moment the two-minute notice appears in the instance metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore.config import Config

from config import Environment
from config.fleets import Scheduler
from config.naming import ResourceNames
from gpu_constructs.fleet.render.agent_metrics import fleet_dimensions, gpu_metric_name, namespace_for
from ops.findings import Finding, Level
from ops.golden_ami import bootstrap_ami_finding, describe_ami

_RETRIES = Config(retries={"mode": "standard", "max_attempts": 6})
#: Lifecycle states of an instance that is launching (the launch hook holds it in Pending:Wait).
PENDING_STATES = frozenset({"Pending", "Pending:Wait", "Pending:Proceed"})
#: Spot request status codes of a pending interruption start with this.
NOTICE_PREFIX = "marked-for-"
#: How far back the fleet GPU utilization is averaged.
UTILIZATION_WINDOW = timedelta(minutes=15)
_MARKETS = {"spot": "Spot", "capacity-block": "Capacity Block"}


@dataclass(frozen=True)
class InstanceStatus:
    instance_id: str
    instance_type: str
    market: str  # Spot | On-Demand | Capacity Block
    zone: str
    lifecycle_state: str
    health: str
    ami: str
    ami_is_latest: bool | None  # None: the AMI parameter could not be read
    uptime_s: int | None
    capacity_reservation: str | None = None
    interruption: str | None = None  # the Spot request's status code when EC2 has marked the instance


@dataclass(frozen=True)
class FleetStatus:
    name: str
    group_name: str
    deployed: bool
    desired: int = 0
    minimum: int = 0
    maximum: int = 0
    in_service: int = 0
    pending: int = 0
    gpu_utilization_avg: float | None = None  # percent, last 15 minutes; None: no data
    gpu_utilization_max: float | None = None
    instances: list[InstanceStatus] = field(default_factory=list)


@dataclass(frozen=True)
class Alarm:
    name: str
    reason: str


@dataclass(frozen=True)
class EnvironmentStatus:
    environment: str
    account: str
    region: str
    dashboard_url: str
    ami_parameter: str
    latest_ami: str | None
    golden_ami: bool | None  # None: no AMI parameter; False: it holds the public bootstrap AMI
    fleets: list[FleetStatus]
    alarms: list[Alarm]
    findings: list[Finding]


def market_of(instance: dict[str, Any]) -> str:
    """Spot, Capacity Block or On-Demand, from DescribeInstances' ``InstanceLifecycle`` (absent: On-Demand)."""
    return _MARKETS.get(instance.get("InstanceLifecycle", ""), "On-Demand")


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> list[dict[str, Any]]:
    return [item for page in client.get_paginator(operation).paginate(**kwargs) for item in page.get(key, [])]


def _latest_ami(ssm: Any, name: str) -> str | None:
    try:
        return ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return None


def _instances(ec2: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
    if not ids:
        return {}
    reservations = _pages(ec2, "describe_instances", "Reservations", InstanceIds=ids)
    return {i["InstanceId"]: i for r in reservations for i in r["Instances"]}


def _notices(ec2: Any, spot_ids: list[str]) -> dict[str, str]:
    """Instance id -> the status code of its Spot request, for requests EC2 has marked for interruption."""
    if not spot_ids:
        return {}
    requests = _pages(
        ec2,
        "describe_spot_instance_requests",
        "SpotInstanceRequests",
        Filters=[{"Name": "instance-id", "Values": spot_ids}],
    )
    return {
        r["InstanceId"]: r["Status"]["Code"]
        for r in requests
        if r.get("InstanceId") and r.get("Status", {}).get("Code", "").startswith(NOTICE_PREFIX)
    }


def _utilization(cloudwatch: Any, namespace: str, groups: list[str], now: datetime) -> dict[str, list[float]]:
    """Group name -> the per-minute averages of the fleet GPU utilization over the window."""
    if not groups:
        return {}
    queries = [
        {
            "Id": f"g{n}",
            "MetricStat": {
                "Metric": {
                    "Namespace": namespace,
                    "MetricName": gpu_metric_name("utilization_gpu"),
                    "Dimensions": [{"Name": k, "Value": v} for k, v in fleet_dimensions(group).items()],
                },
                "Period": 60,
                "Stat": "Average",
            },
        }
        for n, group in enumerate(groups)
    ]
    values: dict[str, list[float]] = {group: [] for group in groups}
    paginator = cloudwatch.get_paginator("get_metric_data")
    for page in paginator.paginate(MetricDataQueries=queries, StartTime=now - UTILIZATION_WINDOW, EndTime=now):
        for result in page["MetricDataResults"]:
            values[groups[int(result["Id"][1:])]].extend(result.get("Values", []))
    return values


def _alarms(cloudwatch: Any, prefix: str) -> list[Alarm]:
    alarms: list[Alarm] = []
    pages = cloudwatch.get_paginator("describe_alarms").paginate(
        AlarmNamePrefix=prefix, StateValue="ALARM", AlarmTypes=["MetricAlarm", "CompositeAlarm"]
    )
    for page in pages:
        for kind in ("MetricAlarms", "CompositeAlarms"):
            alarms += [Alarm(a["AlarmName"], " ".join(a.get("StateReason", "").split())) for a in page.get(kind, [])]
    return sorted(alarms, key=lambda a: a.name)


def collect(env: Environment, session: Any, now: datetime | None = None) -> EnvironmentStatus:
    """Read the environment's state; botocore errors (credentials, access) propagate to the caller."""
    now = now or datetime.now(UTC)
    names = ResourceNames.of(env)
    autoscaling = session.client("autoscaling", config=_RETRIES)
    ec2 = session.client("ec2", config=_RETRIES)
    cloudwatch = session.client("cloudwatch", config=_RETRIES)
    # Slurm fleets have no group: PCS launches their nodes (their jobs: gpu-platform job list, squeue).
    wanted = {names.asg_name(f.name): f.name for f in env.fleets if f.scheduler is Scheduler.NONE}
    groups = {
        g["AutoScalingGroupName"]: g
        for g in _pages(
            autoscaling, "describe_auto_scaling_groups", "AutoScalingGroups", AutoScalingGroupNames=list(wanted)
        )
    }
    members = [i["InstanceId"] for g in groups.values() for i in g.get("Instances", [])]
    described = _instances(ec2, members)
    notices = _notices(ec2, sorted(i for i, d in described.items() if d.get("InstanceLifecycle") == "spot"))
    latest = _latest_ami(session.client("ssm", config=_RETRIES), names.ami_parameter)
    utilization = _utilization(cloudwatch, namespace_for(env.name), sorted(groups), now)

    fleets = []
    for group_name, fleet_name in wanted.items():
        group = groups.get(group_name)
        in_group = sorted(group.get("Instances", []), key=lambda m: m["InstanceId"]) if group is not None else []
        instances = [_instance_status(m, described.get(m["InstanceId"], {}), latest, notices, now) for m in in_group]
        fleets.append(_fleet_status(fleet_name, group_name, group, instances, utilization.get(group_name, [])))
    alarms = _alarms(cloudwatch, f"{names.prefix}-")
    bootstrap = bootstrap_ami_finding(env, latest, describe_ami(ec2, latest), "ami") if latest else None
    status = EnvironmentStatus(
        environment=env.name,
        account=env.account,
        region=env.region,
        dashboard_url=names.dashboard_url,
        ami_parameter=names.ami_parameter,
        latest_ami=latest,
        golden_ami=None if latest is None else bootstrap is None,
        fleets=fleets,
        alarms=alarms,
        findings=[],
    )
    status.findings.extend(judge(status))
    status.findings.extend([bootstrap] if bootstrap else [])
    return status


def _fleet_status(
    name: str, group_name: str, group: dict[str, Any] | None, instances: list[InstanceStatus], values: list[float]
) -> FleetStatus:
    """The fleet's group (None: not deployed), its ``instances`` and its utilization ``values``."""
    if group is None:
        return FleetStatus(name, group_name, deployed=False)
    return FleetStatus(
        name=name,
        group_name=group_name,
        deployed=True,
        desired=group["DesiredCapacity"],
        minimum=group["MinSize"],
        maximum=group["MaxSize"],
        in_service=sum(i.lifecycle_state == "InService" for i in instances),
        pending=sum(i.lifecycle_state in PENDING_STATES for i in instances),
        gpu_utilization_avg=round(sum(values) / len(values), 1) if values else None,
        gpu_utilization_max=round(max(values), 1) if values else None,
        instances=instances,
    )


def _instance_status(
    member: dict[str, Any], described: dict[str, Any], latest: str | None, notices: dict[str, str], now: datetime
) -> InstanceStatus:
    instance_id = member["InstanceId"]
    launched = described.get("LaunchTime")
    ami = described.get("ImageId", "")
    return InstanceStatus(
        instance_id=instance_id,
        instance_type=member.get("InstanceType") or described.get("InstanceType", ""),
        market=market_of(described),
        zone=member["AvailabilityZone"],
        lifecycle_state=member["LifecycleState"],
        health=member["HealthStatus"],
        ami=ami,
        ami_is_latest=(ami == latest) if latest else None,
        uptime_s=int((now - launched).total_seconds()) if launched else None,
        capacity_reservation=described.get("CapacityReservationId"),
        interruption=notices.get(instance_id),
    )


def judge(status: EnvironmentStatus) -> list[Finding]:
    """What needs a person: a missing group, capacity short of desired, unhealthy nodes, alarms, notices."""
    out: list[Finding] = []
    env = status.environment

    def add(check: str, level: Level, message: str, fix: str) -> None:
        out.append(Finding(check, level, message, fix))

    for fleet in status.fleets:
        if not fleet.deployed:
            message = f"{fleet.name}: Auto Scaling group {fleet.group_name} not found in {status.region}"
            add("fleet", Level.ERROR, message, f"deploy the fleets: make deploy ENV={env}")
            continue
        if fleet.in_service < fleet.desired:
            add(
                "capacity",
                Level.WARNING,
                f"{fleet.name}: {fleet.in_service} of {fleet.desired} desired in service ({fleet.pending} pending)",
                "pending nodes pass their launch checks first; the group's activities say why a launch failed: "
                f"aws autoscaling describe-scaling-activities --auto-scaling-group-name {fleet.group_name}",
            )
        for i in fleet.instances:
            if i.health != "Healthy":
                where = f"the node log groups /gpu-platform/{env}/node/ and the dashboard"
                add("health", Level.ERROR, f"{fleet.name}: {i.instance_id} is {i.health}", f"see {where}")
            if i.interruption:
                add(
                    "spot-notice",
                    Level.WARNING,
                    f"{fleet.name}: {i.instance_id} has a Spot interruption notice ({i.interruption})",
                    "its checkpoint hook runs now; capacity rebalancing launches a replacement",
                )
            if i.ami_is_latest is False:
                add(
                    "ami",
                    Level.INFO,
                    f"{fleet.name}: {i.instance_id} runs {i.ami}, the parameter holds {status.latest_ami}",
                    "the AMI rollout replaces it (docs/operations.md: Building a new AMI and rolling it out)",
                )
    if status.latest_ami is None:
        message = f"AMI parameter {status.ami_parameter} not found"
        add("ami", Level.WARNING, message, f"deploy the image stack: make deploy ENV={env}")
    for alarm in status.alarms:
        add("alarm", Level.ERROR, f"{alarm.name} is in ALARM: {alarm.reason}", f"see {status.dashboard_url}")
    return out
