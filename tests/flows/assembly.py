"""One environment's cloud assembly as a flow test walks it: deploy order, references across stacks.

A flow goes from one resource to the next through the template's references: ``Ref`` and
``Fn::GetAtt`` inside a stack, ``Fn::GetStackOutput`` / ``Fn::ImportValue`` to an output of
another stack of the same environment. ``Environment.target`` follows one such reference to the
resource it names, wherever it lives.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

from tests.iam_documents import Resolver
from tests.synth import StackTemplate, Synth

#: The managed policy of AWSServiceRoleForAutoScaling (AWS managed policy reference,
#: AutoScalingServiceRolePolicy, statement SNSManagement): the one grant of it a flow here relies on.
AUTOSCALING_ROLE_PUBLISHES = {
    "Statement": [{"Sid": "SNSManagement", "Effect": "Allow", "Action": ["sns:Publish"], "Resource": "*"}]
}


def autoscaling_role(account: str) -> str:
    return f"arn:aws:iam::{account}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"


@dataclass(frozen=True)
class Ref:
    """A resource of the assembly: its stack's name and its logical id."""

    stack: str
    logical_id: str


class Environment:
    def __init__(self, synth: Synth, env: str) -> None:
        self.name = env
        self.config = synth.environments[env]
        self.account, self.region = self.config.account, self.config.region
        self.stacks: dict[str, StackTemplate] = {s.name: s for s in synth.stacks.values() if s.env == env}
        self._artifacts = {s.path.stem.removesuffix(".template"): s.name for s in self.stacks.values()}

    @cached_property
    def deploy_order(self) -> list[str]:
        """Stack names in an order CloudFormation may deploy them: each after every stack it depends on
        (the cloud assembly's ``dependencies``, asset artifacts left out)."""
        depends = {
            name: {self._artifacts[d] for d in stack.manifest.get("dependencies", []) if d in self._artifacts}
            for name, stack in self.stacks.items()
        }
        order: list[str] = []
        while len(order) < len(depends):
            ready = sorted(n for n, deps in depends.items() if n not in order and deps <= set(order))
            assert ready, f"dependency cycle among {sorted(set(depends) - set(order))}"
            order.append(ready[0])
        return order

    def resource(self, ref: Ref) -> dict[str, Any]:
        return self.stacks[ref.stack].json["Resources"][ref.logical_id]

    def resources(self, type_: str) -> list[tuple[Ref, dict[str, Any]]]:
        return [
            (Ref(name, logical_id), res)
            for name, stack in self.stacks.items()
            for logical_id, res in stack.resources(type_).items()
        ]

    def resolver(self, stack: str) -> Resolver:
        return Resolver(self.stacks[stack].json, account=self.account, region=self.region)

    def resolve(self, ref: Ref, value: Any) -> Any:
        """``value`` (a property of ``ref``'s stack) with its intrinsics replaced by concrete values."""
        return self.resolver(ref.stack).resolve(value)

    def target(self, stack: str, value: Any) -> Ref | None:
        """The resource a reference in ``stack`` names (``Ref``, ``Fn::GetAtt``, a stack output), or None."""
        if not isinstance(value, dict) or len(value) != 1:
            return None
        ((fn, arg),) = value.items()
        if fn == "Ref" and arg in self.stacks[stack].json["Resources"]:
            return Ref(stack, arg)
        if fn == "Fn::GetAtt":
            return Ref(stack, arg[0])
        if fn == "Fn::GetStackOutput":
            producer = arg["StackName"]
            assert producer in self.stacks, f"{stack} reads an output of {producer}, not a stack of {self.name}"
            return self.target(producer, self.stacks[producer].json["Outputs"][arg["OutputName"]]["Value"])
        if fn == "Fn::ImportValue":
            for name, other in self.stacks.items():
                for output in other.json.get("Outputs", {}).values():
                    if output.get("Export", {}).get("Name") == arg:
                        return self.target(name, output["Value"])
        return None

    def policy_of(self, policy_type: str, list_property: str, target: Ref) -> dict[str, Any]:
        """The resolved document of the one ``policy_type`` resource (a topic or bucket policy) attached to ``target``."""
        found = [
            (ref, res)
            for ref, res in self.resources(policy_type)
            if any(self.target(ref.stack, t) == target for t in _as_list(res["Properties"][list_property]))
        ]
        assert len(found) == 1, f"{target} has {len(found)} {policy_type}"
        ref, res = found[0]
        return self.resolve(ref, res["Properties"]["PolicyDocument"])

    def key_policy(self, key: Ref) -> dict[str, Any]:
        resource = self.resource(key)
        assert resource["Type"] == "AWS::KMS::Key", f"{key} is a {resource['Type']}, not a KMS key"
        return _strings(self.resolve(key, resource["Properties"]["KeyPolicy"]))


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _strings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v) for v in value]
    return str(value).lower() if isinstance(value, bool) else value
