"""What a node of one fleet is told at boot: its settings (``/etc/gpu-platform/node.env``), the facts of
its instance types (``instance-types.json``), the CloudWatch agent config, on a served fleet its service
(``service.json``) and on a Slurm node the cluster's people (``people.json``), rendered from typed config.

The names in ``node.env`` are the contract with ``scripts/node/`` (its README lists each one).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from config.catalog import InstanceType
from config.fleets import Fleet, Scheduler
from config.naming import ResourceNames, launch_hook_name, terminate_hook_name
from config.slurm import URGENT_PRIORITY, URGENT_QOS, Slurm
from gpu_constructs.fleet.render.agent_config import NodeLogFile, agent_config, to_json
from gpu_constructs.fleet.render.node_logs import NODE_LOGS

#: Where every node mounts the environment's Lustre file system.
FSX_MOUNT_POINT = "/fsx"
#: The checkpoint contract (scripts/node/README.md): a job puts ``<job>.pid`` here (the watcher units
#: create it) and checkpoints on SIGUSR1 under ``CHECKPOINT_DIR/<job>/``.
TRAINING_PID_DIR = "/run/gpu-platform/jobs"
CHECKPOINT_DIR = f"{FSX_MOUNT_POINT}/checkpoints"


@dataclass(frozen=True)
class NodeSite:
    """What every node of one environment shares: its names and the file system it mounts (values may be
    CDK tokens, resolved by CloudFormation)."""

    names: ResourceNames
    fsx_dns_name: str
    fsx_mount_name: str


def node_env(site: NodeSite, fleet: Fleet) -> dict[str, str]:
    """The ``node.env`` of one fleet's nodes."""
    names = site.names
    group_name = names.asg_name(fleet.name)
    return {
        "GPU_PLATFORM_ENV": names.env,
        "AWS_REGION": names.region,
        "FLEET_NAME": fleet.name,
        "ASG_NAME": group_name,
        "LAUNCH_HOOK_NAME": launch_hook_name(group_name),
        "TERMINATE_HOOK_NAME": terminate_hook_name(group_name),
        "METRIC_NAMESPACE": names.metrics_namespace,
        "FSX_DNS_NAME": site.fsx_dns_name,
        "FSX_MOUNT_NAME": site.fsx_mount_name,
        "FSX_MOUNT_POINT": FSX_MOUNT_POINT,
        "CHECKPOINT_DIR": CHECKPOINT_DIR,
        "TRAINING_PID_DIR": TRAINING_PID_DIR,
        "EFA_ENABLED": str(fleet.efa).lower(),
        "CONTAINERS_ENABLED": str(fleet.containers).lower(),
        # The fleet's health: DCGM level at launch, added fatal Xids (scripts/node/README.md).
        **fleet.health_node_env,
        # A Slurm fleet's nodes are AWS PCS's, not an Auto Scaling group's (no lifecycle hooks to complete).
        **({"SCHEDULER": fleet.scheduler.value} if fleet.scheduler is Scheduler.SLURM else {}),
    }


def instance_type_facts(fleet: Fleet, catalog: Sequence[InstanceType]) -> dict[str, dict[str, Any]]:
    """Per instance type of the fleet, what the node's bootstrap checks: GPUs, EFA interfaces (0 where the
    fleet does not use EFA), GPUDirect RDMA."""
    return {
        item.instance_type: {
            "gpus": item.gpu_count,
            "efa_interfaces": item.max_efa_interfaces if fleet.efa else 0,
            "gpudirect_rdma": item.gpudirect_rdma and fleet.efa,
        }
        for item in catalog
    }


def node_agent_config_json(names: ResourceNames) -> str:
    """The CloudWatch agent config every node of the environment runs: its metrics namespace, and each
    ``NODE_LOGS`` file shipped to its log group."""
    log_files = [NodeLogFile(name, path, names.node_log_group(name)) for name, path in NODE_LOGS.items()]
    return to_json(agent_config(namespace=names.metrics_namespace, log_files=log_files))


def service_json(fleet: Fleet) -> str | None:
    """``/etc/gpu-platform/service.json`` of a served fleet's nodes (scripts/node/serving/settings.py reads it),
    one line; None where the fleet serves nothing (the user data then writes no file)."""
    service = fleet.service
    if service is None:
        return None
    return json.dumps(
        {
            "port": service.port,
            "health_check_path": service.health_check_path,
            "command": service.command,
            "image": service.image,
            "start_timeout_seconds": service.start_timeout_seconds,
        },
        sort_keys=True,
    )


def people_json(slurm: Slurm) -> str:
    """``/etc/gpu-platform/people.json`` of the Slurm nodes, login and compute (scripts/node/slurm_people.py reads
    it): the teams with their fair-share shares, the people with their uids and teams, the urgent QoS. One line."""
    return json.dumps(
        {
            "teams": [{"name": team.name, "shares": team.shares} for team in slurm.teams],
            "users": [{"name": user.name, "uid": user.uid, "team": user.team} for user in slurm.users],
            "urgent_qos": {"name": URGENT_QOS, "priority": URGENT_PRIORITY},
        },
        sort_keys=True,
    )
