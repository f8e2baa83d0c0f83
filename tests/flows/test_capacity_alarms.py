"""A fleet short of nodes: from the Auto Scaling group's metrics, through the synthesized alarms'
own math, periods and evaluation settings, to the composite "fleet unhealthy" that pages.

A scale-out holds each new node in Pending:Wait (the launch hook) for its GPU check and Lustre
mount, up to the launch hook's timeout: that is not a shortfall. EC2 having no capacity is (nothing
launches: in service + pending stays below desired), and so is a launch that never finishes
(nodes short for longer than the hook can hold one: each attempt is abandoned and retried).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from config.naming import ResourceNames, terminate_hook_name
from gpu_constructs.observability.fleet_alarms import GROUP_METRICS, LAUNCH_STALLED
from tests.alarm_evaluator import (
    Series,
    alarm_states,
    composite_state,
    first_alarm_minute,
    period_minutes,
    rule_children,
)
from tests.synth import Synth

ENVS = ["dev", "staging", "prod"]
DESIRED, IN_SERVICE, PENDING = (GROUP_METRICS[k] for k in ("desired", "inservice", "pending"))


@dataclass
class FleetAlarmSet:
    """One fleet's alarms in one environment's Monitoring stack, by logical id."""

    group_name: str
    hook_minutes: int  # the launch hook's HeartbeatTimeout in the group (Fleets stack)
    terminate_minutes: int  # the terminate hook's
    shortfall_id: str
    stalled_id: str
    composite: dict[str, Any]
    alarms: dict[str, dict[str, Any]]  # logical id -> properties

    @property
    def shortfall(self) -> dict[str, Any]:
        return self.alarms[self.shortfall_id]

    @property
    def stalled(self) -> dict[str, Any]:
        return self.alarms[self.stalled_id]

    def page(self, series: dict[str, Series]) -> list[str]:
        """The composite's state per period, with every other child alarm OK."""
        states = {
            lid: (alarm_states(props, series) if lid in (self.shortfall_id, self.stalled_id) else None)
            for lid, props in self.alarms.items()
        }
        periods = len(states[self.shortfall_id])
        assert len(states[self.stalled_id]) == periods  # one period for both: states line up
        return [
            composite_state(self.composite["AlarmRule"], {lid: s[k] if s else "OK" for lid, s in states.items()})
            for k in range(periods)
        ]


def fleet_alarm_sets(synth: Synth) -> Iterator[tuple[str, str, FleetAlarmSet]]:
    for env in ENVS:
        names = ResourceNames.of(synth.environments[env])
        stack = synth.stack(env, "Monitoring")
        hooks = {
            h["LifecycleHookName"]: h["HeartbeatTimeout"]
            for r in synth.stack(env, "Fleets").resources("AWS::AutoScaling::AutoScalingGroup").values()
            for h in r["Properties"]["LifecycleHookSpecificationList"]
        }
        alarms = {lid: r["Properties"] for lid, r in stack.resources("AWS::CloudWatch::Alarm").items()}
        by_name = {props["AlarmName"]: lid for lid, props in alarms.items()}
        composites = {
            r["Properties"]["AlarmName"]: r["Properties"]
            for r in stack.resources("AWS::CloudWatch::CompositeAlarm").values()
        }
        for fleet in synth.environments[env].fleets:
            yield (
                env,
                fleet.name,
                FleetAlarmSet(
                    group_name=names.asg_name(fleet.name),
                    hook_minutes=hooks[launch_hook_of(synth, env, names.asg_name(fleet.name))] // 60,
                    terminate_minutes=hooks[terminate_hook_name(names.asg_name(fleet.name))] // 60,
                    shortfall_id=by_name[names.fleet_alarm(fleet.name, "capacity-shortfall")],
                    stalled_id=by_name[names.fleet_alarm(fleet.name, LAUNCH_STALLED)],
                    composite=composites[f"{names.prefix}-{fleet.name}-unhealthy"],
                    alarms=alarms,
                ),
            )


