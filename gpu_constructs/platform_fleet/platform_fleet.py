"""One configured fleet, whole: its nodes' user data, its capacity backend (an Auto Scaling group, or PCS compute
node groups behind the fleet's Slurm queue), the load balancer of its service and its outputs. The stacks keep a
``FleetHandle`` of it and nothing else."""

from __future__ import annotations

import re
from dataclasses import dataclass

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from config.catalog import InstanceType, get_instance_type
from config.fleets import Fleet, Scheduler
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.fleet.gpu_fleet import GpuFleet
from gpu_constructs.fleet.service_load_balancer import ServiceLoadBalancer
from gpu_constructs.platform_fleet.site import FleetSite
from gpu_constructs.platform_fleet.user_data import fleet_user_data
from gpu_constructs.scheduler.slurm_fleet import SlurmFleet
from gpu_constructs.scheduler.slurm_scheduler import SlurmFleetCluster


@dataclass(frozen=True)
class FleetHandle:
    """What the stacks need of a built fleet: its name, the Auto Scaling group's name (None where PCS launches the
    nodes), its launch templates' ids, the PCS queue's id (Slurm fleets) and its service's load balancer."""

    name: str
    group_name: str | None
    launch_template_ids: tuple[str, ...]
    queue_id: str | None = None
    service: ServiceLoadBalancer | None = None


def output_id(fleet: Fleet) -> str:
    """The fleet's name as an output id's suffix: title case, letters and digits only."""
    return re.sub("[^A-Za-z0-9]", "", fleet.name.title())


class PlatformFleet:
    """The fleet's backend is the construct ``Fleet-<name>`` in ``scope``: a GpuFleet (Auto Scaling group) under the
    stack, or a SlurmFleet under the Slurm scheduler (``cluster``), whose node groups belong to that cluster. The
    load balancer (``Service-<name>``) and the outputs are the stack's own. This class builds them and adds no
    level to the construct tree: a level would change every construct path, so the logical ids and the ``Name``
    tag (the path) that the launch templates give every node, and an upgrade would roll every fleet for nothing.
    Every launch of its nodes waits for ``site.launch_after``.

    Attributes: handle (FleetHandle), backend (GpuFleet or SlurmFleet).
    """

    def __init__(
        self, scope: Construct, fleet: Fleet, *, site: FleetSite, cluster: SlurmFleetCluster | None = None
    ) -> None:
        self._scope, self._site, self._fleet = scope, site, fleet
        catalog = [get_instance_type(name) for name in fleet.instance_types]
        user_data = fleet_user_data(site, fleet, catalog)
        if fleet.scheduler is Scheduler.SLURM:
            if cluster is None:
                raise ValueError(f"fleet {fleet.name} sets scheduler: slurm but the environment has no PCS cluster")
            self.backend: GpuFleet | SlurmFleet = self._slurm_fleet(catalog, user_data, cluster)
        else:
            self.backend = self._auto_scaling_fleet(catalog, user_data)

    def _auto_scaling_fleet(self, catalog: list[InstanceType], user_data: ec2.UserData) -> GpuFleet:
        """The fleet's Auto Scaling group, its group's output, and its service's load balancer with its URL."""
        site, fleet = self._site, self._fleet
        network, security = site.network, site.security
        group_name = site.names.asg_name(fleet.name)
        backend = GpuFleet(
            self._scope,
            f"Fleet-{fleet.name}",
            fleet=fleet,
            group_name=group_name,
            instance_types=catalog,
            vpc=network.vpc,
            subnets=network.subnets(fleet),
            machine_image=site.machine_image,
            user_data=user_data,
            instance_profile=security.instance_profile,
            node_security_group=network.node,
            efa_security_group=network.efa,
            training_security_group=network.training_group(fleet),
            volume_key=security.volume_key,
            notification_topic=security.alerts_topic,
            metrics_namespace=site.names.metrics_namespace,
            placement_tags=site.env.pinned_placement_group_tags,
        )
        backend.auto_scaling_group.node.add_dependency(*site.launch_after)
        self._output(
            f"GroupName{output_id(fleet)}",
            backend.auto_scaling_group.auto_scaling_group_name,
            f"Auto Scaling group of the {fleet.name} fleet",
        )
        service = None
        if fleet.service is not None:  # the load balancer in front of an inference fleet's service
            service = ServiceLoadBalancer(
                Stack.of(self._scope),
                f"Service-{fleet.name}",
                fleet_name=fleet.name,
                service=fleet.service,
                vpc=network.vpc,
                auto_scaling_group=backend.auto_scaling_group,
                node_security_group=network.node,
                access_log_bucket=security.access_log_bucket,
                access_log_prefix=f"load-balancers/{fleet.name}",
            )
            self._output(f"ServiceUrl{output_id(fleet)}", service.url, f"URL of the {fleet.name} fleet's service")
        templates = tuple(cfn_child(t, ec2.CfnLaunchTemplate).ref for t in backend.launch_templates.values())
        self.handle = FleetHandle(fleet.name, group_name, templates, service=service)
        return backend

    def _slurm_fleet(
        self, catalog: list[InstanceType], user_data: ec2.UserData, cluster: SlurmFleetCluster
    ) -> SlurmFleet:
        """The fleet's node groups (one per purchase option) and its queue on the environment's PCS cluster."""
        site, fleet = self._site, self._fleet
        backend = SlurmFleet(
            self._scope,
            f"Fleet-{fleet.name}",
            fleet=fleet,
            instance_types=catalog,
            cluster_id=cluster.cluster_id,
            subnet_ids=site.network.subnet_ids(list(fleet.availability_zones)),
            machine_image=site.machine_image,
            user_data=user_data,
            instance_profile=cluster.instance_profile,
            security_groups=cluster.security_groups,
            volume_key=site.security.volume_key,
            placement_tags=site.env.pinned_placement_group_tags,
        )
        for group in backend.node_groups.values():
            group.node.add_dependency(*site.launch_after)
        self._output(
            f"SlurmQueue{output_id(fleet)}",
            backend.queue.attr_id,
            f"the PCS queue of the {fleet.name} fleet (Slurm partition {fleet.name})",
        )
        templates = tuple(cfn_child(t, ec2.CfnLaunchTemplate).ref for t in backend.launch_templates.values())
        self.handle = FleetHandle(fleet.name, None, templates, queue_id=backend.queue.attr_id)
        return backend

    def _output(self, output_id_: str, value: str, what: str) -> None:
        """The stack output ``output_id_`` (at the stack's level): ``what``, in this environment."""
        CfnOutput(
            Stack.of(self._scope), output_id_, value=value, description=f"GPU platform {self._site.env.name}: {what}"
        )
