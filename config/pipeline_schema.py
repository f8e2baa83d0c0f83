"""The pipeline's config, ``config/pipeline/pipeline.yaml``: its schema and its loader.

It lives in a folder of its own because every ``config/*.yaml`` is an environment.
Mistakes read like an environment's (``config.loader``): one line per problem,
naming the file, the field, the value and the fix.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict
from config.loader import CONFIG_DIR, ConfigError, available_environments, display_path, read_mapping, validate_model
from config.schema import AccountId, Region

#: Where the pipeline's file lies, relative to the config folder.
PIPELINE_FILE = Path("pipeline") / "pipeline.yaml"

#: Tags every pipeline resource carries (the environments' ``Environment`` tag has no meaning here).
REQUIRED_PIPELINE_TAGS = ("Project", "Owner", "CostCenter")

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_CONNECTION_ARN = re.compile(
    rf"^arn:aws(-[a-z]+)*:(codeconnections|codestar-connections):[a-z]{{2}}(-[a-z]+)+-\d:\d{{12}}:connection/{_UUID}$"
)
_REPOSITORY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$")
_BRANCH = re.compile(r"^(?!/)(?!.*//)(?!.*\.\.)[A-Za-z0-9._/-]+(?<!/)(?<!\.lock)$")


class Pipeline(Strict):
    """The GitOps pipeline: the tooling account it runs in, the repository it watches, the promotion order."""

    account: AccountId
    region: Region
    connection_arn: str
    repository: str
    branch: str
    promotion: Annotated[list[str], Field(min_length=1)]
    manual_approval: list[str] = Field(default_factory=list)
    tags: dict[str, str]

    @field_validator("connection_arn")
    @classmethod
    def _connection_arn(cls, value: str) -> str:
        if not _CONNECTION_ARN.match(value):
            raise ValueError(
                f"{value!r} is not a connection ARN; fix: copy the ARN of an available GitHub connection "
                "(Developer Tools > Settings > Connections): arn:aws:codeconnections:<region>:<account>:connection/<uuid>"
            )
        return value

    @field_validator("repository")
    @classmethod
    def _repository(cls, value: str) -> str:
        if not _REPOSITORY.match(value):
            raise ValueError(
                f"{value!r} is not a GitHub repository; fix: write it as owner/name, e.g. example-org/gpu-platform"
            )
        return value

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str) -> str:
        if not _BRANCH.match(value):
            raise ValueError(f"{value!r} is not a branch name; fix: write the branch to deploy from, e.g. main")
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: dict[str, str]) -> dict[str, str]:
        missing = [t for t in REQUIRED_PIPELINE_TAGS if not value.get(t)]
        if missing:
            raise ValueError(
                f"missing cost-allocation tag(s) {', '.join(missing)}; "
                f"fix: add them (required: {', '.join(REQUIRED_PIPELINE_TAGS)})"
            )
        return value

    @model_validator(mode="after")
    def _lists(self) -> Pipeline:
        problems = []
        seen: dict[str, int] = {}
        for i, name in enumerate(self.promotion):
            if name in seen:
                problems.append(
                    f"@promotion[{i}]: {name!r} is already listed at promotion[{seen[name]}]; "
                    "fix: list each environment once"
                )
            seen.setdefault(name, i)
        for i, name in enumerate(self.manual_approval):
            if name not in seen:
                problems.append(
                    f"@manual_approval[{i}]: {name!r} is not in promotion; fix: use one of {', '.join(seen)}"
                )
        if problems:
            raise ValueError("\n".join(problems))
        return self


def load_pipeline(config_dir: Path = CONFIG_DIR) -> Pipeline:
    """Read and validate ``<config_dir>/pipeline/pipeline.yaml``; promotion names must be environments of ``config_dir``."""
    path = config_dir / PIPELINE_FILE
    shown = display_path(path)
    data = read_mapping(
        path,
        shown,
        what="the pipeline's fields",
        missing_fix="create it with the tooling account, region, connection_arn, repository, branch and promotion (docs/operations.md: The pipeline)",
        first_field="account: <tooling account id>",
    )
    pipeline = validate_model(Pipeline, data, shown)
    known = available_environments(config_dir)
    problems = []
    for i, name in enumerate(pipeline.promotion):
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(
                f"{shown}: promotion[{i}]: {name!r} is not an environment; "
                f"fix: {hint}use one of {', '.join(known) or 'none'} (config/<env>.yaml)"
            )
    if problems:
        raise ConfigError(problems)
    return pipeline


def pinned_cdk_cli_version(package_json: Path) -> str:
    """The CDK CLI version ``package.json`` pins: the pipeline's self-mutation installs the same one."""
    return json.loads(package_json.read_text(encoding="utf-8"))["devDependencies"]["aws-cdk"]
