"""``app.py -c pipeline=true``: config mistakes exit 2 with one line each, like an environment's."""

from __future__ import annotations

from pathlib import Path

from tests.app_runs import run_app
from tests.config.helpers import assert_config_failure, valid_dev, valid_pipeline, write_config, write_env


def test_app_exits_2_on_a_pipeline_config_mistake(tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    conf.mkdir()
    write_env(conf, "dev", valid_dev())
    path = write_config(conf, {**valid_pipeline(), "promotion": ["dev", "qa"], "manual_approval": []}, environments=())

    result = run_app({"pipeline": "true", "config_dir": str(conf)}, tmp_path / "out")

    assert_config_failure(
        result, f"{path}: promotion[1]: 'qa' is not an environment; fix: use one of dev (config/<env>.yaml)"
    )


def test_app_refuses_an_environment_selection_with_the_pipeline(tmp_path: Path) -> None:
    result = run_app({"pipeline": "true", "env": "dev"}, tmp_path / "out")

    assert_config_failure(
        result,
        "-c env: the pipeline deploys the environments of its promotion list, not a selection; "
        "fix: drop -c env, or drop -c pipeline=true to synthesize environments for a laptop deploy",
    )
