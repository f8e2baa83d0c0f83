"""gpu-platform validate on the mistakes of each class: one line naming file, field and fix, exit 2 (a
config error) or a WARNING (a file that looks like an environment but is not read); ``--env a,b``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from ops.findings import Level
from ops.validate import validate
from tests.ops.helpers import FIXTURES, config_dir, run_cli


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    folder = config_dir(tmp_path)
    path = folder / "dev.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return folder


CLASSES = [
    pytest.param(
        "egress: nat ",
        "egress: off ",
        "dev.yaml: network.egress: off unquoted is the boolean",
        "quote it: 'off'",
        id="yaml-boolean",
    ),
    pytest.param(
        "  retention_days: 30",
        "\tretention_days: 30",
        "dev.yaml: line 17, column 1: a tab in the indentation",
        "replace the tab",
        id="tab",
    ),
    pytest.param(
        "[g6.xlarge, g6.2xlarge]",
        "[g6.xlarg]",
        "dev.yaml: fleets[0].instance_types[0]: g6.xlarg",
        "g6.xlarge, g6e.xlarge or g6.8xlarge",
        id="instance-type",
    ),
    pytest.param(
        "    containers: true\n",
        "    containers: true\n    port: 8080\n",
        "dev.yaml: fleets[1].port: unknown key",
        "belongs under fleets[1].service",
        id="wrong-level",
    ),
    pytest.param(
        '"0 20 * * *"',
        '"0 20 * * 8"',
        "dev.yaml: fleets[1].scaling.schedules[0].cron: '0 20 * * 8'",
        "day of week 0-6",
        id="cron",
    ),
    pytest.param(
        "time_zone: America/New_York, min: 0",
        "time_zone: Mars/Olympus, min: 0",
        "dev.yaml: fleets[1].scaling.schedules[0].time_zone",
        "tz database",
        id="time-zone",
    ),
    pytest.param(
        "        internal: true ",
        "        certificate_arn: arn:aws:acm:us-west-2:111111111111:certificate/12345678-1234-4234-8234-123456789012\n        internal: true ",
        "dev.yaml: fleets[1].service.load_balancer.certificate_arn: the certificate is in us-west-2",
        "in ACM of us-east-1",
        id="certificate",
    ),
    pytest.param(
        "gpu_subnet_mask: 20",
        "gpu_subnet_mask: 28\n  # x",
        "dev.yaml: network.gpu_subnet_mask",
        "or lower capacity.max",
        id="subnet-size",
    ),
]


@pytest.mark.parametrize(("old", "new", "start", "fix"), CLASSES)
def test_each_class_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, start: str, fix: str
) -> None:
    if "gpu_subnet_mask: 28" in new:  # 4 + 2 nodes fit a /28's 11 addresses: make the inference fleet larger
        folder = _edited(tmp_path, old, new)
        text = (folder / "dev.yaml").read_text(encoding="utf-8")
        (folder / "dev.yaml").write_text(
            text.replace("capacity: {min: 1, max: 4, desired: 1}", "capacity: {min: 1, max: 10, desired: 1}"),
            encoding="utf-8",
        )
    else:
        folder = _edited(tmp_path, old, new)
    code, out, err = run_cli(capsys, "validate", "--env", "dev", "--config-dir", str(folder))
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{folder}/{start}")
    # The fix: after "; fix: ", or the catalog's "did you mean" for an instance type.
    assert fix in lines[0].partition("; fix: ")[2] or fix in lines[0].partition("did you mean ")[2]


def test_env_takes_comma_separated_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = config_dir(tmp_path)
    code, out, _ = run_cli(capsys, "validate", "--env", "dev,prod", "--config-dir", str(folder), "--json")
    names = {Path(f["message"].split(":", 1)[0]).stem for f in json.loads(out)["findings"]}
    assert code == 0 and names == {"dev", "prod"}
    code, out, _ = run_cli(capsys, "validate", "--env", "dev", "-e", "staging", "--config-dir", str(folder), "--json")
    assert {Path(f["message"].split(":", 1)[0]).stem for f in json.loads(out)["findings"]} == {"dev", "staging"}


def test_a_comma_separated_unknown_name_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = config_dir(tmp_path)
    code, out, err = run_cli(capsys, "validate", "--env", "dev,qa", "--config-dir", str(folder))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"{folder}/qa.yaml: file not found; fix: create it, or choose an existing environment (dev, prod, staging)"
    ]


Place = Callable[[Path], Path]

UNREAD = [
    pytest.param(
        lambda d: d / "qa.yml", "rename it to {d}/qa.yaml if it is an environment, else move it out of {d}/", id="yml"
    ),
    pytest.param(
        lambda d: d / "QA.YAML",
        "rename it to {d}/qa.yaml if it is an environment, else move it out of {d}/",
        id="upper-case",
    ),
    pytest.param(
        lambda d: d / "dev.yaml.bak", "move it out of {d}/ ({d}/dev.yaml is the environment dev)", id="backup"
    ),
    pytest.param(
        lambda d: d / "envs" / "qa.yaml",
        "rename it to {d}/qa.yaml if it is an environment, else move it out of {d}/",
        id="subfolder",
    ),
]


@pytest.mark.parametrize(("place", "fix"), UNREAD)
def test_a_file_that_looks_like_an_environment_but_is_not_read_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], place: Place, fix: str
) -> None:
    folder = config_dir(tmp_path)
    path = place(folder)
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        (FIXTURES / "dev.yaml").read_text(encoding="utf-8").replace("name: dev", "name: qa"), encoding="utf-8"
    )
    (folder / "pipeline").mkdir()
    (folder / "pipeline" / "pipeline.yaml").write_text("promotion: [dev]\n", encoding="utf-8")  # not environment-shaped
    unread = [f for f in validate(None, folder) if f.check == "unread-config-file"]
    assert [(f.level, f.message, f.fix) for f in unread] == [
        (
            Level.WARNING,
            f"{path}: not read: environments are the <env>.yaml files directly in {folder}/",
            fix.format(d=folder),
        )
    ]
    code, _, _ = run_cli(capsys, "validate", "--config-dir", str(folder), "--strict")
    assert code == 1


def test_the_shipped_pipeline_config_is_not_an_unread_environment() -> None:
    """config/pipeline/pipeline.yaml has an account and a region (the tooling account's) and is read by every synth."""
    from config.loader import CONFIG_DIR
    from ops.validate import unread_file_findings

    assert (CONFIG_DIR / "pipeline" / "pipeline.yaml").is_file()
    assert unread_file_findings(CONFIG_DIR) == []
