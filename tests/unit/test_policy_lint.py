"""parliament on every IAM policy document the app synthesizes.

Identity policies must be clean. The findings allowed below are inherent to the
kind of document and each carries its reason.
"""

from __future__ import annotations

import json
from collections import defaultdict

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
        "The ceiling includes kms:CreateGrant for the one role that needs it (the AMI copy role below); a "
        "boundary grants nothing."
    ),
}

#: (logical id prefix of one policy, parliament issue) -> why that one document may carry it.
ALLOWED_IN = {
    ("AmiCopiesCopy", "PERMISSIONS_MANAGEMENT_ACTIONS"): (
        "kms:CreateGrant on the building account's keys, only for grants EC2 creates for the copy "
        "(kms:GrantIsForAWSResource): copying a snapshot encrypted with a shared key needs it (Amazon EBS user "
        "guide, sharing the KMS key of a shared snapshot)."
    ),
}


def _findings(synth: Synth) -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = defaultdict(set)
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
                if any(doc.logical_id.startswith(p) and finding.issue == i for p, i in ALLOWED_IN):
                    continue
                found[(kind, finding.issue)].add(f"{stack.name}/{doc.logical_id}")
    return found


def test_parliament_finds_nothing_but_the_allowed(synth: Synth) -> None:
    findings = _findings(synth)
    unexpected = {k: sorted(v) for k, v in findings.items() if k not in ALLOWED}
    assert unexpected == {}
    identity = {
        k: v for k, v in findings.items() if k[0] in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy", "AWS::IAM::Role")
    }
    assert identity == {}


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
