"""Alarms of a served fleet, from its load balancer's metrics (AWS/ApplicationELB, per target group)."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Duration
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from config.alarms import Threshold
from config.fleets.service import ServiceAlarms as Thresholds
from gpu_constructs.observability.alarm_factory import ABOVE, AT_LEAST, AlarmFactory

NAMESPACE = "AWS/ApplicationELB"
#: Every service alarm judges one 5-minute period (config/fleets/service.py: "each over 5 minutes").
PERIOD_MINUTES = 5
#: Alarm keys; the alarm is named ``<prefix>-<fleet>-<key>`` like the fleet's other alarms.
HTTP_5XX_RATE = "http-5xx-rate"
P99_LATENCY = "p99-latency"
UNHEALTHY_HOSTS = "unhealthy-hosts"


@dataclass(frozen=True)
class ServiceTarget:
    """A served fleet's load balancer and target group, by the full names their metrics are dimensioned by
    (``app/<name>/<id>``, ``targetgroup/<name>/<id>``)."""

    fleet_name: str
    load_balancer_full_name: str
    target_group_full_name: str


def service_metric(
    target: ServiceTarget, metric_name: str, statistic: str, period: Duration, label: str | None = None
) -> cloudwatch.Metric:
    """``metric_name`` of the fleet's target group behind its load balancer."""
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


class ServiceAlarms(Construct):
    """Target 5xx rate, target p99 response time and unhealthy hosts of one served fleet.

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
        fleet = target.fleet_name
        period = Duration.minutes(PERIOD_MINUTES)

        def threshold(value: float) -> Threshold:
            return Threshold(threshold=value, period_minutes=PERIOD_MINUTES, evaluation_periods=1)

        t = thresholds
        self.alarms: dict[str, cloudwatch.Alarm] = {
            HTTP_5XX_RATE: factory.metric_alarm(
                self,
                HTTP_5XX_RATE,
                name=f"{fleet}-{HTTP_5XX_RATE}",
                description=f"CRITICAL {fleet}: over {t.http_5xx_percent:g} % of requests answered 5xx by the nodes",
                metric=error_rate(target, period),
                threshold=threshold(t.http_5xx_percent),
                comparison=ABOVE,
            ),
            P99_LATENCY: factory.metric_alarm(
                self,
                P99_LATENCY,
                name=f"{fleet}-{P99_LATENCY}",
                description=f"WARNING {fleet}: the nodes' p99 response time is above {t.p99_latency_seconds:g} s",
                metric=service_metric(target, "TargetResponseTime", "p99", period),
                threshold=threshold(t.p99_latency_seconds),
                comparison=ABOVE,
            ),
            # The minimum over the period: a node replaced for failing its checks is unhealthy for a minute
            # or so; hosts unhealthy for the whole period are what someone must look at.
            UNHEALTHY_HOSTS: factory.metric_alarm(
                self,
                UNHEALTHY_HOSTS,
                name=f"{fleet}-{UNHEALTHY_HOSTS}",
                description=(
                    f"CRITICAL {fleet}: at least {t.unhealthy_hosts} node(s) failed the load balancer's health "
                    f"check for {PERIOD_MINUTES} minutes"
                ),
                metric=service_metric(target, "UnHealthyHostCount", "Minimum", period),
                threshold=threshold(t.unhealthy_hosts),
                comparison=AT_LEAST,
            ),
        }
