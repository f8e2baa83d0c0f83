"""MonitoringStack: alarms per fleet, file system and security changes; Spot events; the dashboard."""

from __future__ import annotations

from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from config import Environment
from config.naming import ResourceNames
from gpu_constructs.alarm_factory import AlarmFactory
from gpu_constructs.fleet_alarms import FleetAlarms
from gpu_constructs.fsx_alarms import FsxAlarms
from gpu_constructs.platform_dashboard import FleetPanel, PlatformDashboard
from gpu_constructs.security_alarms import SecurityAlarms
from gpu_constructs.spot_events import SpotEvents
from stacks.base import PlatformStack

#: Baseline throughput of scratch file systems, MB/s per TiB (FSx for Lustre performance table).
SCRATCH_MB_PER_TIB = 200


def lustre_throughput_mb_per_s(env: Environment) -> float:
    fs = env.storage.file_system
    per_tib = fs.per_unit_storage_throughput if fs.deployment_type.persistent else SCRATCH_MB_PER_TIB
    return per_tib * fs.storage_capacity_gib / 1024


class MonitoringStack(PlatformStack):
    """Attributes: ``fleet_alarms`` (fleet -> FleetAlarms), ``fsx_alarms``, ``security_alarms``, ``spot_events``, ``dashboard``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env: Environment,
        topic: sns.ITopic,
        file_system_id: str,
        trail_log_group: logs.ILogGroup,
    ) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=False, description=f"GPU platform {env.name}: monitoring"
        )
        names = ResourceNames.of(env)
        factory = AlarmFactory(prefix=names.prefix, topic=topic)
        self.fleet_alarms = {
            fleet.name: FleetAlarms(
                self,
                f"Fleet-{fleet.name}",
                fleet_name=fleet.name,
                group_name=names.asg_name(fleet.name),
                namespace=names.metrics_namespace,
                thresholds=env.alarms,
                factory=factory,
            )
            for fleet in env.fleets
        }
        self.fsx_alarms = FsxAlarms(
            self,
            "Lustre",
            file_system_id=file_system_id,
            storage_capacity_gib=env.storage.file_system.storage_capacity_gib,
            throughput_mb_per_s=lustre_throughput_mb_per_s(env),
            thresholds=env.alarms,
            factory=factory,
        )
        self.security_alarms = SecurityAlarms(
            self,
            "Security",
            trail_log_group=trail_log_group,
            namespace=f"{names.metrics_namespace}/Security",
            thresholds=env.alarms,
            factory=factory,
        )
        self.spot_events = SpotEvents(
            self, "Spot", rule_name=f"{names.prefix}-spot-notices", topic=topic, thresholds=env.alarms, factory=factory
        )
        alarms = [
            *(f.unhealthy for f in self.fleet_alarms.values()),
            *(a for f in self.fleet_alarms.values() for a in f.alarms.values()),
            self.fsx_alarms.free_capacity,
            self.fsx_alarms.throughput,
            self.spot_events.alarm,
            *self.security_alarms.alarms.values(),
        ]
        self.dashboard = PlatformDashboard(
            self,
            "Dashboard",
            dashboard_name=names.prefix,
            namespace=names.metrics_namespace,
            fleets=[FleetPanel(f.name, names.asg_name(f.name)) for f in env.fleets],
            fsx_throughput=self.fsx_alarms.throughput_metric,
            fsx_free_capacity=self.fsx_alarms.free_capacity_metric,
            alarms=alarms,
        ).dashboard
