"""Upgrading a deployed environment: no physical name changes hands in a way CloudFormation undoes.

When an update removes a resource, CloudFormation deletes it in the update's cleanup phase, after
every new resource exists (unless the removed resource's DeletionPolicy is Retain). If a new resource,
or a property list of a kept one, declares the removed resource's physical name (a lifecycle hook, a
log group, a topic, a parameter), that cleanup deletes what the new declaration just created or
adopted, and the template says it exists while it does not.

This compares the templates of the first release (git tag ``release-1``) with the current snapshots (JSON only, no
synth). A physical name a removed resource held may be declared again only by the same logical id
and type (the same resource), or where the removed resource was retained, or where ``MOVED`` names
the documented migration (README.md, Security: stack refactoring for the alerts topic and the node
log groups moved to ``<env>-Security``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from config.upgrades import LAST_RELEASE_RETAINING_IT, LEGACY_LOGICAL_ID

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = Path("tests/snapshot/__snapshots__/test_snapshots")
#: The first release (git tag): what the oldest deployed environments run.
RELEASED = "release-1"
#: The release that keeps the released AMI parameter resource, retained (LAST_RELEASE_RETAINING_IT).
RETAINING = "release-2"
ENVS = ("dev", "staging", "prod")
STACKS = ("Security", "Network", "Storage", "Image", "Fleets", "Monitoring")
#: The released AMI parameter resource: removed now. A stack that still holds it without Retain must deploy
#: RETAINING first, which gpu-platform preflight enforces (tests/ops/preflight: the legacy parameter check).
GUARDED = frozenset((f"{env}-Image", LEGACY_LOGICAL_ID) for env in ENVS)
#: Properties that name the physical resource (top level of Properties).
NAME_KEYS = frozenset(
    {
        "AlarmName",
        "AliasName",
        "AutoScalingGroupName",
        "BucketName",
        "DocumentName",
        "LifecycleHookName",
        "LogGroupName",
        "ManagedPolicyName",
        "Name",
        "ParameterName",
        "RoleName",
        "RuleName",
        "TopicName",
        "TrailName",
    }
)
#: (stack, logical id) of removed resources whose name moved by stack refactoring (README.md, Security,
#: "Moving an environment deployed before the topic and the node log groups moved to <env>-Security").
MOVED = frozenset(
    (f"{env}-Fleets", logical_id)
    for env in ENVS
    for logical_id in (
        "AlertsTopicCF7C81C9",
        "NodeLogBootstrap02571E60",
        "NodeLogGpuHealth0D5C8BD5",
        "NodeLogLifecycleWatcher1EC68244",
        "NodeLogSpotWatcherABF2B4F4",
    )
)


def _snapshot_path(stack: str) -> Path:
    return SNAPSHOTS / f"test_template_snapshot[{stack}].json"


@cache
def _released(stack: str, commit: str = RELEASED) -> dict[str, Any]:
    shown = subprocess.run(
        ["git", "show", f"{commit}:{_snapshot_path(stack).as_posix()}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(shown.stdout)


@cache
def _current(stack: str) -> dict[str, Any]:
    return json.loads((ROOT / _snapshot_path(stack)).read_text())


def _released_available() -> str | None:
    """Why the released templates cannot be read here, or None."""
    if shutil.which("git") is None:
        return "git is not installed"
    probe = subprocess.run(["git", "cat-file", "-e", f"{RELEASED}^{{commit}}"], cwd=ROOT, capture_output=True)
    if probe.returncode != 0:
        return f"the checkout has no release tag {RELEASED} (a shallow clone, or tags not fetched: git fetch --tags)"
    return None


pytestmark = pytest.mark.skipif(_released_available() is not None, reason=str(_released_available()))


def declared_names(resource: dict[str, Any]) -> set[str]:
    """Physical names a resource declares: its name properties, the hooks of a group's specification
    list, and the ``Name`` a custom resource's SDK call passes (the AMI parameter seed)."""
    props = resource.get("Properties", {})
    names = {v for k, v in props.items() if k in NAME_KEYS and isinstance(v, str)}
    names |= {spec["LifecycleHookName"] for spec in props.get("LifecycleHookSpecificationList", [])}
    for call in ("Create", "Update"):
        payload = _sdk_call_text(props.get(call))
        if payload is not None:
            parameters = json.loads(payload).get("parameters", {})
            if isinstance(parameters.get("Name"), str):
                names.add(parameters["Name"])
    return names


def _sdk_call_text(payload: Any) -> str | None:
    """A custom resource's SDK call as JSON text; the parts CloudFormation resolves (an AMI id) as "?"."""
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict) and "Fn::Join" in payload:
        separator, parts = payload["Fn::Join"]
        return separator.join(part if isinstance(part, str) else "?" for part in parts)
    return None


