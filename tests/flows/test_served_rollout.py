"""A served fleet keeps serving through an AMI rollout, and its rollback alarms see it when it does not.

dev's ``inference`` fleet serves from one node. The runbook's instance refresh of that group (Fleets stack) must
launch the replacement and let it pass its launch hook before the old node stops; the rollback alarms it names
(Monitoring stack) must go to ALARM when the fleet has nothing to send requests to, which the target metrics
cannot show: with no target registered the load balancer answers 503 itself and reports no unhealthy host.

The alarms are taken from the synthesized template and evaluated by tests/flows/metric_math.py, which the first
tests here hold to the CloudWatch user guide's own examples. The metrics of each scenario come from a timeline of
nodes (launched, in service once their launch hook completes, leaving when the refresh terminates them) and of
clients, published as the Application Load Balancer guide says: HealthyHostCount, UnHealthyHostCount and
RequestCount only while a target is registered, HTTPCode_ELB_5XX_Count (per load balancer) only when not 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import botocore.session
import pytest
from botocore.validate import ParamValidator

from tests.flows.metric_math import Expression, alarm_states, alarm_values, evaluate_state
from tests.synth import Synth

ENV, FLEET = "dev", "inference"
GROUP = f"gpu-platform-{ENV}-{FLEET}"
#: The service alarms a served fleet's refresh watches (config/fleets/refresh.py SERVICE_ROLLBACK_ALARMS).
SERVICE_ALARMS = ("http-5xx-rate", "unhealthy-hosts", "lb-5xx-rate", "no-healthy-hosts")
#: A replacement passes its launch hook (boot, GPU checks, Lustre, the service's first 200) in this time.
LAUNCH_MINUTES = 12
#: The refresh starts at this minute; the scenarios run this long.
START, MINUTES = 30, 150


# --- the evaluator, held to the CloudWatch user guide's examples ---------------------------------------------------


def _series(*values: float | None) -> dict[int, float]:
    return {k: float(v) for k, v in enumerate(values) if v is not None}


def _listed(series: Any, periods: int) -> list[float | None]:
    return [series.get(k) for k in range(periods)]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("metric1 < metric2", [0, 0, 1, 0]),
        ("metric1 >= 30", [1, 0, 0, 0]),
        ("metric1 > 15 AND metric2 > 15", [1, 0, 0, 0]),
    ],
)
def test_comparison_and_logical_operators_as_the_guide_shows(expression: str, expected: list[float]) -> None:
    inputs = {"metric1": _series(30, 20, 0, 0), "metric2": _series(20, None, 20, None)}
    assert _listed(Expression(expression).evaluate(inputs, 4), 4) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("IF(metric1, metric2, metric3)", [30, 0, 20, None, None]),
        ("IF(metric1, 5, metric3)", [5, 5, 20, None, None]),
        ("IF(metric1, metric2, 5)", [30, 0, 5, 5, None]),
    ],
)
def test_if_as_the_guide_shows(expression: str, expected: list[float | None]) -> None:
    inputs = {
        "metric1": _series(1, 1, 0, 0, None),
        "metric2": _series(30, None, 0, 0, 30),
        "metric3": _series(0, 0, 20, None, 20),
    }
    assert _listed(Expression(expression).evaluate(inputs, 5), 5) == expected


def test_arithmetic_reads_a_missing_value_as_0_drops_a_division_by_0_and_fill_fills() -> None:
    inputs = {"a": _series(4, None, 6, None), "b": _series(2, 2, None, None)}
    assert _listed(Expression("a - b").evaluate(inputs, 4), 4) == [2, -2, 6, None]
    assert _listed(Expression("a / b").evaluate(inputs, 4), 4) == [2, 0, None, None]
    assert _listed(Expression("FILL(b, 7) * 1").evaluate(inputs, 4), 4) == [2, 2, 7, 7]
    with pytest.raises(NotImplementedError, match="RATE"):
        Expression("RATE(a)").evaluate(inputs, 4)


# The guide's two tables (0 not breaching, X breaching, - missing; 5 datapoints read for 3 evaluation periods):
# the columns BREACHING and NOT BREACHING.
MISSING_DATA = [
    ("0 - X - X", 3, 3, "OK", "OK"),
    ("0 - - - -", 3, 3, "OK", "OK"),
    ("- - - - -", 3, 3, "ALARM", "OK"),
    ("0 X X - X", 3, 3, "ALARM", "ALARM"),
    ("- - - - X", 3, 3, "ALARM", "OK"),
    ("X - - - -", 3, 3, "ALARM", "OK"),
    ("0 - X - X", 2, 3, "ALARM", "ALARM"),
    ("0 0 X 0 X", 2, 3, "ALARM", "ALARM"),
    ("0 - X - -", 2, 3, "ALARM", "OK"),
    ("- - - - 0", 2, 3, "ALARM", "OK"),
    ("- - - - X", 2, 3, "ALARM", "OK"),
]


@pytest.mark.parametrize(("points", "needed", "periods", "breaching", "not_breaching"), MISSING_DATA)
def test_missing_data_as_the_guide_tables_it(
    points: str, needed: int, periods: int, breaching: str, not_breaching: str
) -> None:
    window = [{"0": 0.0, "X": 1.0, "-": None}[p] for p in points.split()]
    states = {
        treat: evaluate_state(window, breaches=lambda v: v >= 1, periods=periods, needed=needed, treat=treat)
        for treat in ("breaching", "notBreaching")
    }
    assert states == {"breaching": breaching, "notBreaching": not_breaching}


# --- the refresh the runbook starts for the served fleet -------------------------------------------------------------


def _preferences(synth: Synth, group: str = GROUP) -> dict[str, Any]:
    (document,) = [
        r["Properties"]
        for k, r in synth.stack(ENV, "Fleets").resources("AWS::SSM::Document").items()
        if k.startswith("AmiRollout")
    ]
    (step,) = [
        s
        for s in document["Content"]["mainSteps"]
        if s["action"] == "aws:executeScript" and s["inputs"]["InputPayload"]["GroupName"] == group
    ]
    return step["inputs"]["InputPayload"]["Preferences"]


def launches_first(preferences: dict[str, Any]) -> bool:
    """Whether an instance refresh with these preferences launches a replacement before it terminates the node it
    replaces (RefreshPreferences, Amazon EC2 Auto Scaling API Reference): MaxHealthyPercentage left out, it
    terminates a node and launches its replacement at the same time; set, with MinHealthyPercentage 100, it
    launches first ("How an instance refresh works": launch before terminating at 100 %)."""
    if "MaxHealthyPercentage" not in preferences:
        return False
    if preferences["MinHealthyPercentage"] == 100:
        return True
    raise NotImplementedError(f"a refresh this test does not model: {preferences}")


def test_the_served_fleet_is_refreshed_launch_before_terminate_with_valid_preferences(synth: Synth) -> None:
    model = botocore.session.get_session().get_service_model("autoscaling")
    shape = model.operation_model("StartInstanceRefresh").input_shape.members["Preferences"]
    served = _preferences(synth)
    report = ParamValidator().validate(served, shape)
    assert not report.has_errors(), report.generate_report()
    low, high = served["MinHealthyPercentage"], served["MaxHealthyPercentage"]
    # The API's ranges: minimum 0-100, maximum 100-200, at most 100 apart.
    assert 0 <= low <= 100 <= high <= 200 and high - low <= 100
    assert launches_first(served)
    assert set(served["AlarmSpecification"]["Alarms"]) >= {f"{GROUP}-{a}" for a in SERVICE_ALARMS}
    # The training fleet keeps Auto Scaling's terminate-and-launch (no node above the capacity it was given).
    training = _preferences(synth, f"gpu-platform-{ENV}-training")
    assert "MaxHealthyPercentage" not in training and not launches_first(training)


# --- the rollback alarms over a timeline -----------------------------------------------------------------------------


@dataclass
class Node:
    launched: int
    in_service: int  # the minute its launch hook completes and the group registers it with the target group
    leaves: int | None = None  # the minute the refresh terminates it (deregistered at once)
    answers: bool = True  # passes the load balancer's health check once registered (3 checks 15 s apart)


def publish(nodes: list[Node], desired: Callable[[int], int], clients: int) -> dict[str, list[float | None]]:
    """Per-minute metrics of the group and its load balancer; ``clients`` requests arrive each minute."""
    samples: dict[str, list[float | None]] = {}

    def put(name: str, value: float | None) -> None:
        samples.setdefault(name, []).append(value)

    for t in range(MINUTES):
        registered = [n for n in nodes if n.in_service <= t and (n.leaves is None or t < n.leaves)]
        healthy = [n for n in registered if n.answers and t > n.in_service]
        put("GroupDesiredCapacity", desired(t))
        put("GroupInServiceInstances", len(registered))
        put("GroupPendingInstances", len([n for n in nodes if n.launched <= t < n.in_service]))
        put("HealthyHostCount", len(healthy) if registered else None)
        put("UnHealthyHostCount", len(registered) - len(healthy) if registered else None)
        # With no target the load balancer refuses with 503 and counts no request; with targets but none healthy
        # it sends to them all (fail open), and those that do not answer come back as its own 502.
        put("RequestCount", clients if registered else None)
        refused = clients if (not registered or not healthy) else 0
        put("HTTPCode_ELB_5XX_Count", refused or None)
        put("HTTPCode_Target_5XX_Count", None)
    return samples


def refresh(preferences: dict[str, Any]) -> list[Node]:
    """The one node of the fleet replaced as the preferences make Auto Scaling replace it."""
    old = Node(launched=-60, in_service=-60 + LAUNCH_MINUTES)
    new = Node(launched=START, in_service=START + LAUNCH_MINUTES)
    warmup = preferences["InstanceWarmup"] // 60
    # Launch first: the old node stops once the new one is in service, healthy and warmed up.
    old.leaves = new.in_service + warmup if launches_first(preferences) else START
    return [old, new]


def _alarms(synth: Synth) -> dict[str, dict[str, Any]]:
    return {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in synth.stack(ENV, "Monitoring").resources("AWS::CloudWatch::Alarm").values()
    }


def rollback_states(synth: Synth, samples: dict[str, list[float | None]]) -> dict[str, list[str]]:
    """Each service alarm the served fleet's refresh watches -> its state at the end of each period."""
    alarms = _alarms(synth)
    watched = _preferences(synth)["AlarmSpecification"]["Alarms"]
    return {name.removeprefix(f"{GROUP}-"): alarm_states(alarms[name], samples) for name in watched
            if name.removeprefix(f"{GROUP}-") in SERVICE_ALARMS}  # fmt: skip


