"""Config mistakes give one exact, actionable line each: file, field path, bad value, fix.

Each case copies ``config/dev.yaml``'s data into a temporary folder, changes one
thing and checks the complete ``ConfigError`` lines. The end-to-end tests run
``app.py`` and check that a config mistake exits 2 with only those lines on stderr.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import config
from config.loader import CONFIG_DIR
from tests.app_runs import run_app, run_app_process
from tests.config.helpers import Mutation, assert_config_failure, dump, load_error, valid_dev, write_env
from tests.synth import TEST_CONFIG_DIR


def set_(dotted: str, value: Any) -> Mutation:
    """Set the field at ``a.b.c`` (creating nothing but the last key)."""

    def mutate(data: dict[str, Any]) -> None:
        *parents, last = dotted.split(".")
        for part in parents:
            data = data[part]
        data[last] = value

    return mutate


def delete(dotted: str) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        *parents, last = dotted.split(".")
        for part in parents:
            data = data[part]
        del data[last]

    return mutate


def both(*mutations: Mutation) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        for m in mutations:
            m(data)

    return mutate


TOP_LEVEL_KEYS = (
    "account, alarms, audit, availability_zones, budget, fleets, image, jobs, logging, name, network, notifications, "
    "placement_group_tags, preflight, protect_stateful_resources, region, slurm, storage, tags"
)
NETWORK_KEYS = "egress, gpu_subnet_mask, nat_gateways, public_subnet_mask, vpc_cidr"
RETENTIONS = "1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653"

DATA_CASES = [
    pytest.param(
        set_("availability_zones", ["us-east-1a", "us-west-2b"]),
        [
            "dev.yaml: availability_zones[1]: 'us-west-2b' is not an availability zone of us-east-1; "
            "fix: use a zone name such as us-east-1a"
        ],
        id="az-outside-region",
    ),
    pytest.param(
        set_("availability_zones", ["us-east-1a", "us-east-1a"]),
        [
            "dev.yaml: availability_zones[1]: 'us-east-1a' is already listed at availability_zones[0]; fix: list each zone once"
        ],
        id="az-given-twice",
    ),
    pytest.param(
        set_("availability_zones", []),
        [
            "dev.yaml: availability_zones: [] is invalid: List should have at least 1 item after validation, not 0; "
            "fix: give at least 1 item(s)"
        ],
        id="az-empty-list",
    ),
    pytest.param(
        set_("network.vpc_cidr", "10.10.0.0/33"),
        [
            "dev.yaml: network.vpc_cidr: '10.10.0.0/33' is not a valid IPv4 network ('33' is not a valid netmask); "
            "fix: write it as address/prefix, e.g. 10.20.0.0/16"
        ],
        id="cidr-bad-netmask",
    ),
    pytest.param(
        set_("network.vpc_cidr", "10.10.0.1/16"),
        [
            "dev.yaml: network.vpc_cidr: '10.10.0.1/16' is not a valid IPv4 network (10.10.0.1/16 has host bits set); "
            "fix: write it as address/prefix, e.g. 10.20.0.0/16"
        ],
        id="cidr-host-bits-set",
    ),
    pytest.param(
        set_("network.vpc_cidr", "8.8.0.0/16"),
        [
            "dev.yaml: network.vpc_cidr: '8.8.0.0/16' is not a private (RFC 1918) range; "
            "fix: use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
        ],
        id="cidr-public",
    ),
    pytest.param(
        set_("network.vpc_cidr", "10.0.0.0/12"),
        ["dev.yaml: network.vpc_cidr: '10.0.0.0/12' has prefix /12; fix: a VPC CIDR must be between /16 and /24"],
        id="cidr-prefix-too-small",
    ),
    pytest.param(
        set_("network.vpc_cidr", "10.10.0.0/26"),
        ["dev.yaml: network.vpc_cidr: '10.10.0.0/26' has prefix /26; fix: a VPC CIDR must be between /16 and /24"],
        id="cidr-prefix-too-large",
    ),
    pytest.param(
        set_("regoin", "us-east-1"),
        [f"dev.yaml: regoin: unknown key; fix: did you mean 'region'? remove it or use one of {TOP_LEVEL_KEYS}"],
        id="unknown-top-level-key-with-hint",
    ),
    pytest.param(
        set_("colour", "blue"),
        [f"dev.yaml: colour: unknown key; fix: remove it or use one of {TOP_LEVEL_KEYS}"],
        id="unknown-top-level-key-no-hint",
    ),
    pytest.param(
        set_("network.nat_gateway", 1),
        [
            "dev.yaml: network.nat_gateway: unknown key; "
            f"fix: did you mean 'nat_gateways'? remove it or use one of {NETWORK_KEYS}"
        ],
        id="unknown-key-under-network",
    ),
    pytest.param(
        delete("region"),
        ["dev.yaml: region: required field is missing; fix: add it"],
        id="missing-region",
    ),
    pytest.param(
        delete("network.egress"),
        ["dev.yaml: network.egress: required field is missing; fix: add it"],
        id="missing-network-egress",
    ),
    pytest.param(
        set_("network.egress", "public"),
        [
            "dev.yaml: network.egress: 'public' is invalid: Input should be 'nat' or 'isolated'; "
            "fix: use one of 'nat' or 'isolated'"
        ],
        id="bad-egress",
    ),
    pytest.param(
        set_("network.nat_gateways", 0),
        [
            "dev.yaml: network: egress is 'nat' but nat_gateways is 0; "
            "fix: set nat_gateways to at least 1, or egress to 'isolated'"
        ],
        id="nat-egress-without-nat-gateways",
    ),
    pytest.param(
        set_("network.egress", "isolated"),
        [
            "dev.yaml: network: nat_gateways is 1 but egress is 'isolated'; "
            "fix: set nat_gateways to 0 or egress to 'nat'"
        ],
        id="isolated-with-nat-gateways",
    ),
    pytest.param(
        set_("network.nat_gateways", 3),
        [
            "dev.yaml: network.nat_gateways: 3 is more than the 2 availability zone(s); "
            "fix: use at most one NAT gateway per zone"
        ],
        id="more-nat-gateways-than-zones",
    ),
    pytest.param(
        set_("network.nat_gateways", -1),
        [
            "dev.yaml: network.nat_gateways: -1 is invalid: Input should be greater than or equal to 0; "
            "fix: use a value >= 0"
        ],
        id="negative-nat-gateways",
    ),
    pytest.param(
        set_("network.vpc_cidr", "10.10.0.0/20"),
        [
            "dev.yaml: network: 4 subnets (GPU /20, public /24) need 8704 addresses but 10.10.0.0/20 has 4096; "
            "fix: widen vpc_cidr or raise gpu_subnet_mask/public_subnet_mask"
        ],
        id="subnets-do-not-fit-vpc",
    ),
    pytest.param(
        set_("network.gpu_subnet_mask", 30),
        [
            "dev.yaml: network.gpu_subnet_mask: 30 is invalid: Input should be less than or equal to 28; "
            "fix: use a value <= 28"
        ],
        id="gpu-subnet-mask-too-large",
    ),
    pytest.param(
        set_("logging.retention_days", 45),
        [
            "dev.yaml: logging.retention_days: 45 is not a CloudWatch Logs retention period; "
            f"fix: use one of {RETENTIONS}"
        ],
        id="bad-log-retention",
    ),
    pytest.param(
        set_("account", "12345"),
        ["dev.yaml: account: '12345' is not an AWS account id; fix: write the 12-digit account id as a quoted string"],
        id="account-not-12-digits",
    ),
    pytest.param(
        set_("account", 111111111111),
        [
            'dev.yaml: account: 111111111111 is a number, not a quoted account id; fix: quote the account id as written ("111111111111")'
        ],
        id="account-unquoted-int",
    ),
    pytest.param(
        set_("account", 11111111111),
        [
            "dev.yaml: account: 11111111111 is a number, not a quoted account id; "
            "fix: write the 12-digit account id as a quoted string"
        ],
        id="account-unquoted-int-not-12-digits",  # no guess at the missing digit
    ),
    pytest.param(
        set_("region", "us-east"),
        ["dev.yaml: region: 'us-east' is not an AWS region code; fix: use a code such as us-east-1 or eu-west-1"],
        id="bad-region",
    ),
    pytest.param(
        delete("tags.CostCenter"),
        [
            "dev.yaml: tags: missing cost-allocation tag(s) CostCenter; "
            "fix: add them (required: Project, Environment, Owner, CostCenter)"
        ],
        id="missing-cost-allocation-tag",
    ),
    pytest.param(
        set_("tags.Environment", "prod"),
        ["dev.yaml: tags.Environment: 'prod' differs from the environment name 'dev'; fix: set it to 'dev'"],
        id="environment-tag-differs-from-name",
    ),
    pytest.param(
        both(set_("name", "qa"), set_("tags.Environment", "qa")),
        ["dev.yaml: name: 'qa' differs from the file name; fix: set name to 'dev' or rename the file"],
        id="name-differs-from-file-name",
    ),
    pytest.param(
        set_("name", "Dev"),
        [
            "dev.yaml: name: 'Dev' is not a valid environment name; "
            "fix: 2-16 characters, lowercase letters, digits and '-', starting with a letter"
        ],
        id="name-not-lowercase",
    ),
    pytest.param(
        set_("protect_stateful_resources", "maybe"),
        [
            "dev.yaml: protect_stateful_resources: 'maybe' is invalid: Input should be a valid boolean; "
            "fix: write true or false"
        ],
        id="protect-not-boolean",
    ),
    pytest.param(
        set_("audit", {"log_transition_days": 90, "log_expiration_days": 30}),
        [
            "dev.yaml: audit.log_expiration_days: 30 is not after log_transition_days (90); "
            "fix: expire logs later than they move to Glacier"
        ],
        id="audit-expiry-before-transition",
    ),
    pytest.param(
        set_(
            "audit",
            {
                "log_transition_days": 30,
                "log_expiration_days": 90,
                "trail_object_lock": {"mode": "compliance", "retention_days": 365},
            },
        ),
        [
            "dev.yaml: audit.trail_object_lock.retention_days: 365 outlasts log_expiration_days (90); "
            "fix: lock trail logs no longer than they are kept"
        ],
        id="audit-lock-outlasts-expiry",
    ),
    pytest.param(
        set_("audit", {"trail_object_lock": {"mode": "legal-hold", "retention_days": 30}}),
        [
            "dev.yaml: audit.trail_object_lock.mode: 'legal-hold' is invalid: Input should be 'governance' or "
            "'compliance'; fix: use one of 'governance' or 'compliance'"
        ],
        id="audit-lock-mode",
    ),
    pytest.param(
        set_("audit", {"log_transition_days": 0}),
        [
            "dev.yaml: audit.log_transition_days: 0 is invalid: Input should be greater than or equal to 1; "
            "fix: use a value >= 1"
        ],
        id="audit-transition-zero",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), DATA_CASES)
def test_invalid_field_gives_exact_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mutate: Mutation, expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    mutate(data)
    write_env(tmp_path, "dev", data)

    assert load_error("dev", tmp_path) == expected


def _prefix_name(text: str) -> str:
    return "name: dev\n" + text


def _break_first_line(text: str) -> str:
    first, rest = text.split("\n", 1)
    assert first == "name: dev"
    return "name: dev: oops\n" + rest


def _unquoted_account(written: str) -> Callable[[str], str]:
    def edit(text: str) -> str:
        (line,) = [line for line in text.splitlines() if line.startswith("account:")]
        return text.replace(line, f"account: {written}")

    return edit


def _tab_on_second_line(text: str) -> str:
    first, rest = text.split("\n", 1)
    return first + "\n\tregion: us-east-1\n" + rest


TEXT_CASES = [
    pytest.param(
        _break_first_line,
        [
            "dev.yaml: line 1, column 10: YAML error: mapping values are not allowed in this context; fix: correct the YAML syntax"
        ],
        id="yaml-syntax-error",
    ),
    pytest.param(
        _tab_on_second_line,
        [
            "dev.yaml: line 2, column 1: a tab in the indentation (YAML indents with spaces only); "
            "fix: replace the tab with spaces"
        ],
        id="yaml-tab-indent",
    ),
    pytest.param(
        _prefix_name,
        [
            "dev.yaml: line 2, column 1: YAML error: key 'name' is given twice (first on line 1); "
            "fix: correct the YAML syntax"
        ],
        id="duplicate-key",
    ),
    pytest.param(
        _unquoted_account("011111111111"),
        [
            "dev.yaml: account: 011111111111 is read by YAML as the number 1227133513, not as the digits written; "
            'fix: quote the account id as written ("011111111111")'
        ],
        id="account-with-leading-zero-read-as-octal",
    ),
    pytest.param(
        _unquoted_account("0x1f"),
        [
            "dev.yaml: account: 0x1f is read by YAML as the number 31, not as the digits written; "
            'fix: quote the account id as written ("0x1f")'
        ],
        id="account-in-hex-notation",
    ),
    pytest.param(
        lambda _text: "",
        ["dev.yaml: (top level): the file is empty; fix: write the environment's fields, starting with 'name: dev'"],
        id="empty-file",
    ),
    pytest.param(
        lambda _text: "- name: dev\n",
        [
            "dev.yaml: (top level): expected a mapping of fields, found a list; fix: write one 'key: value' per line, starting with 'name: dev'"
        ],
        id="top-level-is-a-list",
    ),
]


@pytest.mark.parametrize(("edit", "expected"), TEXT_CASES)
def test_invalid_yaml_gives_exact_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: Callable[[str], str], expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dev.yaml").write_text(edit(dump(valid_dev())), encoding="utf-8")

    assert load_error("dev", tmp_path) == expected


def test_missing_file_lists_existing_environments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    write_env(tmp_path, "dev", valid_dev())

    assert load_error("qa", tmp_path) == [
        "qa.yaml: file not found; fix: create it, or choose an existing environment (dev)"
    ]


def test_file_outside_cwd_is_shown_with_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_dir = tmp_path / "conf"
    config_dir.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    data = valid_dev()
    data["region"] = "us-east"
    write_env(config_dir, "dev", data)

    assert load_error("dev", config_dir) == [
        f"{config_dir / 'dev.yaml'}: region: 'us-east' is not an AWS region code; "
        "fix: use a code such as us-east-1 or eu-west-1"
    ]


def test_config_dir_below_cwd_is_shown_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config_dir = tmp_path / "conf"
    config_dir.mkdir()
    monkeypatch.chdir(tmp_path)
    write_env(config_dir, "dev", valid_dev())

    assert load_error("qa", config_dir) == [
        "conf/qa.yaml: file not found; fix: create it, or choose an existing environment (dev)"
    ]


def test_several_problems_in_one_file_give_one_line_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["regoin"] = "us-east-1"
    data["account"] = "12345"
    data["network"]["egress"] = "public"
    data["logging"]["retention_days"] = 45
    write_env(tmp_path, "dev", data)

    assert load_error("dev", tmp_path) == [
        "dev.yaml: account: '12345' is not an AWS account id; fix: write the 12-digit account id as a quoted string",
        "dev.yaml: network.egress: 'public' is invalid: Input should be 'nat' or 'isolated'; "
        "fix: use one of 'nat' or 'isolated'",
        f"dev.yaml: logging.retention_days: 45 is not a CloudWatch Logs retention period; fix: use one of {RETENTIONS}",
        f"dev.yaml: regoin: unknown key; fix: did you mean 'region'? remove it or use one of {TOP_LEVEL_KEYS}",
    ]


def test_load_environments_collects_problems_from_every_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    dev = valid_dev()
    dev["network"]["vpc_cidr"] = "8.8.0.0/16"
    write_env(tmp_path, "dev", dev)
    staging = yaml.safe_load((TEST_CONFIG_DIR / "staging.yaml").read_text(encoding="utf-8"))
    staging["region"] = "us-east"
    del staging["tags"]["Owner"]
    write_env(tmp_path, "staging", staging)

    with pytest.raises(config.ConfigError) as info:
        config.load_environments(config_dir=tmp_path)

    assert info.value.lines == [
        "dev.yaml: network.vpc_cidr: '8.8.0.0/16' is not a private (RFC 1918) range; "
        "fix: use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16",
        "staging.yaml: region: 'us-east' is not an AWS region code; fix: use a code such as us-east-1 or eu-west-1",
        "staging.yaml: tags: missing cost-allocation tag(s) Owner; "
        "fix: add them (required: Project, Environment, Owner, CostCenter)",
    ]
    assert str(info.value) == "\n".join(info.value.lines)


@pytest.mark.parametrize("cidr", ["127.0.0.0/16", "169.254.0.0/16", "198.18.0.0/16"])
def test_non_rfc1918_special_ranges_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cidr: str) -> None:
    """Loopback, link-local and benchmark ranges are not RFC 1918, though ipaddress calls them private."""
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["network"]["vpc_cidr"] = cidr
    write_env(tmp_path, "dev", data)

    assert load_error("dev", tmp_path) == [
        f"dev.yaml: network.vpc_cidr: {cidr!r} is not a private (RFC 1918) range; "
        "fix: use a range inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
    ]


# --- end to end: app.py exits 2 with only the config lines on stderr ----------------------
# One test runs the process the CLI starts; the others call app.main in this process (tests/app_runs.py).


def test_app_exits_2_on_zone_outside_region(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    data = valid_dev()
    data["availability_zones"] = ["us-east-1a", "eu-west-1b"]
    write_env(conf, "dev", data)

    result = run_app({"env": "dev", "config_dir": str(conf)}, tmp_path / "out")

    assert_config_failure(
        result,
        f"{conf / 'dev.yaml'}: availability_zones[1]: 'eu-west-1b' is not an availability zone of us-east-1; "
        "fix: use a zone name such as us-east-1a",
    )


def test_app_exits_2_on_octal_account_naming_the_id_as_written(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    text = dump(valid_dev()).replace("account: '111111111111'", "account: 011111111111")
    assert "account: 011111111111\n" in text
    (conf / "dev.yaml").write_text(text, encoding="utf-8")

    result = run_app({"env": "dev", "config_dir": str(conf)}, tmp_path / "out")

    assert_config_failure(
        result,
        f"{conf / 'dev.yaml'}: account: 011111111111 is read by YAML as the number 1227133513, not as the digits "
        'written; fix: quote the account id as written ("011111111111")',
    )


def test_app_exits_2_on_unknown_key(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    data = valid_dev()
    data["network"]["vpc_cdir"] = "10.10.0.0/16"
    write_env(conf, "dev", data)

    result = run_app({"env": "dev", "config_dir": str(conf)}, tmp_path / "out")

    assert_config_failure(
        result,
        f"{conf / 'dev.yaml'}: network.vpc_cdir: unknown key; "
        f"fix: did you mean 'vpc_cidr'? remove it or use one of {NETWORK_KEYS}",
    )


def test_app_exits_2_on_missing_environment(tmp_path: Path) -> None:
    # With a qa.yaml present this would become a full synth; fail fast instead.
    assert not (CONFIG_DIR / "qa.yaml").exists()

    result = run_app_process({"env": "qa"}, tmp_path / "out")  # the process the CLI starts: exit 2, only the line

    assert_config_failure(
        result,
        "config/qa.yaml: file not found; fix: create it, or choose an existing environment (dev, prod, staging)",
    )


# --- the shipped configs are valid ----------------------------------------------------------


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_config_loads(path: Path) -> None:
    env = config.load_environment(path)

    assert env.name == path.stem
    assert env.tags["Environment"] == path.stem


def test_available_environments() -> None:
    assert config.available_environments() == ["dev", "prod", "staging"]


def test_cross_field_problems_are_all_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["availability_zones"] = ["eu-west-1a", "us-east-1b", "us-west-2c"]
    data["tags"]["Environment"] = "prod"
    write_env(tmp_path, "dev", data)

    assert load_error("dev", tmp_path) == [
        "dev.yaml: availability_zones[0]: 'eu-west-1a' is not an availability zone of us-east-1; "
        "fix: use a zone name such as us-east-1a",
        "dev.yaml: availability_zones[2]: 'us-west-2c' is not an availability zone of us-east-1; "
        "fix: use a zone name such as us-east-1a",
        "dev.yaml: tags.Environment: 'prod' differs from the environment name 'dev'; fix: set it to 'dev'",
    ]


def test_an_empty_cost_allocation_tag_is_named_as_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["tags"]["Owner"] = "  "
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == [
        "dev.yaml: tags: cost-allocation tag(s) Owner are empty; fix: give each a value"
    ]