def reclaimed_names(
    released: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]]
) -> Iterator[tuple[str, str, str, str, str]]:
    """(old stack, old logical id, name, new stack, new logical id) for each name a removed, unretained
    resource of ``released`` held that ``current`` declares again; templates keyed by stack name."""
    for stack, template in released.items():
        for logical_id, resource in template["Resources"].items():
            kept = current[stack]["Resources"].get(logical_id)
            if kept is not None and kept["Type"] == resource["Type"]:
                continue
            if resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate"):
                continue
            for name in declared_names(resource):
                for new_stack, new_template in current.items():
                    for new_id, new_resource in new_template["Resources"].items():
                        if name in declared_names(new_resource):
                            yield stack, logical_id, name, new_stack, new_id


def _stacks(env: str) -> list[str]:
    return [f"{env}-{stack}" for stack in STACKS]


@pytest.mark.parametrize("env", ENVS)
def test_no_removed_resource_takes_a_name_with_it_that_the_new_templates_declare(env: str) -> None:
    released = {stack: _released(stack) for stack in _stacks(env)}
    current = {stack: _current(stack) for stack in _stacks(env)}
    found = list(reclaimed_names(released, current))
    assert [f for f in found if (f[0], f[1]) not in MOVED | GUARDED] == []
    # The scan reads real templates: it sees the documented move of the (unretained) alerts topic.
    assert (f"{env}-Fleets", "AlertsTopicCF7C81C9", f"gpu-platform-{env}-alerts") in {f[:3] for f in found}


def test_the_check_sees_a_hook_that_moves_into_the_group_under_its_old_name() -> None:
    """What the lifecycle hooks would have done without their new names (the scan can fail)."""
    hook = {"Type": "AWS::AutoScaling::LifecycleHook", "Properties": {"LifecycleHookName": "g-launch"}}
    group = {"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": {"AutoScalingGroupName": "g"}}
    released = {"e-Fleets": {"Resources": {"Hook": hook, "Group": group}}}
    moved_in = {**group["Properties"], "LifecycleHookSpecificationList": [{"LifecycleHookName": "g-launch"}]}
    current = {"e-Fleets": {"Resources": {"Group": {**group, "Properties": moved_in}}}}
    assert list(reclaimed_names(released, current)) == [("e-Fleets", "Hook", "g-launch", "e-Fleets", "Group")]
    renamed = {**group["Properties"], "LifecycleHookSpecificationList": [{"LifecycleHookName": "g-launch-hold"}]}
    assert (
        list(reclaimed_names(released, {"e-Fleets": {"Resources": {"Group": {**group, "Properties": renamed}}}})) == []
    )
    retained = {"e-Fleets": {"Resources": {"Hook": {**hook, "DeletionPolicy": "Retain"}, "Group": group}}}
    assert list(reclaimed_names(retained, current)) == []


@pytest.mark.parametrize("env", ENVS)
def test_the_ami_parameter_resource_leaves_through_the_release_that_retained_it(env: str) -> None:
    """The released AWS::SSM::Parameter: RETAINING kept it with its released properties and Retain; now it is
    gone, and from RETAINING its removal reclaims nothing (CloudFormation leaves a retained resource in place).
    The seed alone declares the parameter, also on a fresh stack."""
    stack = f"{env}-Image"
    (old_id,) = [k for k, r in _released(stack)["Resources"].items() if r["Type"] == "AWS::SSM::Parameter"]
    kept = _released(stack, RETAINING)["Resources"][old_id]
    assert kept["Properties"] == _released(stack)["Resources"][old_id]["Properties"]
    assert (kept["DeletionPolicy"], kept["UpdateReplacePolicy"]) == ("Retain", "Retain")
    resources = _current(stack)["Resources"]
    assert old_id not in resources and not [r for r in resources.values() if r["Type"] == "AWS::SSM::Parameter"]
    name = kept["Properties"]["Name"]
    assert [k for k, r in resources.items() if r["Type"] == "Custom::AWS" and name in declared_names(r)]
    retaining = {s: _released(s, RETAINING) for s in _stacks(env)}
    assert [f for f in reclaimed_names(retaining, {s: _current(s) for s in _stacks(env)}) if f[1] == old_id] == []
    # Straight from RELEASED it is not safe (the scan sees it): preflight refuses that upgrade.
    straight = reclaimed_names({stack: _released(stack)}, {stack: _current(stack)})
    assert (stack, old_id, name) in {f[:3] for f in straight}


def test_the_retaining_release_is_the_one_preflight_names() -> None:
    tagged = subprocess.run(["git", "rev-parse", f"{RETAINING}^{{commit}}"], cwd=ROOT, capture_output=True, text=True)
    named = subprocess.run(
        ["git", "rev-parse", f"{LAST_RELEASE_RETAINING_IT}^{{commit}}"], cwd=ROOT, capture_output=True, text=True
    )
    assert tagged.stdout and tagged.stdout == named.stdout
