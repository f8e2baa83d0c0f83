"""Every IAM policy document of a synthesized template, with intrinsics resolved to plausible values.

parliament checks concrete policy JSON: the references CloudFormation resolves at
deploy time (``Ref``, ``Fn::GetAtt``, ``Fn::Join``, cross-stack outputs) are
replaced here by values of the right shape for the referenced resource type.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

# Policy-bearing properties per resource type: (property path, kind)
_DOCUMENTS = {
    "AWS::IAM::ManagedPolicy": [("PolicyDocument", "identity")],
    "AWS::IAM::Policy": [("PolicyDocument", "identity")],
    "AWS::S3::BucketPolicy": [("PolicyDocument", "resource")],
    "AWS::KMS::Key": [("KeyPolicy", "resource")],
}


@dataclass(frozen=True)
class PolicyDocument:
    stack: str
    logical_id: str
    kind: str  # identity | resource | trust
    document: dict[str, Any]


class Resolver:
    def __init__(self, template: dict[str, Any], *, account: str, region: str) -> None:
        self.resources = template.get("Resources", {})
        self.account, self.region = account, region

    def _uuid(self, logical_id: str) -> str:
        return str(uuid.uuid5(uuid.NAMESPACE_DNS, logical_id))

    def _name(self, logical_id: str) -> str:
        props = self.resources.get(logical_id, {}).get("Properties", {})
        for key in ("BucketName", "LogGroupName", "RoleName", "ManagedPolicyName", "TrailName", "TopicName", "Name"):
            if isinstance(props.get(key), str):
                return props[key]
        return logical_id.lower()

    def _arn(self, logical_id: str) -> str:
        kind = self.resources.get(logical_id, {}).get("Type", "")
        name, acct, reg = self._name(logical_id), self.account, self.region
        return {
            "AWS::S3::Bucket": f"arn:aws:s3:::{name}",
            "AWS::KMS::Key": f"arn:aws:kms:{reg}:{acct}:key/{self._uuid(logical_id)}",
            "AWS::Logs::LogGroup": f"arn:aws:logs:{reg}:{acct}:log-group:{name}:*",
            "AWS::IAM::Role": f"arn:aws:iam::{acct}:role/{name}",
            "AWS::IAM::ManagedPolicy": f"arn:aws:iam::{acct}:policy/{name}",
            "AWS::CloudTrail::Trail": f"arn:aws:cloudtrail:{reg}:{acct}:trail/{name}",
            "AWS::SNS::Topic": f"arn:aws:sns:{reg}:{acct}:{name}",
        }.get(kind, f"arn:aws:unknown:{reg}:{acct}:{name}")

    def _ref(self, target: str) -> str:
        pseudo = {
            "AWS::Partition": "aws",
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": "stack",
        }
        if target in pseudo:
            return pseudo[target]
        kind = self.resources.get(target, {}).get("Type", "")
        if kind == "AWS::KMS::Key":
            return self._uuid(target)
        if kind in ("AWS::IAM::ManagedPolicy", "AWS::SNS::Topic"):  # Ref of these is their ARN
            return self._arn(target)
        return self._name(target)

    def _output(self, output_name: str) -> str:
        # Cross-stack references: the output name carries the producing resource and attribute.
        lowered = output_name.lower()
        if "key" in lowered and "arn" in lowered:
            return f"arn:aws:kms:{self.region}:{self.account}:key/{self._uuid(output_name)}"
        if "bucket" in lowered and "arn" in lowered:
            return f"arn:aws:s3:::{output_name.lower()}"
        if "loggroup" in lowered and "arn" in lowered:
            return f"arn:aws:logs:{self.region}:{self.account}:log-group:{output_name}:*"
        if "role" in lowered and "arn" in lowered:
            return f"arn:aws:iam::{self.account}:role/{output_name}"
        return output_name

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((fn, arg),) = value.items()
            if fn == "Ref":
                return self._ref(arg)
            if fn == "Fn::GetAtt":
                return self._arn(arg[0]) if arg[1] == "Arn" else f"{arg[0]}.{arg[1]}"
            if fn == "Fn::Join":
                return arg[0].join(str(self.resolve(p)) for p in arg[1])
            if fn in ("Fn::GetStackOutput",):
                return self._output(arg["OutputName"])
            if fn == "Fn::ImportValue":
                return self._output(str(self.resolve(arg)))
        return {k: self.resolve(v) for k, v in value.items()}


def _strings(value: Any) -> Any:
    """IAM compares condition values as strings; parliament expects them so."""
    if isinstance(value, dict):
        return {k: _strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v) for v in value]
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return str(value)
    return value


def policy_documents(stack_name: str, template: dict[str, Any], *, account: str, region: str) -> list[PolicyDocument]:
    resolver = Resolver(template, account=account, region=region)
    resolve = lambda value: _strings(resolver.resolve(value))  # noqa: E731
    found = []
    for logical_id, res in template.get("Resources", {}).items():
        props = res.get("Properties", {})
        for prop, kind in _DOCUMENTS.get(res["Type"], []):
            if prop in props:
                found.append(PolicyDocument(stack_name, logical_id, kind, resolve(props[prop])))
        if res["Type"] == "AWS::IAM::Role":
            for inline in props.get("Policies", []):
                found.append(PolicyDocument(stack_name, logical_id, "identity", resolve(inline["PolicyDocument"])))
            found.append(PolicyDocument(stack_name, logical_id, "trust", resolve(props["AssumeRolePolicyDocument"])))
    return found
