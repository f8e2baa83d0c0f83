"""Refresh one GPU fleet onto a new AMI: the step the AMI rollout runbook runs for each fleet.

It runs inside SSM Automation (``aws:executeScript``, Python 3.11, handler ``handler``) under the
runbook's role; ``gpu_constructs/fleet/ami_rollout.py`` embeds this file in the runbook. Input payload:
``GroupName``, ``ImageId`` (read from the AMI parameter by the runbook's first step) and
``Preferences`` (the instance refresh preferences, from the fleet's ``refresh:`` config).

1. Reads the group and the launch template version of each of its templates (a mixed-instances
   group may name one template per EFA layout in its overrides).
2. If every template already launches ``ImageId``, does nothing (a repeated or spurious parameter
   event must not replace a fleet's nodes).
3. Creates, per template, a new numbered version from the group's current version with only the
   ``ImageId`` changed.
4. Starts an instance refresh whose desired configuration names exactly those versions (the mixed
   instances policy restated with its overrides and distribution), so that auto rollback has a
   numbered version to return to and the group moves to the new versions only if the refresh succeeds.

Only ``boto3`` and ``botocore``: the Automation runtime has nothing else.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

#: aws:executeScript does not retry throttled calls itself.
RETRIES = Config(retries={"mode": "standard", "max_attempts": 8})
#: Launch template versions the instance refresh cannot roll back to.
ALIAS_VERSIONS = ("$Latest", "$Default")
#: Keys of a mixed instances policy's distribution that StartInstanceRefresh takes back as they are.
DISTRIBUTION_KEYS = (
    "OnDemandAllocationStrategy",
    "OnDemandBaseCapacity",
    "OnDemandPercentageAboveBaseCapacity",
    "SpotAllocationStrategy",
    "SpotInstancePools",
    "SpotMaxPrice",
)


class RolloutError(Exception):
    """The fleet cannot be refreshed as asked; the message says why and what to do."""


def handler(events: dict[str, Any], context: Any) -> dict[str, str]:
    """Entry point of the ``aws:executeScript`` step."""
    return refresh_fleet(
        events,
        autoscaling=boto3.client("autoscaling", config=RETRIES),
        ec2=boto3.client("ec2", config=RETRIES),
    )


def refresh_fleet(events: dict[str, Any], *, autoscaling: Any, ec2: Any) -> dict[str, str]:
    """Start the fleet's instance refresh onto ``events["ImageId"]``, or say why nothing was needed.

    Returns ``Status`` (``started`` or ``skipped``), ``Detail`` and ``InstanceRefreshId`` (empty
    when skipped): strings, as the runbook's outputs declare them.
    """
    group_name, image_id = events["GroupName"], events["ImageId"]
    preferences = dict(events["Preferences"])
    if not image_id.startswith("ami-"):
        raise RolloutError(f"{group_name}: {image_id!r} is not an AMI id; fix: put an ami-... id in the AMI parameter")
    group = _group(autoscaling, group_name)
    current = _current_versions(ec2, group_name, group, preferences)
    if all(v["LaunchTemplateData"].get("ImageId") == image_id for v in current.values()):
        return {
            "Status": "skipped",
            "Detail": f"{group_name} already launches {image_id}: nothing to replace",
            "InstanceRefreshId": "",
        }
    new_versions = _new_versions(ec2, current, image_id)
    refresh_id = _start_refresh(autoscaling, group_name, group, new_versions, preferences)
    versions = ", ".join(f"{t} v{v}" for t, v in new_versions.items())
    return {
        "Status": "started",
        "Detail": f"{group_name}: instance refresh {refresh_id} to {image_id} ({versions})",
        "InstanceRefreshId": refresh_id,
    }


def _group(autoscaling: Any, group_name: str) -> dict[str, Any]:
    """The Auto Scaling group ``group_name``, as DescribeAutoScalingGroups returns it."""
    groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group_name])["AutoScalingGroups"]
    if not groups:
        raise RolloutError(
            f"{group_name}: no such Auto Scaling group; fix: deploy the Fleets stack of this environment"
        )
    return groups[0]


def _current_versions(
    ec2: Any, group_name: str, group: dict[str, Any], preferences: dict[str, Any]
) -> dict[str, dict[str, Any]]:
    """Launch template id -> the version the group launches, as DescribeLaunchTemplateVersions returns it.

    With auto rollback, a template used as ``$Latest`` or ``$Default`` is refused: the refresh could not
    roll back to it.
    """
    current = {}
    for template_id, version in template_versions(group):
        if version in ALIAS_VERSIONS and preferences.get("AutoRollback"):
            raise RolloutError(
                f"{group_name}: launch template {template_id} is used as {version}, which an instance refresh cannot "
                "roll back to; fix: deploy the Fleets stack (it pins numbered versions)"
            )
        (described,) = ec2.describe_launch_template_versions(LaunchTemplateId=template_id, Versions=[version])[
            "LaunchTemplateVersions"
        ]
        current[template_id] = described
    return current


def _new_versions(ec2: Any, current: dict[str, dict[str, Any]], image_id: str) -> dict[str, str]:
    """Launch template id -> the number of its new version: the current one with only ``ImageId`` changed."""
    new_versions = {}
    for template_id, described in current.items():
        created = ec2.create_launch_template_version(
            LaunchTemplateId=template_id,
            SourceVersion=str(described["VersionNumber"]),
            VersionDescription=f"AMI rollout: {image_id} (from version {described['VersionNumber']})",
            LaunchTemplateData={"ImageId": image_id},
        )
        new_versions[template_id] = str(created["LaunchTemplateVersion"]["VersionNumber"])
    return new_versions


def _start_refresh(
    autoscaling: Any,
    group_name: str,
    group: dict[str, Any],
    new_versions: dict[str, str],
    preferences: dict[str, Any],
) -> str:
    """Start the group's rolling instance refresh onto ``new_versions``; its id. One in progress is refused."""
    try:
        return autoscaling.start_instance_refresh(
            AutoScalingGroupName=group_name,
            Strategy="Rolling",
            DesiredConfiguration=desired_configuration(group, new_versions),
            Preferences=preferences,
        )["InstanceRefreshId"]
    except ClientError as err:
        if err.response["Error"]["Code"] == "InstanceRefreshInProgress":
            raise RolloutError(
                f"{group_name}: an instance refresh is already in progress; fix: let it finish (or cancel it with "
                "aws autoscaling cancel-instance-refresh), then run the runbook again"
            ) from err
        raise


