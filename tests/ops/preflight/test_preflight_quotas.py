"""Preflight vCPU quotas: each fleet's maximum and all fleets together (Service Quotas by botocore's Stubber)."""

from __future__ import annotations

from ops.findings import Level
from ops.preflight.aws import Aws
from ops.preflight.quotas import check_vcpu_quotas, fleet_needs, market_counts
from tests.ops.preflight.preflight_fixtures import (
    environment,
    fleet_changed,
    stub_quotas,
)

P_OD, G_OD, P_SPOT, G_SPOT = "L-417A185B", "L-DB2E81BA", "L-7212CCBC", "L-3819A6DF"


def test_worst_case_per_market_by_hand() -> None:
    prod = environment("prod")
    # training: max 8, base 2, 100 % On-Demand above: 8 On-Demand p4d.24xlarge x 96 vCPUs.
    assert market_counts(prod.fleets[0]) == {"on-demand": 8, "spot": 0}
    assert fleet_needs(prod.fleets[0]) == {("P", "on-demand"): 768}
    # inference: max 20, base 2, 0 % above: 2 On-Demand and 18 Spot, each at the largest G type (g5.4xlarge, 16).
    assert market_counts(prod.fleets[1]) == {"on-demand": 2, "spot": 18}
    assert fleet_needs(prod.fleets[1]) == {("G", "on-demand"): 32, ("G", "spot"): 288}
    # 3 above a base of 1 at 50 %: up to 2 On-Demand and 2 Spot above the base (each rounded up).
    mixed = fleet_changed(prod, 1, capacity=prod.fleets[1].capacity.model_copy(update={"max": 4}))
    mixed = fleet_changed(mixed, 1, on_demand_base_capacity=1, on_demand_percentage_above_base=50)
    assert market_counts(mixed.fleets[1]) == {"on-demand": 3, "spot": 2}


def test_quotas_cover_every_fleet_and_the_sum(aws: Aws) -> None:
    stub = stub_quotas(aws, [("ec2", P_OD, 768), ("ec2", G_OD, 64), ("ec2", G_SPOT, 288)])
    findings = check_vcpu_quotas(environment("prod"), aws)
    stub.assert_no_pending_responses()
    assert {f.level for f in findings} == {Level.INFO}
    assert any(
        "'Running On-Demand P instances' (L-417A185B): 768 vCPUs cover the fleets' 768" in f.message for f in findings
    )


def test_fleet_above_its_quota_is_an_error(aws: Aws) -> None:
    # A new account: no applied P quota and no default either reads as 0.
    stub_quotas(aws, [("ec2", P_OD, None), ("ec2", G_OD, 64), ("ec2", G_SPOT, 288)])
    errors = [f for f in check_vcpu_quotas(environment("prod"), aws) if f.level is Level.ERROR]
    assert [f.message for f in errors] == [
        "fleet training at max (8) needs 768 vCPUs of 'Running On-Demand P instances' (L-417A185B); the quota is 0"
    ]
    assert "request L-417A185B >= 768" in errors[0].fix


def test_fleets_together_above_the_quota_is_a_warning(aws: Aws) -> None:
    # staging: training (p4d, 0 base, 100 % On-Demand, max 2) and inference (g5.2xlarge/g4dn.2xlarge, max 4,
    # base 1, rest Spot). A second G fleet on On-Demand makes the G On-Demand sum exceed 32 while each fits.
    staging = environment("staging")
    env = staging.model_copy(
        update={"fleets": [*staging.fleets, staging.fleets[1].model_copy(update={"name": "batch"})]}
    )
    stub_quotas(aws, [("ec2", P_OD, 192), ("ec2", G_OD, 10), ("ec2", G_SPOT, 100)])
    findings = check_vcpu_quotas(env, aws)
    warnings = [f for f in findings if f.level is Level.WARNING]
    assert not [f for f in findings if f.level is Level.ERROR]
    assert [f.message for f in warnings] == [
        "all fleets at max need 16 vCPUs of 'Running On-Demand G and VT instances' (L-DB2E81BA); the quota is 10"
    ]
    assert "suppress vcpu-quotas" in warnings[0].fix
