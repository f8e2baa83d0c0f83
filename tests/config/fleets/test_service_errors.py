"""Service config mistakes (``fleets[].service``): each gives its exact one-line error (file, field, value, fix).

Each case starts from the test dev config (under the copy run of tests/config/test_shipped_configs.py, a user's
own) with its first served fleet (``fleets[INFERENCE]``) as the one fleet that serves, and makes one mistake in it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.config.helpers import first_served, load_error, valid_dev, write_env
from tests.synth import ROOT

Data = dict[str, Any]


#: Index of the first served fleet of the test dev config (the module is skipped where none serves).
INFERENCE = first_served()
FIXTURE_CONFIG_DIR = ROOT / "tests" / "fixtures" / "config"


def served_dev() -> Data:
    """The test dev config with ``fleets[INFERENCE]`` as its only served fleet (the others are left out)."""
    data = valid_dev()
    data["fleets"] = [f for i, f in enumerate(data["fleets"]) if i == INFERENCE or f.get("service") is None]
    return data


def service(**changes: Any) -> Callable[[Data], None]:
    """Set (or, with None, remove) keys of ``fleets[INFERENCE].service``."""

    def mutate(data: Data) -> None:
        _apply(data["fleets"][INFERENCE]["service"], changes)

    return mutate


def load_balancer(**changes: Any) -> Callable[[Data], None]:
    def mutate(data: Data) -> None:
        _apply(data["fleets"][INFERENCE]["service"]["load_balancer"], changes)

    return mutate


def _apply(section: Data, changes: dict[str, Any]) -> None:
    for key, value in changes.items():
        if value is None:
            section.pop(key, None)
        else:
            section[key] = value


def _public_in_isolated_vpc(data: Data) -> None:
    load_balancer(internal=False)(data)
    data["network"].update(egress="isolated", nat_gateways=0)
    data["image"] = {"build": False}


def _one_zone(data: Data) -> None:
    """Everything in the file system's zone, so that the load balancer's is the one zone mistake."""
    zone = data["storage"]["file_system"]["availability_zone"]
    data["availability_zones"] = [zone]
    for fleet in data["fleets"]:
        fleet["availability_zones"] = [zone]
    network = data["network"]
    if network.get("nat_gateways", 0) > 1:
        network["nat_gateways"] = 1


def _training_fleet(data: Data) -> None:
    data["fleets"][INFERENCE]["role"] = "training"


def _image_without_containers(data: Data) -> None:
    service(command=None, image="nvcr.io/nvidia/tritonserver:25.01-py3")(data)
    data["fleets"][INFERENCE]["containers"] = False


PATH = f"dev.yaml: fleets[{INFERENCE}].service"
LB = f"{PATH}.load_balancer"
CASES = [
    pytest.param(
        service(port=8125),
        [f"{PATH}.port: port 8125 is used by the node's own services; fix: choose another, e.g. 8080"],
        id="reserved-port",
    ),
    pytest.param(
        service(port=80),
        [
            f"{PATH}.port: 80 is invalid: Input should be greater than or equal to 1024; fix: use a value >= 1024 "
            "(an unprivileged TCP port)"
        ],
        id="privileged-port",
    ),
    pytest.param(
        service(health_check_path="health"),
        [
            f"{PATH}.health_check_path: 'health' is not a URL path; fix: start it with / and use letters, digits, . _ ~ - /"
        ],
        id="path-without-slash",
    ),
    pytest.param(
        service(image="nvcr.io/nvidia/tritonserver:25.01-py3"),
        [f"{PATH}.command: give exactly one of command (run on the host) or image (a container)"],
        id="command-and-image",
    ),
    pytest.param(
        service(command=None),
        [f"{PATH}.command: give exactly one of command (run on the host) or image (a container)"],
        id="neither-command-nor-image",
    ),
    pytest.param(
        _image_without_containers,
        [f"{PATH}.image: a container needs the fleet's container runtime; fix: set containers to true"],
        id="image-without-containers",
    ),
    pytest.param(
        _training_fleet,
        [f"{PATH}: only an inference fleet serves; fix: remove service or set role to inference"],
        id="training-fleet",
    ),
    pytest.param(
        service(load_balancer=None),
        [f"{LB}: required field is missing; fix: add it"],
        id="no-load-balancer",
    ),
    pytest.param(
        load_balancer(allowed_cidrs=[]),
        [
            f"{LB}.allowed_cidrs: a load balancer with no clients serves no one; fix: list the clients' CIDR blocks "
            "in allowed_cidrs or their security groups in allowed_security_groups"
        ],
        id="no-clients",
    ),
    pytest.param(
        load_balancer(allowed_cidrs=["10.10.0.1/16"]),
        [f"{LB}.allowed_cidrs[0]: '10.10.0.1/16' is not an IPv4 CIDR block; fix: write it as 10.0.0.0/16"],
        id="cidr-with-host-bits",
    ),
    pytest.param(
        load_balancer(allowed_cidrs=["10.10.0.0/16", "0.0.0.0/0"]),
        [
            f"{LB}.allowed_cidrs[1]: 0.0.0.0/0 admits every address to a service without authentication; "
            "fix: list the clients' own ranges"
        ],
        id="open-to-everyone",
    ),
    pytest.param(
        load_balancer(allowed_security_groups=["sg-123"]),
        [f"{LB}.allowed_security_groups[0]: 'sg-123' is not a security group id; fix: use sg- and 8 or 17 hex digits"],
        id="bad-security-group",
    ),
    pytest.param(
        load_balancer(certificate_arn="arn:aws:iam::111111111111:server-certificate/web"),
        [
            f"{LB}.certificate_arn: 'arn:aws:iam::111111111111:server-certificate/web' is not an ACM certificate "
            "ARN; fix: arn:aws:acm:<region>:<account>:certificate/<id>"
        ],
        id="iam-certificate",
    ),
    pytest.param(
        load_balancer(deregistration_delay_seconds=4000),
        [
            f"{LB}.deregistration_delay_seconds: 4000 is invalid: Input should be less than or equal to 3600; "
            "fix: use a value <= 3600 (ELB's range is 0-3600)"
        ],
        id="deregistration-delay",
    ),
    pytest.param(
        load_balancer(interna=True),
        [
            f"{LB}.interna: unknown key; fix: did you mean 'internal'? remove it or use one of allowed_cidrs, "
            "allowed_security_groups, certificate_arn, deregistration_delay_seconds, internal, requests_per_target"
        ],
        id="misspelt-key",
    ),
    pytest.param(
        service(alarms={"http_5xx_percent": 150}),
        [
            f"{PATH}.alarms.http_5xx_percent: 150 is invalid: Input should be less than or equal to 100; "
            "fix: use a value <= 100.0 (a percentage)"
        ],
        id="percent-over-100",
    ),
    pytest.param(
        _public_in_isolated_vpc,
        [
            f"{LB}.internal: false needs public subnets, which only network.egress 'nat' creates; "
            "fix: keep internal: true (clients in the VPC) or set egress to 'nat'"
        ],
        id="internet-facing-without-public-subnets",
    ),
    pytest.param(
        _one_zone,
        [
            f"{PATH}: a load balancer needs subnets in two availability zones, the environment has 1; "
            "fix: list a second zone in availability_zones"
        ],
        id="one-zone",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), CASES)
def test_invalid_service_gives_exact_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutate: Callable[[Data], None], expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = served_dev()
    mutate(data)
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == expected


def test_the_example_service_of_the_test_dev_config_is_internal() -> None:
    # The example as tests/fixtures/config/dev.yaml has it (config/dev.yaml began as its copy; config/ is the
    # user's, and test_shipped_configs.py checks only what holds for any valid config there).
    from config import load_environment

    (served,) = [f for f in load_environment("dev", FIXTURE_CONFIG_DIR).fleets if f.name == "inference"]
    assert served.role.value == "inference" and served.service is not None
    assert served.service.command == "python3 /opt/gpu-platform/examples/serve.py --port 8080"
    assert (served.service.port, served.service.health_check_path) == (8080, "/health")
    assert served.service.load_balancer.internal


def test_a_served_fleet_rolls_back_on_its_service_alarms_unless_told_otherwise(tmp_path: Path) -> None:
    from config import load_environment

    data = valid_dev()
    data["fleets"][INFERENCE].setdefault("refresh", {}).pop("rollback_alarms", None)
    write_env(tmp_path, "dev", data)
    served = load_environment("dev", tmp_path).fleets[INFERENCE]
    assert served.rollout is not None
    assert [a.value for a in served.rollout.rollback_alarms] == [
        "health-check-failed",
        "gpu-temperature-critical",
        "http-5xx-rate",
        "unhealthy-hosts",
        "lb-5xx-rate",
        "no-healthy-hosts",
    ]

    data["fleets"][INFERENCE]["refresh"]["rollback_alarms"] = ["health-check-failed"]  # the owner's own choice
    write_env(tmp_path, "dev", data)
    served = load_environment("dev", tmp_path).fleets[INFERENCE]
    assert served.rollout is not None and [a.value for a in served.rollout.rollback_alarms] == ["health-check-failed"]


def test_a_service_alarm_on_a_fleet_that_serves_nothing_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    training = next(i for i, fleet in enumerate(data["fleets"]) if fleet.get("service") is None)
    data["fleets"][training]["refresh"] = {"rollback_alarms": ["health-check-failed", "unhealthy-hosts"]}
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == [
        f"dev.yaml: fleets[{training}].refresh.rollback_alarms[1]: 'unhealthy-hosts' is a service alarm and this "
        "fleet serves nothing; fix: remove it, or add service: to the fleet"
    ]
