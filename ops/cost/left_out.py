"""What ``cost`` does not price, each with why and where its price is: shown in the output and in
``cost --json`` (``left_out``), so that a total is never read as the whole bill."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from config.network import EgressMode
from config.schema import Environment


@dataclass(frozen=True)
class LeftOut:
    item: str
    why: str
    pricing: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def left_out(env: Environment) -> list[LeftOut]:
    """The environment's costs that depend on traffic, volume or time the config does not state."""
    items = [
        LeftOut(
            "CloudTrail data events",
            "the trail logs the data bucket's S3 data events, billed per event: depends on the requests",
            "https://aws.amazon.com/cloudtrail/pricing/",
        ),
        LeftOut(
            "VPC flow logs",
            "all traffic of the VPC is logged to CloudWatch Logs (vended logs, billed per GB): depends on traffic",
            "https://aws.amazon.com/cloudwatch/pricing/",
        ),
        LeftOut(
            "CloudWatch Logs ingestion and storage",
            "node, job, bootstrap and build logs, billed per GB ingested and stored: depends on what runs",
            "https://aws.amazon.com/cloudwatch/pricing/",
        ),
        LeftOut(
            "S3 storage and requests (versioned buckets)",
            "data, checkpoints, logs and their noncurrent versions, billed per GB-month and per request",
            "https://aws.amazon.com/s3/pricing/",
        ),
        LeftOut(
            "KMS keys and requests",
            "the platform's customer managed keys, billed per key-month and per request",
            "https://aws.amazon.com/kms/pricing/",
        ),
        LeftOut(
            "data processing and transfer",
            "NAT and endpoint processing, transfer between zones, FSx for Lustre to S3: depends on traffic",
            "https://aws.amazon.com/ec2/pricing/on-demand/#Data_Transfer",
        ),
    ]
    if env.image.build:
        items.append(
            LeftOut(
                "image builds",
                f"each Image Builder run holds a {env.image.builder_instance_type} for its build and GPU tests "
                "(schedule: image.schedule, and builds by hand): depends on how long they take",
                "https://aws.amazon.com/image-builder/pricing/",
            )
        )
    if any(f.service is not None for f in env.fleets):
        items.append(
            LeftOut(
                "load balancer capacity units",
                "LCU-hours of the served fleets' load balancers: depend on connections, requests and bytes",
                "https://aws.amazon.com/elasticloadbalancing/pricing/",
            )
        )
    if env.network.egress is EgressMode.NAT:
        items.append(
            LeftOut(
                "NAT gateway data processing",
                "billed per GB through the NAT gateways: depends on what the nodes download",
                "https://aws.amazon.com/vpc/pricing/",
            )
        )
    return items