def first_alarm_minute(states: list[str], period_minutes: int) -> int | None:
    return next(((k + 1) * period_minutes for k, s in enumerate(states) if s == "ALARM"), None)


def _period(synth: Synth, key: str) -> int:
    alarm = _alarms(synth)[f"{GROUP}-{key}"]
    stats = [q["MetricStat"]["Period"] for q in alarm.get("Metrics", []) if "MetricStat" in q] or [alarm["Period"]]
    return stats[0] // 60


def test_a_refresh_that_terminates_the_only_node_first_is_seen_and_rolled_back(synth: Synth) -> None:
    """The refresh as it was (90 % healthy, no maximum): the only node stops as its replacement launches, and
    clients are refused until the replacement passes its hook. The target alarms stay OK throughout (nothing is
    registered to report); the load balancer's own alarms go to ALARM while the refresh still runs."""
    before = {k: v for k, v in _preferences(synth).items() if k != "MaxHealthyPercentage"}
    before["MinHealthyPercentage"] = 90
    samples = publish(refresh(before), desired=lambda t: 1, clients=100)
    states = rollback_states(synth, samples)
    assert set(states) == set(SERVICE_ALARMS)

    assert set(states["http-5xx-rate"]) == {"OK"} and set(states["unhealthy-hosts"]) == {"OK"}
    # Still within the refresh: the replacement in service, warmed up, and the checkpoint's wait.
    prefs = _preferences(synth)
    refresh_ends = START + LAUNCH_MINUTES + (prefs["InstanceWarmup"] + prefs["CheckpointDelay"]) // 60
    for key in ("lb-5xx-rate", "no-healthy-hosts"):
        minute = first_alarm_minute(states[key], _period(synth, key))
        assert minute is not None and START < minute <= refresh_ends, (key, minute, states[key])


