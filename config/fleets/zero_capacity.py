"""Every way a fleet can reach 0 nodes needs a way back.

GPU-utilization scaling (target tracking or step) acts on a metric the nodes publish: at 0 nodes
there is no datapoint, so it can never scale the fleet out again. What raises a fleet from 0 is a
scheduled action that sets min >= 1 (Auto Scaling then raises desired to at least min; a schedule
sets desired only where it gives one). Scheduled actions recur, so any such action comes after
every action that takes the fleet to 0.

Capacity Block fleets are sized by the block's own start and end actions (0 outside the block on
purpose) and take no scaling. A fleet without any scaling is sized by its config alone: it
is where the config puts it, and nothing moves it to 0 on its own.
"""

from __future__ import annotations

from config.fleets.capacity import Capacity, CapacityBlock
from config.fleets.scaling import Scaling

_FIX = "add a scaling.schedules entry with min >= 1 (e.g. '0 8 * * 1-5', a weekday morning)"


def zero_capacity_problems(
    capacity: Capacity, scaling: Scaling | None, capacity_block: CapacityBlock | None, requests_tracked: bool = False
) -> list[str]:
    """One ``@field: ...; fix: ...`` line per way to 0 of a fleet sized so that nothing comes back from.
    ``requests_tracked``: a served fleet's request-count target tracking (ALBRequestCountPerTarget), which at 0
    registered targets has no datapoint either."""
    if capacity_block is not None or (scaling is None and not requests_tracked):
        return []
    schedules = scaling.schedules if scaling is not None else []
    if any(action.min is not None and action.min >= 1 for action in schedules):
        return []
    problems = []
    if capacity.min == 0:
        if scaling is not None and (scaling.target_tracking or scaling.step):
            kind = "target_tracking" if scaling.target_tracking else "step"
            problems.append(
                f"@capacity.min: 0 with {kind} scaling on GPU utilization: scaled in to 0 nodes, the fleet "
                f"publishes no utilization and never scales out again; fix: set capacity.min to 1 or more, or {_FIX}"
            )
        elif requests_tracked:
            problems.append(
                "@capacity.min: 0 with request-count scaling (service.load_balancer.requests_per_target): at 0 "
                "nodes the target group has no target, ALBRequestCountPerTarget no datapoint, and the fleet never "
                f"scales out again; fix: set capacity.min to 1 or more, or {_FIX}"
            )
    dynamic = bool(scaling is not None and (scaling.target_tracking or scaling.step)) or requests_tracked
    for i, action in enumerate(schedules):
        if action.desired == 0 or action.max == 0 or (dynamic and action.min == 0):
            problems.append(
                f"@scaling.schedules[{i}]: {action.name!r} can take the fleet to 0 nodes and no schedule raises "
                f"it again; fix: {_FIX}"
            )
    return problems