def launch_hook_of(synth: Synth, env: str, group_name: str) -> str:
    """The launch hook's name as the group's nodes know it (LAUNCH_HOOK_NAME in their node.env)."""
    for r in synth.stack(env, "Fleets").resources("AWS::AutoScaling::AutoScalingGroup").values():
        if r["Properties"]["AutoScalingGroupName"] == group_name:
            (launch,) = (
                h["LifecycleHookName"]
                for h in r["Properties"]["LifecycleHookSpecificationList"]
                if h["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_LAUNCHING"
            )
            return launch
    raise AssertionError(f"no group {group_name} in {env}-Fleets")


def group(minutes: int, *changes: tuple[int, int, int, int]) -> dict[str, Series]:
    """Per-minute group metrics: each change (from minute, desired, in service, pending) holds
    until the next one."""
    desired: list[float | None] = []
    in_service: list[float | None] = []
    pending: list[float | None] = []
    points = sorted(changes)
    for minute in range(minutes):
        _, d, i, p = [c for c in points if c[0] <= minute][-1]
        desired.append(d)
        in_service.append(i)
        pending.append(p)
    return {DESIRED: desired, IN_SERVICE: in_service, PENDING: pending}


# Scenarios (minutes). A p4d scale-out from 2 to 6 nodes: the 4 new ones are in Pending:Wait from
# minute 10 while bootstrap runs, and reach InService one by one up to minute 50 (40 minutes).
NORMAL_SCALE_OUT = group(120, (0, 2, 2, 0), (10, 6, 2, 4), (35, 6, 3, 3), (42, 6, 4, 2), (46, 6, 5, 1), (50, 6, 6, 0))


def slowest_admitted(hook: int) -> dict[str, Series]:
    """The slowest node the hook still admits: Pending:Wait from minute 3 (not on a period boundary)
    to just before the hook's timeout."""
    return group(hook + 60, (0, 1, 1, 0), (3, 2, 1, 1), (3 + hook - 1, 2, 2, 0))


# InsufficientInstanceCapacity: desired 4, 2 in service, nothing launching, for 30 minutes.
NO_CAPACITY = group(60, (0, 4, 2, 0), (30, 4, 4, 0))


def replacement(terminate: int, hook: int) -> dict[str, Series]:
    """An unhealthy node replaced: out of service at minute 3, held by the terminate hook to its timeout
    (nothing pending), then its replacement in Pending:Wait to just before the launch hook's timeout."""
    return group(
        terminate + hook + 60,
        (0, 2, 2, 0),
        (3, 2, 1, 0),
        (3 + terminate, 2, 1, 1),
        (3 + terminate + hook - 1, 2, 2, 0),
    )


def stuck_pending(hook: int) -> dict[str, Series]:
    """Two nodes whose bootstrap never completes the hook: abandoned at the timeout, terminated, and
    launched again (a minute with nothing pending between attempts)."""
    return group(
        3 * hook + 10,
        (0, 4, 2, 2),
        (hook, 4, 2, 0),
        (hook + 1, 4, 2, 2),
        (2 * hook + 1, 4, 2, 0),
        (2 * hook + 2, 4, 2, 2),
    )


@pytest.fixture(scope="module")
def fleets(synth: Synth) -> list[tuple[str, str, FleetAlarmSet]]:
    found = list(fleet_alarm_sets(synth))
    assert len(found) >= len(ENVS)
    return found


def test_alarms_read_the_groups_metrics_and_page_through_the_composite(fleets: list) -> None:
    for env, fleet, alarms in fleets:
        for alarm in (alarms.shortfall, alarms.stalled):
            read = {q["MetricStat"]["Metric"]["MetricName"] for q in alarm["Metrics"] if "MetricStat" in q}
            assert read <= {DESIRED, IN_SERVICE, PENDING}, (env, fleet, read)
            dims = {
                d["Value"]
                for q in alarm["Metrics"]
                if "MetricStat" in q
                for d in q["MetricStat"]["Metric"]["Dimensions"]
            }
            assert dims == {alarms.group_name}
        rule = rule_children(alarms.composite["AlarmRule"])
        assert f'ALARM("{alarms.shortfall_id}")' in rule and f'ALARM("{alarms.stalled_id}")' in rule
        assert alarms.composite["AlarmActions"]  # the page: the alerts topic
        assert alarms.composite["AlarmActions"] == alarms.shortfall["AlarmActions"]


def test_a_normal_scale_out_in_pending_wait_pages_nobody(fleets: list) -> None:
    for env, fleet, alarms in fleets:
        replaced = replacement(alarms.terminate_minutes, alarms.hook_minutes)
        for series in (NORMAL_SCALE_OUT, slowest_admitted(alarms.hook_minutes), replaced):
            assert first_alarm_minute(alarms.shortfall, series) is None, (env, fleet)
            assert first_alarm_minute(alarms.stalled, series) is None, (env, fleet)
            assert set(alarms.page(series)) == {"OK"}, (env, fleet)


def test_capacity_that_never_arrives_pages(fleets: list) -> None:
    for env, fleet, alarms in fleets:
        shortfall = alarms.shortfall
        minute = first_alarm_minute(shortfall, NO_CAPACITY)
        period = period_minutes(shortfall)
        assert minute == period * shortfall["DatapointsToAlarm"] <= 30, (env, fleet)
        assert first_alarm_minute(alarms.stalled, NO_CAPACITY) is None  # 30 minutes: within the hook's time
        page = alarms.page(NO_CAPACITY)
        assert page[minute // period - 1] == "ALARM" and page[minute // period - 2] == "OK"
        assert page[-1] == "OK"  # capacity arrived at minute 30: the page clears


def test_nodes_pending_beyond_the_launch_hook_timeout_page(fleets: list) -> None:
    for env, fleet, alarms in fleets:
        hook, stuck = alarms.hook_minutes, stuck_pending(alarms.hook_minutes)
        assert first_alarm_minute(alarms.shortfall, stuck) is None  # they are launching...
        minute = first_alarm_minute(alarms.stalled, stuck)  # ...and never get there
        period = period_minutes(alarms.stalled)
        window = hook + alarms.terminate_minutes  # a replacement may be out of service that long
        assert minute is not None and window < minute <= window + period, (env, fleet)
        page = alarms.page(stuck)
        assert page.index("ALARM") == minute // period - 1


def test_the_evaluator_catches_the_naive_expression(fleets: list) -> None:
    """In service against desired alone, over the shortfall's own periods, pages on a normal scale-out."""
    _, _, alarms = fleets[0]
    naive = copy.deepcopy(alarms.shortfall)
    next(q for q in naive["Metrics"] if "Expression" in q)["Expression"] = "desired - inservice"
    assert first_alarm_minute(naive, NORMAL_SCALE_OUT) is not None


def test_every_group_publishes_the_metrics_its_alarms_read(synth: Synth) -> None:
    for env in ENVS:
        groups = {
            r["Properties"]["AutoScalingGroupName"]: r["Properties"]
            for r in synth.stack(env, "Fleets").resources("AWS::AutoScaling::AutoScalingGroup").values()
        }
        for _, fleet, alarms in (f for f in fleet_alarm_sets(synth) if f[0] == env):
            group_props = groups[alarms.group_name]
            (collection,) = group_props["MetricsCollection"]
            assert collection["Granularity"] == "1Minute"
            collected = collection.get("Metrics")  # absent: every group metric
            for metric in (DESIRED, IN_SERVICE, PENDING):
                assert collected is None or metric in collected, (env, fleet, metric)
