"""Preflight pcs: AWS PCS answers, no other cluster is being created, the PCS quotas take the Slurm environment's
cluster (tests/fixtures/config/slurm/hpc.yaml). moto has no PCS: PCS and Service Quotas by botocore's Stubber."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import EndpointConnectionError
from botocore.stub import Stubber

from config.loader import load_environment
from config.schema import Environment
from ops.findings import Level
from ops.preflight.aws import Aws
from ops.preflight.command import _run_one
from ops.preflight.pcs import check_pcs, needs
from tests.ops.preflight.preflight_fixtures import (
    FIXTURES,
    MOTO_ACCOUNT,
    environment,
)

ARN = "arn:aws:pcs:us-east-1:123456789012:cluster/"
OURS = {"Project": "gpu-platform", "Environment": "hpc", "Owner": "ml-platform-team"}
THEIRS = {"Project": "gpu-platform", "Environment": "research"}
#: Quota names as the check reads them (matched by words, their codes unpublished where it was written).
NAMES = {
    "clusters": ("L-PCS00001", "Clusters per Region"),
    "node groups": ("L-PCS00002", "Compute node groups per cluster"),
    "queues": ("L-PCS00003", "Queues per cluster"),
    "instances": ("L-PCS00004", "Instances per cluster"),
}
ENOUGH = {"clusters": 10, "node groups": 10, "queues": 10, "instances": 100}


def _hpc() -> Environment:
    return load_environment("hpc", FIXTURES / "slurm").model_copy(update={"account": MOTO_ACCOUNT})


def _cluster(name: str, status: str = "ACTIVE") -> dict[str, Any]:
    now = datetime(2026, 11, 26, tzinfo=UTC)
    return {"name": name, "id": f"pcs_{name}", "arn": ARN + f"pcs_{name}", "createdAt": now, "modifiedAt": now,
            "status": status}  # fmt: skip


def _pcs(aws: Aws, clusters: list[tuple[dict[str, Any], dict[str, str]]]) -> Stubber:
    """ListClusters answers ``clusters``; ListTagsForResource each one's tags, in order, until ours is found."""
    stub = Stubber(aws.client("pcs"))
    stub.add_response("list_clusters", {"clusters": [c for c, _ in clusters]}, {})
    for cluster, tags in clusters:
        stub.add_response("list_tags_for_resource", {"tags": tags}, {"resourceArn": cluster["arn"]})
        if tags == OURS:
            break
    stub.activate()
    return stub


def _quotas(aws: Aws, values: dict[str, float], applied: dict[str, float] | None = None) -> Stubber:
    """Service Quotas for service code pcs: ``applied`` values (ListServiceQuotas), AWS's defaults ``values``."""

    def listed(kinds: dict[str, float]) -> list[dict[str, Any]]:
        return [
            {"ServiceCode": "pcs", "QuotaCode": NAMES[k][0], "QuotaName": NAMES[k][1], "Value": v}
            for k, v in kinds.items()
        ]

    stub = Stubber(aws.client("service-quotas"))
    stub.add_response("list_service_quotas", {"Quotas": listed(applied or {})}, {"ServiceCode": "pcs"})
    stub.add_response("list_aws_default_service_quotas", {"Quotas": listed(values)}, {"ServiceCode": "pcs"})
    stub.activate()
    return stub


def _levels(findings: list[Any]) -> list[tuple[str, str]]:
    return [(f.level.value, f.message) for f in findings]


def test_what_the_slurm_environment_asks_of_the_quotas() -> None:
    # node groups: login 1; training On-Demand and Spot 2; block 1; small (all Spot) 1 = 5
    # queues: training, block, small = 3;  instances: 4 + 2 + 2 + login 1 = 9
    assert needs(_hpc()) == {"compute node groups per cluster": 5, "queues per cluster": 3, "instances per cluster": 9}


def test_an_account_ready_for_the_cluster_passes(aws: Aws) -> None:
    pcs = _pcs(aws, [(_cluster("research"), THEIRS), (_cluster("hpc-cluster"), OURS)])
    quotas = _quotas(aws, ENOUGH)
    findings = check_pcs(_hpc(), aws)
    pcs.assert_no_pending_responses()
    quotas.assert_no_pending_responses()
    assert {f.level for f in findings} == {Level.INFO}
    assert findings[0].message == (
        "AWS PCS answers in us-east-1: 2 cluster(s) in the account; hpc's: hpc-cluster (pcs_hpc-cluster), ACTIVE"
    )
    # ours exists: the account's 2 clusters, no new one
    assert [f.message for f in findings[1:]] == [
        "'Clusters per Region' (L-PCS00001): 10 covers the 2 clusters hpc needs",
        "'Compute node groups per cluster' (L-PCS00002): 10 covers the 5 compute node groups per cluster hpc needs",
        "'Queues per cluster' (L-PCS00003): 10 covers the 3 queues per cluster hpc needs",
        "'Instances per cluster' (L-PCS00004): 100 covers the 9 instances per cluster hpc needs",
    ]


