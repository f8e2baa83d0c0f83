"""Rolling AMI updates: when the AMI parameter changes, refresh every fleet onto the new AMI."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from config.fleets import Refresh
from gpu_constructs.compliance.acknowledge import acknowledge
from gpu_constructs.compliance.cfn_child import cfn_child
from gpu_constructs.fleet.rollout_policy import StackArns, acknowledge_rollout_wildcards, rollout_statements

#: The script each fleet's step runs (aws:executeScript).
REFRESH_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "rollout" / "refresh_fleet.py"
SCRIPT_RUNTIME = "python3.11"
SCRIPT_TIMEOUT_SECONDS = 300
#: EventBridge: the Parameter Store change of one parameter, created or overwritten.
PARAMETER_CHANGE = "Parameter Store Change"
PARAMETER_OPERATIONS = ["Create", "Update"]


def refresh_preferences(refresh: Refresh, alarm_names: Sequence[str]) -> dict[str, Any]:
    """``StartInstanceRefresh`` preferences (API names and units) from a fleet's ``refresh:`` config
    (``Fleet.rollout``: a served fleet's carries 100 % minimum and its maximum, see config/fleets/refresh.py).

    SkipMatching is always on: a node already on the new launch template version is not replaced.
    MaxHealthyPercentage is sent only where the config sets one: left out, Auto Scaling terminates a node and
    launches its replacement at the same time; set, with 100 % minimum, it launches the replacement first and
    terminates the old node once the new one is in service, healthy and warmed up (RefreshPreferences, Amazon
    EC2 Auto Scaling API Reference). The runbook's step passes these to StartInstanceRefresh as they are.
    """
    prefs: dict[str, Any] = {
        "MinHealthyPercentage": refresh.min_healthy_percentage,
        "InstanceWarmup": refresh.instance_warmup_minutes * 60,
        "SkipMatching": True,
        "AutoRollback": refresh.auto_rollback,
    }
    if refresh.max_healthy_percentage is not None:
        prefs["MaxHealthyPercentage"] = refresh.max_healthy_percentage
    if refresh.checkpoint_percentages:
        prefs["CheckpointPercentages"] = list(refresh.checkpoint_percentages)
        prefs["CheckpointDelay"] = refresh.checkpoint_delay_minutes * 60
    if alarm_names:
        prefs["AlarmSpecification"] = {"Alarms": list(alarm_names)}
        # The last node's replacement still rolls back while its alarms evaluate (a 5-minute alarm needs two
        # periods and CloudWatch's delay): BakeTime, the wait "before the instance refresh is considered complete".
        prefs["BakeTime"] = refresh.bake_minutes * 60
    return prefs


@dataclass(frozen=True)
class FleetRollout:
    """One fleet the runbook refreshes: its group, the templates it launches from, its preferences."""

    fleet_name: str
    group_name: str
    launch_template_ids: Sequence[str]
    preferences: Mapping[str, Any] = field(default_factory=dict)

    @property
    def step_name(self) -> str:
        """Automation step names take letters, digits and underscores: ``mixed-efa`` -> ``RefreshMixedEfa``."""
        return "Refresh" + "".join(part.capitalize() for part in self.fleet_name.split("-"))


class AmiRollout(Construct):
    """An Automation runbook, its role, and the EventBridge rule that starts it on every change of
    ``parameter_name``.

    The runbook reads the AMI id from the parameter (``ReadAmi``), then runs one step per fleet
    (``scripts/rollout/refresh_fleet.py``): new launch template versions with that AMI, and an
    instance refresh with those exact versions as desired configuration and the fleet's preferences.
    A fleet step that fails does not stop the others; the execution then ends Failed.

    Attributes:
        document, role (the runbook's), rule, events_role, definition_arn (``...:$DEFAULT``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        document_name: str,
        role_name: str,
        rule_name: str,
        parameter_name: str,
        fleets: Sequence[FleetRollout],
        node_role_arn: str,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        arns = StackArns.of(stack)
        _check_step_names(fleets)
        self.role = self._runbook_role(role_name, arns)
        self._rollout_policy(arns, parameter_name, fleets, node_role_arn)
        self.document = self._runbook(document_name, parameter_name, fleets)
        self.definition_arn = arns.arn("ssm", f"automation-definition/{document_name}:$DEFAULT")
        self.events_role = self._events_role(arns, rule_arn=arns.arn("events", f"rule/{rule_name}"))
        self._start_policy(arns, document_name)
        self.rule = self._rule(rule_name, parameter_name)
        self._start_runbook_on_change(stack)

    def _runbook_role(self, role_name: str, arns: StackArns) -> iam.Role:
        """The role the runbook runs as: SSM Automation of this account only."""
        return iam.Role(
            self,
            "Role",
            role_name=role_name,
            description="GPU platform AMI rollout runbook: new launch template versions, instance refreshes",
            assumed_by=iam.ServicePrincipal(
                "ssm.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": arns.account},
                    "ArnLike": {"aws:SourceArn": arns.arn("ssm", "automation-execution/*")},
                },
            ),
        )

    def _rollout_policy(
        self, arns: StackArns, parameter_name: str, fleets: Sequence[FleetRollout], node_role_arn: str
    ) -> None:
        """What the runbook's role may do: read the parameter, new template versions, refreshes of the fleets."""
        template_arns = sorted({arns.arn("ec2", f"launch-template/{t}") for f in fleets for t in f.launch_template_ids})
        group_arns = [
            arns.arn("autoscaling", f"autoScalingGroup:*:autoScalingGroupName/{f.group_name}") for f in fleets
        ]
        policy = iam.ManagedPolicy(
            self,
            "RolloutPolicy",
            description="AMI rollout runbook: refresh this environment's fleets onto the AMI parameter's image",
            roles=[self.role],
            statements=rollout_statements(
                arns,
                parameter_arn=arns.arn("ssm", f"parameter/{parameter_name.lstrip('/')}"),
                template_arns=template_arns,
                group_arns=group_arns,
                node_role_arn=node_role_arn,
            ),
        )
        acknowledge_rollout_wildcards(policy, arns, group_arns)

    def _runbook(self, document_name: str, parameter_name: str, fleets: Sequence[FleetRollout]) -> ssm.CfnDocument:
        """The Automation document: ``ReadAmi``, then one refresh step per fleet."""
        return ssm.CfnDocument(
            self,
            "Runbook",
            name=document_name,
            document_type="Automation",
            document_format="JSON",
            update_method="NewVersion",
            content={
                "schemaVersion": "0.3",
                "description": (
                    f"Refresh the GPU fleets onto the AMI in {parameter_name}: new launch template versions, then "
                    "an instance refresh per fleet with checkpoints and auto rollback on the fleet's health alarms."
                ),
                "assumeRole": "{{ AutomationAssumeRole }}",
                "parameters": {
                    "AutomationAssumeRole": {
                        "type": "String",
                        "description": "The runbook's own role (the only one allowed)",
                        "default": self.role.role_arn,
                        "allowedValues": [self.role.role_arn],
                    }
                },
                "mainSteps": _runbook_steps(parameter_name, fleets),
                "outputs": ["ReadAmi.ImageId", *(f"{f.step_name}.Detail" for f in fleets)],
            },
        )

    def _events_role(self, arns: StackArns, *, rule_arn: str) -> iam.Role:
        """The role EventBridge starts the runbook as: the rule ``rule_arn`` of this account only."""
        return iam.Role(
            self,
            "EventsRole",
            description="EventBridge starts the AMI rollout runbook when the AMI parameter changes",
            assumed_by=iam.ServicePrincipal(
                "events.amazonaws.com",
                conditions={"StringEquals": {"aws:SourceAccount": arns.account, "aws:SourceArn": rule_arn}},
            ),
        )

    def _start_policy(self, arns: StackArns, document_name: str) -> None:
        """EventBridge's role may start the runbook (any version) and pass it the runbook's own role."""
        any_version = arns.arn("ssm", f"automation-definition/{document_name}:*")
        start = iam.ManagedPolicy(
            self,
            "StartPolicy",
            description="EventBridge: start the AMI rollout runbook as its own role",
            roles=[self.events_role],
            statements=[
                iam.PolicyStatement(
                    sid="StartRolloutRunbook", actions=["ssm:StartAutomationExecution"], resources=[any_version]
                ),
                iam.PolicyStatement(
                    sid="PassRolloutRoleToSsm",
                    actions=["iam:PassRole"],
                    resources=[self.role.role_arn],
                    conditions={"StringEquals": {"iam:PassedToService": "ssm.amazonaws.com"}},
                ),
            ],
        )
        acknowledge(
            start,
            f"AwsSolutions-IAM5[Resource::{any_version}]",
            "The runbook is named exactly; the * is its version, which each deploy of the runbook advances.",
        )

    def _rule(self, rule_name: str, parameter_name: str) -> events.Rule:
        """The rule that matches every creation or overwrite of ``parameter_name``."""
        return events.Rule(
            self,
            "Rule",
            rule_name=rule_name,
            description=f"Refresh the GPU fleets when {parameter_name} changes (AMI rollout runbook)",
            event_pattern=events.EventPattern(
                source=["aws.ssm"],
                detail_type=[PARAMETER_CHANGE],
                detail={"name": [parameter_name], "operation": PARAMETER_OPERATIONS},
            ),
        )

    def _start_runbook_on_change(self, stack: Stack) -> None:
        """The rule's target: the runbook's definition, started as the runbook's role."""
        cfn_rule = cfn_child(self.rule, events.CfnRule)
        cfn_rule.targets = [
            events.CfnRule.TargetProperty(
                id="AmiRolloutRunbook",
                arn=self.definition_arn,
                role_arn=self.events_role.role_arn,
                input=stack.to_json_string({"AutomationAssumeRole": [self.role.role_arn]}),
            )
        ]
        # The rule starts a runbook that references the document by name only.
        self.rule.node.add_dependency(self.document)


