"""The pipeline's config, ``config/pipeline/pipeline.yaml``: its schema and its loader.

It lives in a folder of its own because every ``config/*.yaml`` is an environment.
Mistakes read like an environment's (``config.loader``): one line per problem,
naming the file, the field, the value and the fix.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from config.base import Strict
from config.fleets import FleetRole, Scheduler
from config.loader import CONFIG_DIR, ConfigError, available_environments, display_path, read_mapping, validate_model
from config.schema import AccountId, Environment, Region

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
    #: Environments of ``promotion`` whose post-deploy check also runs the fabric check on their training fleets
    #: (``gpu-platform job fabric-test``, through the role ``gpu-platform-<env>-fabric-check`` of that environment).
    fabric_check: list[str] = Field(default_factory=list)
    #: Environments of ``promotion`` whose deploy first checks that their golden AMI is the one the fabric check of
    #: the nearest environment of ``fabric_check`` before them ran on (``ami_gate_source``), through the role
    #: ``gpu-platform-<env>-ami-gate`` of that environment.
    ami_gate: list[str] = Field(default_factory=list)
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
        for field in ("manual_approval", "fabric_check", "ami_gate"):
            for i, name in enumerate(getattr(self, field)):
                if name not in seen:
                    problems.append(f"@{field}[{i}]: {name!r} is not in promotion; fix: use one of {', '.join(seen)}")
        for i, name in enumerate(self.ami_gate):
            if name in seen and self.ami_gate_source(name) is None:
                problems.append(
                    f"@ami_gate[{i}]: {name!r} has no environment of fabric_check before it in promotion, so no "
                    f"fabric check tests its AMI; fix: add the environment before it that tests the AMI to "
                    f"fabric_check, or remove {name!r} from ami_gate"
                )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def ami_gate_source(self, env: str) -> str | None:
        """The environment whose fabric check ``env``'s AMI gate compares with: the nearest one of
        ``fabric_check`` before ``env`` in ``promotion`` (None when there is none)."""
        before = self.promotion[: self.promotion.index(env)] if env in self.promotion else []
        return next((name for name in reversed(before) if name in self.fabric_check), None)


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


def fabric_check_role_name(env: str) -> str:
    """The role of environment ``env`` the pipeline's fabric check assumes (created only where ``fabric_check``
    lists ``env``)."""
    return f"gpu-platform-{env}-fabric-check"


def fabric_step_role_name(env: str) -> str:
    """The tooling account's role of ``env``'s FabricCheck step: the one principal the environment's role trusts."""
    return f"gpu-platform-pipeline-{env}-fabric-check"


def ami_gate_role_name(env: str) -> str:
    """The role of environment ``env`` the pipeline's AMI gate assumes (created only where ``ami_gate`` lists
    ``env``): it reads the AMI parameter and describes images."""
    return f"gpu-platform-{env}-ami-gate"


def ami_gate_step_role_name(env: str) -> str:
    """The tooling account's role of ``env``'s AmiGate step: the one principal the environment's role trusts."""
    return f"gpu-platform-pipeline-{env}-ami-gate"


@dataclass(frozen=True)
class FabricCheckTrust:
    """Who may assume a role of an environment that a pipeline step uses (the fabric check's, the AMI gate's):
    one named role of the tooling account."""

    account: str
    role_name: str


def fabric_check_trust(env: Environment, config_dir: Path = CONFIG_DIR) -> FabricCheckTrust | None:
    """The trust of ``env``'s fabric check role, or None where the pipeline does not run the check on ``env``.

    Read from ``<config_dir>/pipeline/pipeline.yaml`` (absent: None) by the environment's own synth too, so a
    laptop deploy and the pipeline's deploy make the same Fleets stack. An environment in ``fabric_check``
    without a training fleet is a one-line ConfigError.
    """
    if not (config_dir / PIPELINE_FILE).is_file():
        return None
    pipeline = load_pipeline(config_dir)
    if env.name not in pipeline.fabric_check:
        return None
    if not any(fleet.role is FleetRole.TRAINING and fleet.scheduler is Scheduler.NONE for fleet in env.fleets):
        raise ConfigError(
            [
                f"{display_path(config_dir / PIPELINE_FILE)}: fabric_check[{pipeline.fabric_check.index(env.name)}]: "
                f"{env.name!r} has no training fleet to check (on an Auto Scaling group: a Slurm fleet's fabric is "
                f"tested as a Slurm job); fix: remove it from fabric_check, or add a fleet with role: training to "
                f"config/{env.name}.yaml"
            ]
        )
    return FabricCheckTrust(account=pipeline.account, role_name=fabric_step_role_name(env.name))


def ami_gate_trust(env: Environment, config_dir: Path = CONFIG_DIR) -> FabricCheckTrust | None:
    """The trust of ``env``'s AMI gate role, or None where the pipeline does not gate ``env``'s deploy on its AMI.

    Read from ``<config_dir>/pipeline/pipeline.yaml`` (absent: None) by the environment's own synth too, as
    ``fabric_check_trust`` is.
    """
    if not (config_dir / PIPELINE_FILE).is_file():
        return None
    pipeline = load_pipeline(config_dir)
    if env.name not in pipeline.ami_gate:
        return None
    return FabricCheckTrust(account=pipeline.account, role_name=ami_gate_step_role_name(env.name))


@dataclass(frozen=True)
class PipelineRoles:
    """The roles of one environment that pipeline steps assume (None: the pipeline does not run that step on it),
    resolved from ``pipeline.yaml`` before synth: the stacks take them as values and read no file."""

    fabric_check: FabricCheckTrust | None = None
    ami_gate: FabricCheckTrust | None = None


def pipeline_roles(env: Environment, config_dir: Path = CONFIG_DIR) -> PipelineRoles:
    """``env``'s fabric check and AMI gate trusts from ``<config_dir>/pipeline/pipeline.yaml`` (absent: none)."""
    return PipelineRoles(fabric_check=fabric_check_trust(env, config_dir), ami_gate=ami_gate_trust(env, config_dir))


def pinned_cdk_cli_version(package_json: Path) -> str:
    """The CDK CLI version ``package.json`` pins: the pipeline's self-mutation installs the same one."""
    return json.loads(package_json.read_text(encoding="utf-8"))["devDependencies"]["aws-cdk"]
