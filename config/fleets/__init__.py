"""Schema of the ``fleets:`` section: GPU Auto Scaling groups and their capacity mix, one module per sub-model.

- ``fleet``: the ``Fleet`` itself (instance types, EFA, placement, market mix) and the rules across its parts;
- ``capacity``: ``capacity``, ``capacity_reservation`` and ``capacity_block``;
- ``scaling``: ``scaling`` (target tracking, step, schedules) and ``warm_pool``;
- ``refresh``: ``refresh``, how a new AMI reaches the fleet;
- ``zero_capacity``: every way a fleet can reach 0 nodes needs a way back;
- ``health``: ``health``, how its nodes are judged healthy (DCGM level, added Xids, launch hook timeout);
- ``service``: ``service``, what an inference fleet serves and the load balancer in front of it;
- ``scheduler``: ``scheduler``, a training fleet's jobs through Slurm on AWS PCS, and its compute node groups.

Every name is importable from ``config.fleets``.
"""

from config.fleets.capacity import Capacity, CapacityBlock, CapacityReservation, ReservationPreference
from config.fleets.fleet import Fleet, FleetRole, Placement, SpotAllocationStrategy
from config.fleets.health import DCGM_LEVEL_SECONDS, DcgmMode, Health
from config.fleets.refresh import MAX_CHECKPOINT_DELAY_MINUTES, Refresh, RollbackAlarm
from config.fleets.scaling import Scaling, ScheduledAction, StepScaling, TargetTracking, WarmPool
from config.fleets.scheduler import NodeGroupPlan, PurchaseOption, Scheduler, node_group_plans
from config.fleets.service import LoadBalancerSettings, Service, ServiceAlarmThresholds

__all__ = [
    "DCGM_LEVEL_SECONDS",
    "MAX_CHECKPOINT_DELAY_MINUTES",
    "Capacity",
    "CapacityBlock",
    "CapacityReservation",
    "DcgmMode",
    "Fleet",
    "FleetRole",
    "Health",
    "LoadBalancerSettings",
    "NodeGroupPlan",
    "Placement",
    "PurchaseOption",
    "Refresh",
    "ReservationPreference",
    "RollbackAlarm",
    "Scaling",
    "ScheduledAction",
    "Scheduler",
    "Service",
    "ServiceAlarmThresholds",
    "SpotAllocationStrategy",
    "StepScaling",
    "TargetTracking",
    "WarmPool",
    "node_group_plans",
]