def test_the_refresh_as_configured_serves_throughout_and_no_rollback_alarm_fires(synth: Synth) -> None:
    samples = publish(refresh(_preferences(synth)), desired=lambda t: 1, clients=100)
    assert min(v for v in samples["HealthyHostCount"] if v is not None) >= 1  # never without a healthy node
    assert all(v is None for v in samples["HTTPCode_ELB_5XX_Count"])
    for key, states in rollback_states(synth, samples).items():
        assert set(states) == {"OK"}, key


def test_a_fleet_at_0_on_purpose_refuses_clients_without_an_alarm(synth: Synth) -> None:
    """Nights off: no node, a client polling; the load balancer answers 503 by design."""
    samples = publish([], desired=lambda t: 0, clients=10)
    assert all(v == 10 for v in samples["HTTPCode_ELB_5XX_Count"])
    for key, states in rollback_states(synth, samples).items():
        assert set(states) == {"OK"}, key


def test_a_morning_start_with_no_client_waiting_raises_no_alarm(synth: Synth) -> None:
    node = Node(launched=20, in_service=20 + LAUNCH_MINUTES)
    samples = publish([node], desired=lambda t: int(t >= 20), clients=0)
    for key, states in rollback_states(synth, samples).items():
        assert set(states) == {"OK"}, key


