"""Alarms of a served fleet, from its load balancer's metrics (AWS/ApplicationELB) and its group's (AWS/AutoScaling).

What the targets answer is per target group; what the load balancer answers itself (HTTPCode_ELB_5XX_Count: a 503
when no target is healthy, a 502 or 504 when none answers) is per load balancer only, and HealthyHostCount is
reported only while targets are registered: a fleet whose only node was replaced has no target, so no unhealthy
host either (CloudWatch metrics for your Application Load Balancer). Each served fleet has a load balancer of its
own, so the load balancer's own metrics are the fleet's.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from config.alarms import Threshold
from config.fleets.service import ServiceAlarmThresholds as Thresholds
from gpu_constructs.observability.alarm_factory import ABOVE, AT_LEAST, AlarmFactory

NAMESPACE = "AWS/ApplicationELB"
GROUP_NAMESPACE = "AWS/AutoScaling"
#: Every service alarm judges 5-minute periods (config/fleets/service.py: "each over 5 minutes").
PERIOD_MINUTES = 5
#: Alarm keys; the alarm is named ``<prefix>-<fleet>-<key>`` like the fleet's other alarms.
HTTP_5XX_RATE = "http-5xx-rate"
P99_LATENCY = "p99-latency"
UNHEALTHY_HOSTS = "unhealthy-hosts"
LB_5XX_RATE = "lb-5xx-rate"
NO_HEALTHY_HOSTS = "no-healthy-hosts"
#: ``no-healthy-hosts`` fills a missing HealthyHostCount with 0; CloudWatch warns that a FILL in an alarm reads the
#: newest period as filled when its datapoint comes late (Use metric math, FILL), so two periods in a row must
#: breach, as it advises (M out of N).
NO_HEALTHY_HOSTS_PERIODS = 2
#: Metrics the load balancer publishes with the LoadBalancer dimension but never with TargetGroup.
LOAD_BALANCER_ONLY = frozenset(
    {
        "HTTPCode_ELB_5XX_Count",
        "HTTPCode_ELB_500_Count",
        "HTTPCode_ELB_502_Count",
        "HTTPCode_ELB_503_Count",
        "HTTPCode_ELB_504_Count",
        "HTTPCode_ELB_4XX_Count",
    }
)


@dataclass(frozen=True)
class ServiceTarget:
    """A served fleet's load balancer and target group, by the full names their metrics are dimensioned by
    (``app/<name>/<id>``, ``targetgroup/<name>/<id>``), and its Auto Scaling group (empty: ``<prefix>-<fleet>``,
    ``ResourceNames.asg_name``, with the alarm factory's prefix)."""

    fleet_name: str
    load_balancer_full_name: str
    target_group_full_name: str
    group_name: str = ""


def load_balancer_metric(
    target: ServiceTarget, metric_name: str, statistic: str, period: Duration, label: str | None = None
) -> cloudwatch.Metric:
    """``metric_name`` of the fleet's load balancer as a whole (the LoadBalancer dimension alone)."""
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=metric_name,
        dimensions_map={"LoadBalancer": target.load_balancer_full_name},
        statistic=statistic,
        period=period,
        label=label,
    )


def service_metric(
    target: ServiceTarget, metric_name: str, statistic: str, period: Duration, label: str | None = None
) -> cloudwatch.Metric:
    """``metric_name`` of the fleet's target group behind its load balancer; a metric the load balancer publishes
    only as a whole (``LOAD_BALANCER_ONLY``) is read without the TargetGroup dimension, which it never has."""
    if metric_name in LOAD_BALANCER_ONLY:
        return load_balancer_metric(target, metric_name, statistic, period, label)
    return cloudwatch.Metric(
        namespace=NAMESPACE,
        metric_name=metric_name,
        dimensions_map={
            "LoadBalancer": target.load_balancer_full_name,
            "TargetGroup": target.target_group_full_name,
        },
        statistic=statistic,
        period=period,
        label=label,
    )


