"""What CloudFormation replaces when a deployed stack is updated from one template to another.

A resource is replaced when a create-only property changes (the CloudFormation registry schema's
``createOnlyProperties``, which cfn-lint ships), when its logical id or type changes (the old one is
deleted, a new one created), or when a create-only property refers to a resource that is replaced
(its ``Ref``/``Fn::GetAtt`` value changes), within a stack or through another stack's output
(``Fn::GetStackOutput``: the weak cross-stack reference CDK writes).

Nested create-only properties the registry schema leaves out but the CloudFormation reference marks
"Update requires: Replacement" are listed in ``DOCUMENTED_REPLACEMENT`` with their page.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

Templates = dict[str, dict[str, Any]]  # stack name -> template
Key = tuple[str, str]  # (stack name, logical id)

SCHEMA_REGION = "us-east-1"
#: Where a template of ``Templates`` carries its stack's own tags (the cloud assembly manifest's), when known.
STACK_TAGS = "x-stack-tags"

#: AWS CloudFormation Template Reference, AWS::FSx::FileSystem LustreConfiguration: these nested
#: properties say "Update requires: Replacement"; the registry schema lists only top-level ones.
DOCUMENTED_REPLACEMENT: dict[str, tuple[str, ...]] = {
    "AWS::FSx::FileSystem": (
        "/properties/LustreConfiguration/DeploymentType",
        "/properties/LustreConfiguration/DriveCacheType",
        "/properties/LustreConfiguration/EfaEnabled",
        "/properties/LustreConfiguration/ExportPath",
        "/properties/LustreConfiguration/ImportPath",
        "/properties/LustreConfiguration/ImportedFileChunkSize",
    ),
}

#: Resources that hold state, or that running nodes use: replacing one under a running environment
#: loses data, moves nodes or traffic, or fails on its fixed name.
PROTECTED_TYPES = frozenset(
    {
        "AWS::AutoScaling::AutoScalingGroup",
        "AWS::EC2::LaunchTemplate",
        "AWS::EC2::PlacementGroup",
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::VPC",
        "AWS::EC2::Subnet",
        "AWS::EFS::FileSystem",
        "AWS::ElasticLoadBalancingV2::LoadBalancer",
        "AWS::ElasticLoadBalancingV2::Listener",
        "AWS::ElasticLoadBalancingV2::TargetGroup",
        "AWS::FSx::FileSystem",
        "AWS::FSx::DataRepositoryAssociation",
        "AWS::IAM::Role",
        "AWS::IAM::InstanceProfile",
        "AWS::KMS::Key",
        "AWS::Logs::LogGroup",
        "AWS::PCS::Cluster",
        "AWS::PCS::ComputeNodeGroup",
        "AWS::PCS::Queue",
        "AWS::S3::Bucket",
        "AWS::SNS::Topic",
        "AWS::SSM::Document",
        "AWS::SSM::Parameter",
    }
)


@cache
def create_only_paths(type_: str) -> tuple[tuple[str, ...], ...]:
    """The create-only property paths of ``type_`` (without the leading "properties"), e.g. ("Tags",)."""
    if type_.startswith("Custom::") or type_ == "AWS::CloudFormation::CustomResource":
        return ()  # a custom resource's replacement is its own handler's decision (ServiceToken aside)
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(SCHEMA_REGION, type_).schema
    pointers = [*schema.get("createOnlyProperties", []), *DOCUMENTED_REPLACEMENT.get(type_, ())]
    return tuple(tuple(p.split("/")[2:]) for p in pointers)


def value_at(properties: dict[str, Any], path: tuple[str, ...]) -> Any:
    """The value at ``path`` (``*`` for every list item), or None where a part is absent."""
    value: Any = properties
    for i, part in enumerate(path):
        if part == "*":
            return [value_at(item, path[i + 1 :]) for item in value] if isinstance(value, list) else None
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def references(value: Any) -> Iterator[tuple[str, str]]:
    """("local", logical id) for each Ref/GetAtt, ("output", "stack/output") for each GetStackOutput."""
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            yield "local", value["Ref"]
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            yield "local", target[0] if isinstance(target, list) else str(target).split(".")[0]
        if "Fn::GetStackOutput" in value:
            out = value["Fn::GetStackOutput"]
            yield "output", f"{out['StackName']}/{out['OutputName']}"
        for item in value.values():
            yield from references(item)
    elif isinstance(value, list):
        for item in value:
            yield from references(item)


@dataclass(frozen=True)
class Replacement:
    stack: str
    logical_id: str
    type: str
    reason: str

    @property
    def protected(self) -> bool:
        return self.type in PROTECTED_TYPES

    def __str__(self) -> str:
        return f"{self.stack} {self.logical_id} ({self.type}): {self.reason}"


def _changed_outputs(templates: Templates, replaced: set[Key]) -> set[str]:
    """ "stack/output" of each output whose value refers to a replaced resource of its stack."""
    return {
        f"{stack}/{name}"
        for stack, template in templates.items()
        for name, output in template.get("Outputs", {}).items()
        if any(kind == "local" and (stack, ref) in replaced for kind, ref in references(output.get("Value")))
    }


def _refers_to_replaced(stack: str, value: Any, replaced: set[Key], outputs: set[str]) -> str | None:
    for kind, ref in references(value):
        if kind == "local" and (stack, ref) in replaced:
            return ref
        if kind == "output" and ref in outputs:
            return ref
    return None


def replacements(before: Templates, after: Templates) -> list[Replacement]:
    """Every resource of ``before`` that updating each stack to ``after`` replaces or deletes."""
    found: dict[Key, Replacement] = {}
    for stack, template in before.items():
        new_resources = after.get(stack, {}).get("Resources", {})
        for logical_id, old in template.get("Resources", {}).items():
            new = new_resources.get(logical_id)
            if new is None or new["Type"] != old["Type"]:
                found[(stack, logical_id)] = Replacement(stack, logical_id, old["Type"], "removed from the template")
                continue
            if ("Tags",) in create_only_paths(old["Type"]) and _stack_tags_change(template, after.get(stack, {})):
                reason = "the stack's tags change, and CloudFormation propagates them to its create-only Tags"
                found[(stack, logical_id)] = Replacement(stack, logical_id, old["Type"], reason)
                continue
            for path in create_only_paths(old["Type"]):
                old_value, new_value = (value_at(r.get("Properties", {}), path) for r in (old, new))
                if _compared(old["Type"], path, old_value) != _compared(old["Type"], path, new_value):
                    found[(stack, logical_id)] = Replacement(
                        stack, logical_id, old["Type"], f"create-only {'/'.join(path)} changes"
                    )
                    break
    _propagate(before, after, found)
    return sorted(found.values(), key=lambda r: (r.stack, r.logical_id))


def _stack_tags_change(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return STACK_TAGS in before and STACK_TAGS in after and before[STACK_TAGS] != after[STACK_TAGS]


def _propagate(before: Templates, after: Templates, found: dict[Key, Replacement]) -> None:
    """A create-only property that refers to a replaced resource (or to an output that does) changes too."""
    while True:
        outputs = _changed_outputs(before, set(found))
        added = False
        for stack, template in after.items():
            for logical_id, resource in template.get("Resources", {}).items():
                key = (stack, logical_id)
                if key in found or logical_id not in before.get(stack, {}).get("Resources", {}):
                    continue
                for path in create_only_paths(resource["Type"]):
                    target = _refers_to_replaced(
                        stack, value_at(resource.get("Properties", {}), path), set(found), outputs
                    )
                    if target is not None:
                        reason = f"create-only {'/'.join(path)} refers to {target}, which is replaced"
                        found[key] = Replacement(stack, logical_id, resource["Type"], reason)
                        added = True
                        break
        if not added:
            return


def consumers_left_behind(before: Templates, after: Templates, replaced: list[Replacement]) -> list[str]:
    """Resources in other stacks that read a replaced resource through an output (a weak reference) but
    whose own properties do not change: CloudFormation does not update them, and they keep the old value."""
    outputs = _changed_outputs(before, {(r.stack, r.logical_id) for r in replaced})
    stale = []
    for stack, template in after.items():
        for logical_id, resource in template.get("Resources", {}).items():
            old = before.get(stack, {}).get("Resources", {}).get(logical_id)
            if old is None:
                continue
            read = [ref for kind, ref in references(resource.get("Properties")) if kind == "output" and ref in outputs]
            if read and _canonical(old.get("Properties")) == _canonical(resource.get("Properties")):
                stale.append(f"{stack} {logical_id} reads {read[0]} and does not change")
    return stale


@cache
def _unordered(type_: str, top: str) -> bool:
    """Whether the registry schema says the order of list property ``top`` does not matter (insertionOrder false):
    CloudFormation compares it as a set, so a reorder changes nothing."""
    from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(SCHEMA_REGION, type_).schema
    return schema.get("properties", {}).get(top, {}).get("insertionOrder") is False


def _compared(type_: str, path: tuple[str, ...], value: Any) -> str:
    """``value`` of create-only ``path`` as CloudFormation compares it."""
    if isinstance(value, list) and len(path) == 1 and _unordered(type_, path[0]):
        return json.dumps(sorted(_canonical(item) for item in value))
    return _canonical(value)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
