"""A failed or stopped golden-AMI build reaches a person: an EventBridge rule on Image Builder's image state changes.

Image Builder sends ``EC2 Image Builder Image State Change`` (source ``aws.imagebuilder``) to the default event
bus each time an image changes state; ``detail.state.status`` is the new status, ``resources`` holds the image's
ARN, ``arn:<partition>:imagebuilder:<region>:<account>:image/<image name>/<version>/<build>`` (EC2 Image Builder
user guide, "Event messages that Image Builder sends"). A build ends in AVAILABLE, FAILED or CANCELLED; this rule
takes the last two, for this environment's image only (the image name is the pipeline's recipe name), and sends
the alerts topic one message that names the image, why it ended (``detail.state.reason``, Image Builder's reason
for the status: ImageState in the Image Builder API reference), the stage it ended in (``detail.previous-state.status``,
e.g. BUILDING, TESTING or DISTRIBUTING) and where its logs are: the image's log group, whose stream is the image's
version/build (Image Builder user guide, "Monitor Image Builder logs with Amazon CloudWatch Logs"), the components'
logs in the build log bucket, and the pipeline's log group.

A build that fails while DISTRIBUTING has already made the AMI and may have copied it, and written its id to the AMI
parameters, in some targets: the message says so for that stage, since an input transformer cannot choose its text.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_sns as sns
from constructs import Construct

SOURCE = "aws.imagebuilder"
DETAIL_TYPE = "EC2 Image Builder Image State Change"
#: The end states of a build that produce no image: failed, or stopped (CancelImageCreation).
ALERT_STATUSES = ("FAILED", "CANCELLED")
#: What the message takes from the event: the image's ARN, its end status and why, the stage it was in, when.
INPUT_PATHS = {
    "image": "$.resources[0]",
    "status": "$.detail.state.status",
    "reason": "$.detail.state.reason",
    "stage": "$.detail.previous-state.status",
    "time": "$.time",
}


@dataclass(frozen=True)
class BuildLogPlaces:
    """Where a build's logs are: ``image_log_group`` (a stream per image version/build), ``pipeline_log_group``,
    and the components' logs under ``s3://<log_bucket>/<log_prefix>/``."""

    image_log_group: str
    pipeline_log_group: str
    log_bucket: str
    log_prefix: str


class BuildFailureAlerts(Construct):
    """The rule ``rule_name`` (the alerts topic's policy admits this environment's ``gpu-platform-<env>-*`` rules)
    on the end states of ``image_name``'s builds in ``ALERT_STATUSES``, to ``topic`` with a message of its own.

    Attributes: rule (the CfnRule).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        rule_name: str,
        image_name: str,
        topic: sns.ITopic,
        logs: BuildLogPlaces,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        images = f"arn:{stack.partition}:imagebuilder:{stack.region}:{stack.account}:image/{image_name}/"
        # The topic by ARN only: its policy and the alerts key already admit this account's EventBridge rules.
        self.rule = events.CfnRule(
            self,
            "Rule",
            name=rule_name,
            description=f"A build of the golden AMI {image_name} failed or was stopped: to the alerts topic",
            state="ENABLED",
            event_pattern={
                "source": [SOURCE],
                "detail-type": [DETAIL_TYPE],
                "resources": [{"prefix": images}],
                "detail": {"state": {"status": list(ALERT_STATUSES)}},
            },
            targets=[
                events.CfnRule.TargetProperty(
                    id="AlertsTopic",
                    arn=topic.topic_arn,
                    input_transformer=events.CfnRule.InputTransformerProperty(
                        input_paths_map=INPUT_PATHS,
                        input_template=message(image_name, logs),
                    ),
                )
            ],
        )


def message(image_name: str, logs: BuildLogPlaces) -> str:
    """The input template: a JSON string (SNS sends it as the e-mail's text) with <image>, <status>, <reason>,
    <stage> and <time>."""
    text = (
        f"ERROR: a build of the golden AMI {image_name} ended <status> at <time> while <stage>: <reason>. "
        "Image: <image>. Ended while BUILDING or TESTING: no AMI was distributed, the fleets keep the AMI they run. "
        "Ended while DISTRIBUTING: the AMI passed its tests and may have been distributed to some targets, not "
        "others (a copy there, its AMI parameter moved to it): compare the targets' AMI parameters. "
        f"Build log: CloudWatch Logs group {logs.image_log_group}, stream VERSION/BUILD (the end of the image ARN); "
        f"component logs: s3://{logs.log_bucket}/{logs.log_prefix}/; pipeline log: {logs.pipeline_log_group}. "
        "Fix: read the first ERROR line of the build log, then start the pipeline again (docs/operations.md, "
        "Building a new AMI)."
    )
    return f'"{text}"'