def group_metric(group_name: str, metric_name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
    """An Auto Scaling group metric (the fleets collect them all, one datapoint a minute)."""
    return cloudwatch.Metric(
        namespace=GROUP_NAMESPACE,
        metric_name=metric_name,
        dimensions_map={"AutoScalingGroupName": group_name},
        statistic=statistic,
        period=period,
    )


def error_rate(target: ServiceTarget, period: Duration) -> cloudwatch.MathExpression:
    """Percent of requests the targets answered 5xx. ELB publishes a count only when it is not zero: no 5xx
    is a zero, no request at all is no data (the alarm treats it as not breaching)."""
    return cloudwatch.MathExpression(
        expression="100 * FILL(errors, 0) / requests",
        using_metrics={
            "errors": service_metric(target, "HTTPCode_Target_5XX_Count", "Sum", period),
            "requests": service_metric(target, "RequestCount", "Sum", period),
        },
        label="target 5xx (% of requests)",
        period=period,
    )


def refused_rate(target: ServiceTarget, group_name: str, period: Duration) -> cloudwatch.MathExpression:
    """Percent of requests the load balancer answered 5xx itself, while the group wanted a node all period.

    RequestCount counts only requests for which the load balancer chose a target, so those it refused are added
    to it: with no target at all the rate is 100 %. No request at all divides by zero, which drops the datapoint,
    and IF then reads 0. A group at 0 nodes on purpose (a schedule) answers 503 by design: not counted."""
    return cloudwatch.MathExpression(
        expression="IF(desired >= 1, 100 * FILL(refused, 0) / (FILL(refused, 0) + FILL(requests, 0)), 0)",
        using_metrics={
            "refused": load_balancer_metric(target, "HTTPCode_ELB_5XX_Count", "Sum", period),
            "requests": load_balancer_metric(target, "RequestCount", "Sum", period),
            "desired": group_metric(group_name, "GroupDesiredCapacity", "Minimum", period),
        },
        label="load balancer 5xx (% of requests) while nodes are wanted",
        period=period,
    )


def no_healthy_host(target: ServiceTarget, group_name: str, period: Duration) -> cloudwatch.MathExpression:
    """1 for a period in which the load balancer had no healthy target at all while the group wanted a node all
    period and either had one in service all period or clients were refused; else 0.

    HealthyHostCount is missing, not 0, when no target is registered (a node replaced, none in service yet), so
    it is filled with 0. A fleet started from 0 with no client waiting (a morning schedule) is not an outage; a
    node in service that the load balancer never finds healthy is, and so is a client refused."""
    return cloudwatch.MathExpression(
        expression="IF(desired >= 1 AND (inservice >= 1 OR FILL(refused, 0) > 0) AND FILL(healthy, 0) < 1, 1, 0)",
        using_metrics={
            "healthy": service_metric(target, "HealthyHostCount", "Maximum", period),
            "refused": load_balancer_metric(target, "HTTPCode_ELB_5XX_Count", "Sum", period),
            "desired": group_metric(group_name, "GroupDesiredCapacity", "Minimum", period),
            "inservice": group_metric(group_name, "GroupInServiceInstances", "Minimum", period),
        },
        label="no healthy target while nodes are wanted (1) or not (0)",
        period=period,
    )


class ServiceAlarms(Construct):
    """Target 5xx rate, target p99 response time and unhealthy hosts of one served fleet, and the load balancer's own
    view: the share of requests it refused with 5xx and periods with no healthy target (the rollback alarms that
    see a fleet with no node to send to; config/fleets/refresh.py).

    Attributes:
        alarms (key -> alarm).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        target: ServiceTarget,
        thresholds: Thresholds,
        factory: AlarmFactory,
    ) -> None:
        super().__init__(scope, construct_id)
        self._fleet = target.fleet_name
        self._factory = factory
        group = target.group_name or f"{factory.prefix}-{self._fleet}"
        period = Duration.minutes(PERIOD_MINUTES)
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self._target_alarms(target, thresholds, period)
        self._load_balancer_alarms(target, group, thresholds, period)

    def _add(
        self,
        key: str,
        *,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: Threshold,
        comparison: cloudwatch.ComparisonOperator,
    ) -> None:
        """The alarm ``key``, named ``<prefix>-<fleet>-<key>``, into ``alarms``."""
        self.alarms[key] = self._factory.metric_alarm(
            self,
            key,
            name=f"{self._fleet}-{key}",
            description=description,
            metric=metric,
            threshold=threshold,
            comparison=comparison,
        )

    def _target_alarms(self, target: ServiceTarget, t: Thresholds, period: Duration) -> None:
        """What the nodes answer: 5xx rate, p99 response time, hosts failing the health check."""
        fleet = self._fleet
        self._add(
            HTTP_5XX_RATE,
            description=f"CRITICAL {fleet}: over {t.http_5xx_percent:g} % of requests answered 5xx by the nodes",
            metric=error_rate(target, period),
            threshold=_one_period(t.http_5xx_percent),
            comparison=ABOVE,
        )
        self._add(
            P99_LATENCY,
            description=f"WARNING {fleet}: the nodes' p99 response time is above {t.p99_latency_seconds:g} s",
            metric=service_metric(target, "TargetResponseTime", "p99", period),
            threshold=_one_period(t.p99_latency_seconds),
            comparison=ABOVE,
        )
        # The minimum over the period: a node replaced for failing its checks is unhealthy for a minute
        # or so; hosts unhealthy for the whole period are what someone must look at.
        self._add(
            UNHEALTHY_HOSTS,
            description=(
                f"CRITICAL {fleet}: at least {t.unhealthy_hosts} node(s) failed the load balancer's health "
                f"check for {PERIOD_MINUTES} minutes"
            ),
            metric=service_metric(target, "UnHealthyHostCount", "Minimum", period),
            threshold=_one_period(t.unhealthy_hosts),
            comparison=AT_LEAST,
        )

    def _load_balancer_alarms(self, target: ServiceTarget, group: str, t: Thresholds, period: Duration) -> None:
        """What the load balancer answers itself while ``group`` wants nodes: 5xx rate, no healthy target."""
        fleet = self._fleet
        self._add(
            LB_5XX_RATE,
            description=(
                f"CRITICAL {fleet}: over {t.http_5xx_percent:g} % of requests answered 5xx by the load balancer "
                "itself (no healthy node to send them to, or none answering) while the group wants nodes"
            ),
            metric=refused_rate(target, group, period),
            threshold=_one_period(t.http_5xx_percent),
            comparison=ABOVE,
        )
        self._add(
            NO_HEALTHY_HOSTS,
            description=(
                f"CRITICAL {fleet}: the load balancer had no healthy node for "
                f"{PERIOD_MINUTES * NO_HEALTHY_HOSTS_PERIODS} minutes while the group wants nodes and has one "
                "in service or clients were refused"
            ),
            metric=no_healthy_host(target, group, period),
            threshold=Threshold(
                threshold=1, period_minutes=PERIOD_MINUTES, evaluation_periods=NO_HEALTHY_HOSTS_PERIODS
            ),
            comparison=AT_LEAST,
        )


def _one_period(value: float) -> Threshold:
    """``value`` breached over one period of ``PERIOD_MINUTES``."""
    return Threshold(threshold=value, period_minutes=PERIOD_MINUTES, evaluation_periods=1)
