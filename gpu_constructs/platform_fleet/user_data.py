"""The user data of one fleet's nodes: its boot script, which names the file system it reads."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_ec2 as ec2

from config.catalog import InstanceType
from config.fleets import Fleet, Scheduler
from config.identity import file_system_identity
from gpu_constructs.fleet.render.node_settings import (
    instance_type_facts,
    node_env,
    people_json,
    service_json,
)
from gpu_constructs.fleet.render.user_data import render_user_data
from gpu_constructs.platform_fleet.site import FleetSite


def fleet_user_data(site: FleetSite, fleet: Fleet, catalog: Sequence[InstanceType]) -> ec2.UserData:
    """The fleet's boot script: the node's settings, its instance types' facts, the agent and its scripts; on a
    Slurm fleet's nodes also the cluster's people (their POSIX users, the same uids as on the login nodes)."""
    env = site.env
    people = people_json(env.slurm) if fleet.scheduler is Scheduler.SLURM and env.slurm is not None else None
    user_data = ec2.UserData.for_linux()
    # The file system comes from the Storage stack's output: its identity here makes a replacement of it
    # a new launch template version in the same deploy (config/identity.py).
    user_data.add_commands(
        *reading_file_system(
            file_system_identity(env),
            render_user_data(
                region=env.region,
                node_env=node_env(site.node_site, fleet),
                instance_types=instance_type_facts(fleet, catalog),
                agent_config_json=site.agent_config_json,
                scripts=site.scripts.location,
                service_json=service_json(fleet),
                people_json=people,
                every_boot=fleet.warm_pool is not None,
            ),
        )
    )
    return user_data


def reading_file_system(identity: str, lines: list[str]) -> list[str]:
    """``lines`` with a comment naming the file system's identity after the first one (``set -euo pipefail``)."""
    return [lines[0], f"# reads the Lustre file system {identity}", *lines[1:]]