def test_a_node_in_service_that_the_load_balancer_never_finds_healthy_is_an_alarm(synth: Synth) -> None:
    """The hook passed (the service answered on the node) but the load balancer cannot reach it: no client needed."""
    node = Node(launched=-30, in_service=-30 + LAUNCH_MINUTES, answers=False)
    samples = publish([node], desired=lambda t: 1, clients=0)
    states = rollback_states(synth, samples)
    period = _period(synth, "no-healthy-hosts")
    assert first_alarm_minute(states["no-healthy-hosts"], period) == 2 * period  # two periods in a row
    assert set(states["lb-5xx-rate"]) == {"OK"}  # no client, no refusal


def test_the_load_balancer_alarms_read_the_load_balancer_and_the_group(synth: Synth) -> None:
    """Its 5xx are published per load balancer only (no TargetGroup dimension); the gate is the fleet's group."""
    alarms = _alarms(synth)
    for key in ("lb-5xx-rate", "no-healthy-hosts"):
        alarm = alarms[f"{GROUP}-{key}"]
        for query in alarm["Metrics"]:
            if "MetricStat" not in query:
                continue
            metric = query["MetricStat"]["Metric"]
            dimensions = {d["Name"] for d in metric["Dimensions"]}
            if metric["Namespace"] == "AWS/AutoScaling":
                assert [d["Value"] for d in metric["Dimensions"]] == [GROUP], key
            elif metric["MetricName"] == "HealthyHostCount":
                assert dimensions == {"LoadBalancer", "TargetGroup"}, key
            else:
                assert dimensions == {"LoadBalancer"}, (key, metric["MetricName"])
        assert alarm["TreatMissingData"] == "notBreaching"
    # No client at all: the rate divides 0 by 0, which drops the datapoint; IF then reads 0 (not missing).
    quiet = publish([Node(launched=-30, in_service=-18)], desired=lambda t: 1, clients=0)
    assert set(alarm_values(alarms[f"{GROUP}-lb-5xx-rate"], quiet)) == {0.0}
