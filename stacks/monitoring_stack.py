"""MonitoringStack: alarms per fleet, file system and security changes; Spot events; the dashboard."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import CfnOutput, Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

from config import Environment
from config.fleets import Fleet, Scheduler
from config.identity import file_system_identity, service_identity
from config.naming import ResourceNames
from gpu_constructs.fleet.gpu_fleet import TERMINATE_HOOK_TIMEOUT
from gpu_constructs.fleet.service_load_balancer import ServiceLoadBalancer
from gpu_constructs.observability.alarm_factory import AlarmFactory
from gpu_constructs.observability.cost_budget import CostBudget
from gpu_constructs.observability.fleet_alarms import FleetAlarms
from gpu_constructs.observability.fsx_alarms import FsxAlarms
from gpu_constructs.observability.platform_dashboard import FleetPanel, PlatformDashboard
from gpu_constructs.observability.security_alarms import SecurityAlarms
from gpu_constructs.observability.service_alarms import ServiceAlarms, ServiceTarget
from gpu_constructs.observability.spot_events import SpotEvents
from stacks.base import PlatformStack, stamp_readers


class MonitoringStack(PlatformStack):
    """Attributes: ``fleet_alarms`` (fleet -> FleetAlarms), ``service_alarms`` (served fleet -> ServiceAlarms), ``fsx_alarms``, ``security_alarms``, ``spot_events``, ``dashboard``."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        env: Environment,
        topic: sns.ITopic,
        file_system_id: str,
        trail_log_group: logs.ILogGroup,
        services: Mapping[str, ServiceLoadBalancer],
    ) -> None:
        super().__init__(
            scope, construct_id, env=env, stateful=False, description=f"GPU platform {env.name}: monitoring"
        )
        names = ResourceNames.of(env)
        self._env, self._names = env, names
        factory = AlarmFactory(prefix=names.prefix, topic=topic)
        # The Auto Scaling fleets: their alarms and panels read the group's metrics. A Slurm fleet has no group
        # (AWS PCS launches its nodes, gpu_constructs/scheduler/).
        asg_fleets = [fleet for fleet in env.fleets if fleet.scheduler is Scheduler.NONE]
        self.fleet_alarms = {fleet.name: self._fleet_alarms(fleet, factory) for fleet in asg_fleets}
        targets = _service_targets(services, names)
        self.service_alarms = self._service_alarms(targets, factory)
        self.fsx_alarms = FsxAlarms(
            self,
            "Lustre",
            file_system_id=file_system_id,
            storage_capacity_gib=env.storage.file_system.storage_capacity_gib,
            throughput_mb_per_s=env.storage.file_system.baseline_throughput_mb_per_s,
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
        self._stamp_readers()
        self.dashboard = self._dashboard(asg_fleets, targets)
        self.budget = (
            CostBudget(self, "Budget", name=names.budget_name, config=env.budget, topic=topic)
            if env.budget is not None
            else None
        )

    def _fleet_alarms(self, fleet: Fleet, factory: AlarmFactory) -> FleetAlarms:
        """The alarms of one Auto Scaling fleet, on its group's metrics and its nodes' GPU and health metrics."""
        names = self._names
        return FleetAlarms(
            self,
            f"Fleet-{fleet.name}",
            fleet_name=fleet.name,
            group_name=names.asg_name(fleet.name),
            namespace=names.metrics_namespace,
            thresholds=self._env.alarms,
            factory=factory,
            launch_hook_timeout=Duration.seconds(fleet.launch_hook_timeout_seconds),
            terminate_hook_timeout=TERMINATE_HOOK_TIMEOUT,
        )

    def _service_alarms(self, targets: list[ServiceTarget], factory: AlarmFactory) -> dict[str, ServiceAlarms]:
        """Served fleet -> the alarms on its load balancer's metrics, at the thresholds of its service."""
        served = {f.name: f.service for f in self._env.fleets if f.service is not None}
        return {
            t.fleet_name: ServiceAlarms(
                self, f"Service-{t.fleet_name}", target=t, thresholds=served[t.fleet_name].alarms, factory=factory
            )
            for t in targets
        }

    def _stamp_readers(self) -> None:
        """The identity of each resource of another stack that alarms read, in their descriptions."""
        env = self._env
        for fleet in env.fleets:
            if fleet.name in self.service_alarms:
                stamp_readers(
                    self.service_alarms[fleet.name], f"load balancer of {fleet.name}", service_identity(env, fleet)
                )
        stamp_readers(self.fsx_alarms, "file system", file_system_identity(env))

    def _alarms(self) -> list[cloudwatch.IAlarm]:
        """Every alarm of the environment, as the dashboard lists them."""
        return [
            *(f.unhealthy for f in self.fleet_alarms.values()),
            *(a for f in self.fleet_alarms.values() for a in f.alarms.values()),
            *(a for s in self.service_alarms.values() for a in s.alarms.values()),
            self.fsx_alarms.free_capacity,
            self.fsx_alarms.throughput,
            self.spot_events.alarm,
            *self.security_alarms.alarms.values(),
        ]

    def _dashboard(self, asg_fleets: list[Fleet], targets: list[ServiceTarget]) -> cloudwatch.Dashboard:
        """The dashboard of the fleets, the file system and the alarms, with what it reads, and its URL's output."""
        env, names = self._env, self._names
        dashboard = PlatformDashboard(
            self,
            "Dashboard",
            dashboard_name=names.dashboard_name,
            namespace=names.metrics_namespace,
            fleets=[FleetPanel(f.name, names.asg_name(f.name)) for f in asg_fleets],
            fsx_throughput=self.fsx_alarms.throughput_metric,
            fsx_free_capacity=self.fsx_alarms.free_capacity_metric,
            alarms=self._alarms(),
            services=targets,
        ).dashboard
        reads = [f"file system {file_system_identity(env)}"] + [
            f"load balancer of {f.name} {service_identity(env, f)}" for f in env.fleets if f.service is not None
        ]
        dashboard.add_widgets(
            cloudwatch.TextWidget(
                markdown=f"Reads (identity of each resource shown): {', '.join(reads)}", width=24, height=1
            )
        )
        CfnOutput(
            self,
            "DashboardUrl",
            value=names.dashboard_url,
            description=f"GPU platform {env.name}: CloudWatch dashboard of the fleets, the file system and the alarms",
        )
        return dashboard


def _service_targets(services: Mapping[str, ServiceLoadBalancer], names: ResourceNames) -> list[ServiceTarget]:
    """Served fleets (fleet name -> load balancer, fleet stack): what their alarms and panels read."""
    return [
        ServiceTarget(
            name,
            lb.load_balancer.load_balancer_full_name,
            lb.target_group.target_group_full_name,
            names.asg_name(name),
        )
        for name, lb in services.items()
    ]