def _check_step_names(fleets: Sequence[FleetRollout]) -> None:
    names = [f.step_name for f in fleets]
    if len(set(names)) != len(names):
        raise ValueError(f"two fleets give the same runbook step name: {names}")


def _runbook_steps(parameter_name: str, fleets: Sequence[FleetRollout]) -> list[dict[str, Any]]:
    """``ReadAmi`` (the parameter's AMI id), then each fleet's refresh step."""
    script = REFRESH_SCRIPT.read_text(encoding="utf-8")
    read_ami: dict[str, Any] = {
        "name": "ReadAmi",
        "action": "aws:executeAwsApi",
        "description": f"The AMI id in {parameter_name} (written by the image pipeline)",
        "inputs": {"Service": "ssm", "Api": "GetParameter", "Name": parameter_name},
        "outputs": [{"Name": "ImageId", "Selector": "$.Parameter.Value", "Type": "String"}],
    }
    return [read_ami, *(_refresh_step(fleet, script) for fleet in fleets)]


def _refresh_step(fleet: FleetRollout, script: str) -> dict[str, Any]:
    """One fleet's step: ``script`` refreshes its group onto ``ReadAmi``'s image; a failure lets the others run."""
    return {
        "name": fleet.step_name,
        "action": "aws:executeScript",
        "description": f"Instance refresh of {fleet.group_name} onto the new AMI",
        "onFailure": "Continue",
        "isCritical": True,
        "timeoutSeconds": SCRIPT_TIMEOUT_SECONDS,
        "inputs": {
            "Runtime": SCRIPT_RUNTIME,
            "Handler": "handler",
            "Script": script,
            "InputPayload": {
                "GroupName": fleet.group_name,
                "ImageId": "{{ ReadAmi.ImageId }}",
                "Preferences": dict(fleet.preferences),
            },
        },
        "outputs": [
            {"Name": key, "Selector": f"$.Payload.{key}", "Type": "String"}
            for key in ("Status", "Detail", "InstanceRefreshId")
        ],
    }
