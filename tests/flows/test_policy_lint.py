"""parliament on every IAM policy document the app synthesizes.

Identity policies must be clean. The findings allowed below are inherent to the
kind of document and each carries its reason.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

from parliament import analyze_policy_string

from tests.iam_documents import policy_documents
from tests.synth import Synth

#: (resource type or "boundary", parliament issue) -> why it is acceptable there.
ALLOWED = {
    ("AWS::KMS::Key", "RESOURCE_STAR"): 'In a key policy "Resource": "*" means the key itself.',
    ("AWS::KMS::Key", "PERMISSIONS_MANAGEMENT_ACTIONS"): (
        "The account statement of every key policy (kms:* for the account root) delegates key administration "
        "to this account's IAM policies, as AWS's default key policy does."
    ),
    ("AWS::KMS::Key", "MISMATCHED_TYPE"): (
        "parliament's Arn type refuses wildcard ARN patterns; ArnLike on kms:EncryptionContext:aws:logs:arn with "
        "log-group:* is the condition AWS documents for CloudWatch Logs."
    ),
    ("AWS::S3::BucketPolicy", "MISMATCHED_TYPE"): (
        "s3:TlsVersion 1.2 is a decimal; parliament's Numeric type admits whole numbers only."
    ),
    ("AWS::S3::BucketPolicy", "UNKNOWN_CONDITION_FOR_ACTION"): (
        "The TLS-version deny covers s3:*; for actions that carry no s3:TlsVersion the deny does not match, "
        "which is the intended no-op."
    ),
    (
        "boundary",
        "RESOURCE_STAR",
    ): "A permissions boundary grants nothing; it caps roles whose own policies scope resources.",
    ("boundary", "PERMISSIONS_MANAGEMENT_ACTIONS"): (
        "iam:PassRole, in statements of its own: the AMI rollout role only to SSM, the node role only to EC2 "
        "(tests/stacks/test_security_stack.py checks both); kms:CreateGrant for the one role that needs it (the AMI copy "
        "role); a boundary grants nothing."
    ),
    ("boundary", "CREDENTIALS_EXPOSURE"): (
        "ecr:GetAuthorizationToken: the registry login every ECR pull starts with (container fleets); the pulls "
        "themselves are held to this account's repositories in this region."
    ),
    ("boundary", "PRIVILEGE_ESCALATION"): (
        "PassRole with RunInstances: the boundary lets the node role be passed to EC2 only, and launches only "
        "through launch templates with the templates' own resources."
    ),
}

#: Identity-policy findings accepted on one policy each: (logical id prefix, issue) -> (the actions the
#: finding may name, why). Anything else on an identity policy fails the test.
ALLOWED_IDENTITY = {
    ("AmiRolloutRolloutPolicy", "RESOURCE_STAR"): (
        ["ec2:RunInstances"],
        "Auto Scaling checks that the runbook could launch from the launch template version it points a group "
        "at; RunInstances touches many resource types, so * with conditions: only through the fleets' launch "
        "templates (ec2:LaunchTemplate) and only their own resources (ec2:IsLaunchTemplateResource).",
    ),
    ("AmiRolloutRolloutPolicy", "PERMISSIONS_MANAGEMENT_ACTIONS"): (
        ["iam:passrole"],
        "The same check covers the template's instance profile: the node role, by ARN, to EC2 only.",
    ),
    ("AmiRolloutRolloutPolicy", "PRIVILEGE_ESCALATION"): (
        ["iam:passrole", "ec2:runinstances"],
        "Both held as above: the node role only, launches only through the fleets' templates.",
    ),
    ("AmiRolloutStartPolicy", "PERMISSIONS_MANAGEMENT_ACTIONS"): (
        ["iam:passrole"],
        "EventBridge starts the runbook as the runbook's own role: that role by ARN, to SSM only.",
    ),
    ("GpuNodeContainerImages", "CREDENTIALS_EXPOSURE"): (
        ["ecr:getauthorizationtoken"],
        "Container fleets log in to ECR before pulling (Amazon ECR user guide, private registry authentication); "
        "the token only lets the node pull what its policy allows: this account's repositories, read only.",
    ),
    ("AmiCopiesCopy", "PERMISSIONS_MANAGEMENT_ACTIONS"): (
        ["kms:creategrant"],
        "kms:CreateGrant on the building account's keys, only for grants EC2 creates for the copy "
        "(kms:GrantIsForAWSResource): copying a snapshot encrypted with a shared key needs it (Amazon EBS user "
        "guide, sharing the KMS key of a shared snapshot).",
    ),
}


IDENTITY_TYPES = ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy", "AWS::IAM::Role")


def _finding_actions(finding: Any) -> list[str]:
    detail = finding.detail if isinstance(finding.detail, list) else finding.location.get("actions", [])
    return sorted(detail)


def _findings(synth: Synth, used: set[tuple[str, str]] | None = None) -> dict[tuple[str, str], set[str]]:
    """Findings by (resource type or "boundary", issue); identity findings in ALLOWED_IDENTITY are left out
    (and their keys added to ``used``)."""
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
    used = set() if used is None else used
    for stack in synth.stacks.values():
        cfg = synth.environments[stack.env]
        for doc in policy_documents(stack.name, stack.json, account=cfg.account, region=cfg.region):
            if doc.kind == "trust":
                continue
            kind = stack.json["Resources"][doc.logical_id]["Type"]
            if doc.logical_id.startswith("BoundaryPolicy"):
                kind = "boundary"
            result = analyze_policy_string(json.dumps(doc.document), include_community_auditors=True)
            for finding in result.findings:
                where = f"{stack.name}/{doc.logical_id}"
                if kind in IDENTITY_TYPES:
                    key = next(
                        (k for k in ALLOWED_IDENTITY if doc.logical_id.startswith(k[0]) and k[1] == finding.issue),
                        None,
                    )
                    if key is not None and _finding_actions(finding) == sorted(ALLOWED_IDENTITY[key][0]):
                        used.add(key)
                        continue
                    where += f" {_finding_actions(finding)}"
                found[(kind, finding.issue)].add(where)
    return found


def test_parliament_finds_nothing_but_the_allowed(synth: Synth) -> None:
    used: set[tuple[str, str]] = set()
    findings = _findings(synth, used)
    unexpected = {k: sorted(v) for k, v in findings.items() if k not in ALLOWED}
    assert unexpected == {}
    identity = {k: v for k, v in findings.items() if k[0] in IDENTITY_TYPES}
    assert identity == {}
    assert used == set(ALLOWED_IDENTITY)  # no stale allowance


def test_lint_is_not_vacuous(synth: Synth) -> None:
    """The documents are really analysed: a bad statement in the same pipeline is caught."""
    bad = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObjekt", "Resource": "*"}]}
    issues = {f.issue for f in analyze_policy_string(json.dumps(bad)).findings}
    assert "UNKNOWN_ACTION" in issues
    documents = [
        d
        for s in synth.stacks.values()
        for d in policy_documents(s.name, s.json, account="111111111111", region="us-east-1")
    ]
    assert sum(d.kind == "identity" for d in documents) >= 8