def template_versions(group: dict[str, Any]) -> list[tuple[str, str]]:
    """(launch template id, version) of every template the group launches from, each once, in order."""
    specs = []
    if "LaunchTemplate" in group:
        specs.append(group["LaunchTemplate"])
    policy = group.get("MixedInstancesPolicy")
    if policy:
        specs.append(policy["LaunchTemplate"]["LaunchTemplateSpecification"])
        specs.extend(
            o["LaunchTemplateSpecification"]
            for o in policy["LaunchTemplate"].get("Overrides", [])
            if "LaunchTemplateSpecification" in o
        )
    if not specs:
        raise RolloutError(
            f"{group['AutoScalingGroupName']}: the group has no launch template; fix: deploy the Fleets stack"
        )
    seen: dict[str, str] = {}
    for spec in specs:
        template_id, version = spec["LaunchTemplateId"], spec.get("Version", "$Default")
        if seen.setdefault(template_id, version) != version:
            raise RolloutError(
                f"{group['AutoScalingGroupName']}: launch template {template_id} is used at two versions "
                f"({seen[template_id]} and {version}); fix: deploy the Fleets stack"
            )
    return list(seen.items())


def desired_configuration(group: dict[str, Any], new_versions: dict[str, str]) -> dict[str, Any]:
    """The group's own launch configuration with every template at its new version.

    A mixed instances policy is restated whole (overrides and distribution as the group has them),
    since the desired configuration replaces the group's policy when the refresh succeeds.
    """

    def spec(template_id: str) -> dict[str, str]:
        return {"LaunchTemplateId": template_id, "Version": new_versions[template_id]}

    if "LaunchTemplate" in group:
        return {"LaunchTemplate": spec(group["LaunchTemplate"]["LaunchTemplateId"])}
    policy = group["MixedInstancesPolicy"]
    template = policy["LaunchTemplate"]
    overrides = []
    for override in template.get("Overrides", []):
        restated = {k: v for k, v in override.items() if k != "LaunchTemplateSpecification"}
        if "LaunchTemplateSpecification" in override:
            restated["LaunchTemplateSpecification"] = spec(override["LaunchTemplateSpecification"]["LaunchTemplateId"])
        overrides.append(restated)
    distribution = {
        k: v for k, v in policy.get("InstancesDistribution", {}).items() if k in DISTRIBUTION_KEYS and v != ""
    }
    mixed: dict[str, Any] = {
        "LaunchTemplate": {
            "LaunchTemplateSpecification": spec(template["LaunchTemplateSpecification"]["LaunchTemplateId"]),
            "Overrides": overrides,
        }
    }
    if distribution:
        mixed["InstancesDistribution"] = distribution
    return {"MixedInstancesPolicy": mixed}