def test_quotas_short_of_the_cluster_fail_with_their_fix(aws: Aws) -> None:
    _pcs(aws, [(_cluster("research"), THEIRS)])  # hpc's cluster does not exist yet: the deploy creates one
    _quotas(aws, {**ENOUGH, "clusters": 1, "instances": 100}, applied={"node groups": 4})
    errors = [f for f in check_pcs(_hpc(), aws) if f.level is Level.ERROR]
    assert [(f.message, f.fix) for f in errors] == [
        (
            "the account's clusters and this one need 2 clusters; 'Clusters per Region' (L-PCS00001) is 1",
            "request L-PCS00001 >= 2 in Service Quotas (pcs, us-east-1)",
        ),
        (
            # the applied value (4) wins over AWS's default (10)
            "hpc's cluster needs 5 compute node groups per cluster; 'Compute node groups per cluster' (L-PCS00002) is 4",
            "request L-PCS00002 >= 5 in Service Quotas (pcs, us-east-1), or fewer Slurm fleets or lower capacity.max",
        ),
    ]


def test_another_cluster_being_created_stops_the_deploy_that_creates_ours(aws: Aws) -> None:
    _pcs(aws, [(_cluster("research", "CREATING"), THEIRS)])
    _quotas(aws, ENOUGH)
    [error] = [f for f in check_pcs(_hpc(), aws) if f.level is Level.ERROR]
    assert error.message == (
        "research (pcs_research) is being created in us-east-1, and PCS creates one cluster at a time per account "
        "and region: the deploy's CreateCluster for hpc would fail (ServiceQuotaExceededException)"
    )
    assert error.fix.startswith(
        "wait until it is ACTIVE (aws pcs get-cluster --cluster-identifier pcs_research --region us-east-1)"
    )


def test_another_cluster_being_created_only_warns_once_ours_exists(aws: Aws) -> None:
    _pcs(aws, [(_cluster("research", "CREATING"), THEIRS), (_cluster("hpc-cluster"), OURS)])
    _quotas(aws, ENOUGH)
    findings = check_pcs(_hpc(), aws)
    assert not [f for f in findings if f.level is Level.ERROR]
    [warning] = [f for f in findings if f.level is Level.WARNING]
    assert "a deploy that replaces hpc's cluster (a new slurm.cluster_size) would fail" in warning.message


def test_our_own_cluster_being_created_is_not_another(aws: Aws) -> None:
    _pcs(aws, [(_cluster("hpc-cluster", "CREATING"), OURS)])
    _quotas(aws, ENOUGH)
    findings = check_pcs(_hpc(), aws)
    assert {f.level for f in findings} == {Level.INFO}
    assert findings[0].message.endswith("hpc's: hpc-cluster (pcs_hpc-cluster), CREATING")


def test_pcs_out_of_reach_is_unchecked(aws: Aws) -> None:
    def unreachable(**_: Any) -> None:
        raise EndpointConnectionError(endpoint_url="https://pcs.us-east-1.amazonaws.com/")

    aws.client("pcs").meta.events.register("before-call.pcs.ListClusters", unreachable)
    [finding] = _run_one("pcs", check_pcs, _hpc(), aws)
    assert finding.level is Level.UNCHECKED
    assert finding.message.startswith("could not run: Could not connect to the endpoint URL")
    assert finding.fix == "check network access to AWS"


def test_pcs_denied_is_unchecked_with_the_calls_it_needs(aws: Aws) -> None:
    stub = Stubber(aws.client("pcs"))
    stub.add_client_error("list_clusters", "AccessDeniedException", "not authorized to perform pcs:ListClusters")
    stub.activate()
    [finding] = _run_one("pcs", check_pcs, _hpc(), aws)
    assert finding.level is Level.UNCHECKED
    assert finding.message == (
        "could not run: ListClusters failed (AccessDeniedException: not authorized to perform pcs:ListClusters)"
    )
    assert "pcs:ListClusters/ListTagsForResource" in finding.fix


def test_quotas_unreadable_are_unchecked_and_the_rest_still_reported(aws: Aws) -> None:
    _pcs(aws, [(_cluster("research", "CREATING"), THEIRS)])
    stub = Stubber(aws.client("service-quotas"))
    stub.add_client_error(
        "list_service_quotas", "AccessDeniedException", "denied", expected_params={"ServiceCode": "pcs"}
    )
    stub.activate()
    findings = check_pcs(_hpc(), aws)
    assert [f.level for f in findings] == [Level.INFO, Level.ERROR, Level.UNCHECKED]
    assert findings[2].message == (
        "the PCS quotas could not be read: ListServiceQuotas failed (AccessDeniedException: denied)"
    )
    assert findings[2].fix.endswith("clusters 2, compute node groups per cluster 5, queues per cluster 3, "
                                    "instances per cluster 9")  # fmt: skip


def test_a_quota_service_quotas_does_not_list_is_unchecked_not_passed(aws: Aws) -> None:
    _pcs(aws, [(_cluster("hpc-cluster"), OURS)])
    _quotas(aws, {"clusters": 10, "node groups": 10})
    findings = check_pcs(_hpc(), aws)
    unchecked = [f.message for f in findings if f.level is Level.UNCHECKED]
    assert unchecked == [
        "Service Quotas lists no PCS quota for queues per cluster (service code pcs): hpc needs 3, not checked",
        "Service Quotas lists no PCS quota for instances per cluster (service code pcs): hpc needs 9, not checked",
    ]


@pytest.mark.parametrize("name", ["dev", "staging"])
def test_an_environment_without_slurm_asks_nothing(aws: Aws, name: str) -> None:
    stub = Stubber(aws.client("pcs"))
    stub.activate()  # any call would fail: nothing is answered
    assert check_pcs(environment(name), aws) == []
