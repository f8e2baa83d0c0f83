"""What the Slurm test environment's tests share: its folder and name, and reading its templates' references."""

from __future__ import annotations

from typing import Any

from tests.synth import StackTemplate, Synth

ENV = "hpc"


def referenced(synth: Synth, stack: StackTemplate, value: Any) -> tuple[StackTemplate, Any]:
    """(stack, value) with one ``Fn::GetStackOutput`` followed to the output's value in its own stack."""
    if isinstance(value, dict) and "Fn::GetStackOutput" in value:
        ref = value["Fn::GetStackOutput"]
        other = synth.stacks[ref["StackName"]]
        return other, other.json["Outputs"][ref["OutputName"]]["Value"]
    return stack, value


def logical_id(value: Any) -> str:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` names."""
    if "Ref" in value:
        return str(value["Ref"])
    return str(value["Fn::GetAtt"][0])


def by_path(stack: StackTemplate, kind: str, fragment: str) -> dict[str, dict[str, Any]]:
    """The resources of ``kind`` whose construct path contains ``fragment`` (``/Fleet-training/``)."""
    return {
        lid: r for lid, r in stack.resources(kind).items() if fragment in r.get("Metadata", {}).get("aws:cdk:path", "")
    }


def user_data_text(template: dict[str, Any]) -> str:
    """The literal text of a launch template's user data, its tokens left out."""
    data = template["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"]
    if isinstance(data, str):
        return data
    return "".join(part for part in data["Fn::Join"][1] if isinstance(part, str))
