"""Mistakes whose first message was YAML's or pydantic's own, each now one line a person reads once:
YAML 1.1 booleans where text is expected, a tab in the indentation, the nearest catalog names of an
unknown instance type, the level a misplaced key belongs to, cron fields and time zones out of range,
an ACM certificate of another region or account, and GPU subnets too small for their nodes' interfaces.

Each case edits the text of the test dev config (tests/fixtures/config/dev.yaml), as a person would: its
lines, comments and flow style, so always that file (also where GPU_PLATFORM_TEST_CONFIG_DIR names another folder).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import config
from config.errors import field_index
from config.schema import Environment

DEV = Path(__file__).resolve().parents[1] / "fixtures" / "config" / "dev.yaml"

Edit = Callable[[str], str]


def replace(old: str, new: str) -> Edit:
    def edit(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)

    return edit


def errors_of(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Edit) -> list[str]:
    monkeypatch.chdir(tmp_path)
    text = DEV.read_text(encoding="utf-8")
    (tmp_path / "dev.yaml").write_text(edit(text), encoding="utf-8")
    with pytest.raises(config.ConfigError) as info:
        config.load_environment("dev", config_dir=tmp_path)
    return info.value.lines


CERT = "arn:aws:acm:{region}:{account}:certificate/12345678-1234-4234-8234-123456789012"
CRON_FIX = (
    "fix: minute 0-59, hour 0-23, day 1-31, month 1-12 (JAN-DEC), day of week 0-6 (SUN-SAT), each as *, a value, "
    "a range a-b, a list a,b or a step */n"
)
SCHEDULE = "dev.yaml: fleets[1].scaling.schedules[0]"

CASES = [
    # 1. YAML 1.1 booleans where text is expected
    pytest.param(
        replace("egress: nat ", "egress: off "),
        [
            "dev.yaml: network.egress: off unquoted is the boolean false (YAML 1.1 reads on, off, yes, no, y, n as "
            "booleans), not the text 'off'; fix: quote it: 'off'"
        ],
        id="bool-word-in-enum",
    ),
    pytest.param(
        replace("Owner: ml-platform-team", "Owner: Yes"),
        [
            "dev.yaml: tags.Owner: Yes unquoted is the boolean true (YAML 1.1 reads on, off, yes, no, y, n as "
            "booleans), not the text 'Yes'; fix: quote it: 'Yes'"
        ],
        id="bool-word-in-string",
    ),
    pytest.param(
        replace("Owner: ml-platform-team", "Owner: true"),
        ["dev.yaml: tags.Owner: True is invalid: Input should be a valid string; fix: write a quoted string"],
        id="true-is-not-a-word-to-quote",
    ),
    # 2. a tab in the indentation
    pytest.param(
        replace("  retention_days: 30", "\tretention_days: 30"),
        [
            "dev.yaml: line 17, column 1: a tab in the indentation (YAML indents with spaces only); "
            "fix: replace the tab with spaces"
        ],
        id="tab-indent",
    ),
    pytest.param(
        replace("  retention_days: 30", "  \tretention_days: 30"),
        [
            "dev.yaml: line 17, column 3: a tab in the indentation (YAML indents with spaces only); "
            "fix: replace the tab with spaces"
        ],
        id="tab-after-spaces",
    ),
    # 3. the nearest catalog names of an unknown instance type
    pytest.param(
        replace("[g6.xlarge, g6.2xlarge]", "[g6.xlarg, g6.2xlarge]"),
        [
            "dev.yaml: fleets[0].instance_types[0]: g6.xlarg is not in the GPU instance catalog; did you mean "
            "g6.xlarge, g6e.xlarge or g6.8xlarge? (config/catalog/gpu_instances.csv)"
        ],
        id="instance-type-nearest-three",
    ),
    pytest.param(
        replace("[g6.xlarge, g6.2xlarge]", "[p4.24xlarge]"),
        [
            "dev.yaml: fleets[0].instance_types[0]: p4.24xlarge is not in the GPU instance catalog; did you mean "
            "p4d.24xlarge, p4de.24xlarge or p5.4xlarge? (config/catalog/gpu_instances.csv)"
        ],
        id="instance-type-family-typo",
    ),
    # 4. a key at the wrong level
    pytest.param(
        replace("    containers: true\n", "    containers: true\n    port: 8080\n"),
        [
            "dev.yaml: fleets[1].port: unknown key at this level; fix: port belongs under fleets[1].service: move it there"
        ],
        id="port-under-fleet",
    ),
    pytest.param(
        replace("logging:\n  retention_days: 30\n", "logging: {}\nretention_days: 30\n"),
        [
            "dev.yaml: retention_days: unknown key at this level; fix: retention_days belongs under logging or "
            "audit.trail_object_lock: move it there"
        ],
        id="retention-days-at-top-level",
    ),
    pytest.param(
        replace("protect_stateful_resources: false\n", "protect_stateful_resources: false\nhealth_check_path: /h\n"),
        [
            "dev.yaml: health_check_path: unknown key at this level; fix: health_check_path belongs under "
            "fleets[n].service: move it there"
        ],
        id="fleet-key-at-top-level",
    ),
    # 6. cron fields and time zones
    pytest.param(
        replace('"0 20 * * *"', '"0 25 * * *"'),
        [f"{SCHEDULE}.cron: '0 25 * * *': hour '25': '25' is outside 0-23; {CRON_FIX}"],
        id="cron-hour",
    ),
    pytest.param(
        replace('"0 20 * * *"', '"60 20 * * *"'),
        [f"{SCHEDULE}.cron: '60 20 * * *': minute '60': '60' is outside 0-59; {CRON_FIX}"],
        id="cron-minute",
    ),
    pytest.param(
        replace('"0 20 * * *"', '"0 20 0 * *"'),
        [f"{SCHEDULE}.cron: '0 20 0 * *': day of month '0': '0' is outside 1-31; {CRON_FIX}"],
        id="cron-day",
    ),
    pytest.param(
        replace('"0 20 * * *"', '"0 20 * 13 *"'),
        [f"{SCHEDULE}.cron: '0 20 * 13 *': month '13': '13' is outside 1-12 or JAN-DEC; {CRON_FIX}"],
        id="cron-month",
    ),
    pytest.param(
        replace('"0 20 * * *"', '"0 20 * * 1-7"'),
        [f"{SCHEDULE}.cron: '0 20 * * 1-7': day of week '1-7': '7' is outside 0-6 or SUN-SAT; {CRON_FIX}"],
        id="cron-weekday-range",
    ),
    pytest.param(
        replace('"0 20 * * *"', '"0 20 * * FRI-MON"'),
        [f"{SCHEDULE}.cron: '0 20 * * FRI-MON': day of week 'FRI-MON': the range 'FRI-MON' runs backwards; {CRON_FIX}"],
        id="cron-backwards-range",
    ),
    pytest.param(
        replace('"0 20 * * *"', '"*/0 20 * * *"'),
        [f"{SCHEDULE}.cron: '*/0 20 * * *': minute '*/0': step '0' is not a whole number from 1; {CRON_FIX}"],
        id="cron-step",
    ),
    pytest.param(
        replace("time_zone: America/New_York, min: 0", "time_zone: America/NewYork, min: 0"),
        [
            f"{SCHEDULE}.time_zone: 'America/NewYork' is not an IANA time zone; fix: did you mean America/New_York, "
            "America/Nuuk, America/Nome? use a name of the tz database, e.g. America/New_York or UTC"
        ],
        id="time-zone",
    ),
    # 7. an ACM certificate of another region or account
    pytest.param(
        replace(
            "        internal: true ",
            f"        certificate_arn: {CERT.format(region='eu-west-1', account='111111111111')}\n        internal: true ",
        ),
        [
            "dev.yaml: fleets[1].service.load_balancer.certificate_arn: the certificate is in eu-west-1, account "
            "111111111111, but the load balancer is in us-east-1, account 111111111111 (a load balancer uses ACM "
            "certificates of its own region and account only); fix: request or import the certificate in ACM of "
            "us-east-1 in account 111111111111 and use its ARN"
        ],
        id="certificate-region",
    ),
    pytest.param(
        replace(
            "        internal: true ",
            f"        certificate_arn: {CERT.format(region='us-east-1', account='999999999999')}\n        internal: true ",
        ),
        [
            "dev.yaml: fleets[1].service.load_balancer.certificate_arn: the certificate is in us-east-1, account "
            "999999999999, but the load balancer is in us-east-1, account 111111111111 (a load balancer uses ACM "
            "certificates of its own region and account only); fix: request or import the certificate in ACM of "
            "us-east-1 in account 111111111111 and use its ARN"
        ],
        id="certificate-account",
    ),
    # 9. GPU subnets too small for the nodes' network interfaces
    pytest.param(
        lambda text: replace("gpu_subnet_mask: 20", "gpu_subnet_mask: 28")(
            replace("capacity: {min: 1, max: 4, desired: 1}", "capacity: {min: 1, max: 10, desired: 1}")(text)
        ),
        [
            "dev.yaml: network.gpu_subnet_mask: the GPU subnet of us-east-1a (/28) has 11 usable addresses (AWS "
            "reserves 5), but its nodes' network interfaces need 12 (fleets[0] training 2 x 1, fleets[1] inference "
            "10 x 1: capacity.max x interfaces per node); fix: set gpu_subnet_mask to 27 or lower, or lower capacity.max"
        ],
        id="subnet-too-small",
    ),
    pytest.param(
        lambda text: replace("gpu_subnet_mask: 20", "gpu_subnet_mask: 16")(
            replace("capacity: {min: 1, max: 4, desired: 1}", "capacity: {min: 1, max: 70000, desired: 1}")(text)
        ),
        [
            # the VPC cannot hold two /16 subnets either: its own line
            "dev.yaml: network: 4 subnets (GPU /16, public /24) need 131584 addresses but 10.10.0.0/16 has 65536; fix: "
            "widen vpc_cidr or raise gpu_subnet_mask/public_subnet_mask",
            "dev.yaml: network.gpu_subnet_mask: the GPU subnet of us-east-1a (/16) has 65531 usable addresses (AWS "
            "reserves 5), but its nodes' network interfaces need 70002 (fleets[0] training 2 x 1, fleets[1] inference "
            "70000 x 1: capacity.max x interfaces per node); fix: lower capacity.max (a GPU subnet is at most /16)",
            "dev.yaml: network.gpu_subnet_mask: the GPU subnet of us-east-1b (/16) has 65531 usable addresses (AWS "
            "reserves 5), but its nodes' network interfaces need 70000 (fleets[1] inference 70000 x 1: capacity.max x "
            "interfaces per node); fix: lower capacity.max (a GPU subnet is at most /16)",
        ],
        id="no-subnet-is-large-enough",
    ),
]


@pytest.mark.parametrize(("edit", "expected"), CASES)
def test_mistake_gives_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Edit, expected: list[str]
) -> None:
    assert errors_of(tmp_path, monkeypatch, edit) == expected


def test_efa_interfaces_count_per_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A p5 node takes 32 addresses (one per EFA interface), a p4d node 4: with the 6 other nodes, 8 p5 + 8 p4d need 294 of a /24's 251."""
    efa_fleets = "".join(
        f"  - name: {name}\n    role: training\n    instance_types: [{kind}]\n    efa: true\n"
        "    placement: cluster\n    availability_zones: [us-east-1a]\n    capacity: {min: 0, max: 8}\n"
        for name, kind in (("big", "p5.48xlarge"), ("mid", "p4d.24xlarge"))
    )
    lines = errors_of(
        tmp_path,
        monkeypatch,
        lambda text: replace("gpu_subnet_mask: 20", "gpu_subnet_mask: 24")(
            replace("\n# Training jobs", f"{efa_fleets}\n# Training jobs")(text)
        ),
    )
    assert lines == [
        "dev.yaml: network.gpu_subnet_mask: the GPU subnet of us-east-1a (/24) has 251 usable addresses (AWS "
        "reserves 5), but its nodes' network interfaces need 294 (fleets[0] training 2 x 1, fleets[1] inference "
        "4 x 1, fleets[2] big 8 x 32, fleets[3] mid 8 x 4: capacity.max x interfaces per node); fix: set "
        "gpu_subnet_mask to 23 or lower, or lower capacity.max"
    ]


def test_boolean_words_stay_booleans_where_a_boolean_is_expected(tmp_path: Path) -> None:
    text = DEV.read_text(encoding="utf-8")
    (tmp_path / "dev.yaml").write_text(replace("containers: true", "containers: yes")(text), encoding="utf-8")
    env = config.load_environment("dev", config_dir=tmp_path)
    assert env.fleets[1].containers is True


def test_cron_names_lists_ranges_and_steps_are_accepted(tmp_path: Path) -> None:
    text = DEV.read_text(encoding="utf-8")
    edit = replace('"0 20 * * *"', '"*/15 8-18/2 1,15 JAN-jun mon-FRI"')
    (tmp_path / "dev.yaml").write_text(edit(text), encoding="utf-8")
    env = config.load_environment("dev", config_dir=tmp_path)
    assert env.fleets[1].scaling is not None
    assert env.fleets[1].scaling.schedules[0].cron == "*/15 8-18/2 1,15 JAN-jun mon-FRI"


def test_field_index_knows_every_level_of_a_name() -> None:
    index = field_index(Environment)
    assert ("fleets", "[]", "service") in index["port"]
    assert ("logging",) in index["retention_days"]
    assert () in index["region"]
