"""Who builds the golden AMI and who receives it: rules that need every environment at once.

One environment with internet egress builds (``image.build: true``) and lists in
``image.share_with`` the environments that receive its AMIs (``image.build: false``,
typically the isolated ones). Each file is valid on its own (``config.schema``); this
module checks the set and resolves, for each environment, where its AMIs come from and
where they go. ``config.loader.load_platform`` runs it on every file of the folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from config.image import SLURM_VERSION_PARAMETERS, pcs_pin_problems
from config.naming import ResourceNames
from config.schema import Environment
from config.slurm import PCS_REGIONS

#: The role Image Builder assumes in every account it copies an AMI into: it looks it up by this fixed name.
DISTRIBUTION_ROLE_NAME = "EC2ImageBuilderDistributionCrossAccountRole"


@dataclass(frozen=True)
class AmiTarget:
    """An environment that receives the AMIs of a building environment."""

    env: str
    account: str
    region: str
    parameter_name: str  #: its AMI parameter, written by the building environment's distribution


@dataclass(frozen=True)
class AmiSource:
    """The building environment an environment receives its AMIs from."""

    env: str
    account: str
    region: str


@dataclass(frozen=True)
class ImageSharing:
    """One environment's place in the AMI flow.

    - a building environment: ``source`` is None, ``targets`` the environments it copies to, and ``efa``
      whether a fleet that launches its AMIs uses EFA (one of its own, or of a target): its image must then
      carry the EFA software those fleets need;
    - a receiving one: ``source`` is the building environment, ``targets`` empty, ``efa`` False.
    """

    source: AmiSource | None = None
    targets: tuple[AmiTarget, ...] = ()
    efa: bool = False


@dataclass(frozen=True)
class Platform:
    """Every environment of the config folder, validated together, and those to synthesize."""

    environments: Mapping[str, Environment]
    selected: tuple[str, ...]
    config_dir: Path
    """The folder they were read from: its ``pipeline/pipeline.yaml`` says which pipeline roles each one has."""

    @property
    def selected_environments(self) -> list[Environment]:
        return [self.environments[name] for name in self.selected]

    def sharing(self, name: str) -> ImageSharing:
        return image_sharing(name, self.environments)


def image_sharing(name: str, environments: Mapping[str, Environment]) -> ImageSharing:
    """Where ``name``'s AMIs come from and go to, in a set that ``sharing_problems`` found valid."""
    env = environments[name]
    if env.image.build:
        targets = []
        for target in env.image.share_with:
            other = environments[target]
            targets.append(
                AmiTarget(
                    env=other.name,
                    account=other.account,
                    region=other.region,
                    parameter_name=ResourceNames.of(other).ami_parameter,
                )
            )
        launching = [env, *(environments[target.env] for target in targets)]
        return ImageSharing(targets=tuple(targets), efa=any(fleet.efa for e in launching for fleet in e.fleets))
    (builder,) = [e for e in environments.values() if e.image.build and name in e.image.share_with]
    return ImageSharing(source=AmiSource(env=builder.name, account=builder.account, region=builder.region))


def sharing_problems(environments: Mapping[str, Environment], shown: Mapping[str, str]) -> list[str]:
    """One line per problem of the set, naming file, field, value and fix.

    ``environments`` holds every environment of the config folder by name, each valid on its
    own; ``shown`` gives each one's file as the user should read it (``config/dev.yaml``).
    """
    problems: list[str] = []
    builders = sorted(n for n, e in environments.items() if e.image.build)
    received_from: dict[str, list[str]] = {}
    for name in builders:
        env = environments[name]
        for i, target in enumerate(env.image.share_with):
            field = f"{shown[name]}: image.share_with[{i}]"
            if target not in environments:
                known = ", ".join(sorted(n for n in environments if n != name))
                fix = f"remove it or use one of {known}" if known else f"remove it or add {target}.yaml"
                problems.append(f"{field}: {target!r} has no config file ({target}.yaml); fix: {fix}")
            elif environments[target].image.build:
                problems.append(
                    f"{field}: {target!r} builds its own AMIs (image.build is true in {shown[target]}); "
                    f"fix: set image.build: false in {shown[target]}, or remove {target!r} here"
                )
            else:
                received_from.setdefault(target, []).append(name)
    for name in sorted(n for n, e in environments.items() if not e.image.build):
        sources = received_from.get(name, [])
        if not sources:
            where = (
                f"add {name!r} to image.share_with in {' or '.join(shown[b] for b in builders)}"
                if builders
                else f"set image.build: true in an environment with network.egress: nat and add {name!r} to its "
                "image.share_with"
            )
            problems.append(
                f"{shown[name]}: image.build: false, but no building environment lists {name!r} in image.share_with, "
                f"so its fleets would keep the bootstrap AMI; fix: {where}"
            )
        elif len(sources) > 1:
            problems.append(
                f"{shown[name]}: image.build: false, and {' and '.join(sources)} each list {name!r} in "
                "image.share_with, so their builds would overwrite each other's AMI; "
                f"fix: keep {name!r} in one image.share_with only"
            )
    problems += _account_problems(environments, shown, received_from)
    problems += _slurm_image_problems(environments, shown, received_from)
    return problems


def _slurm_image_problems(
    environments: Mapping[str, Environment], shown: Mapping[str, str], received_from: Mapping[str, list[str]]
) -> list[str]:
    """A building environment's image carries AWS PCS's agent and one Slurm build (its ``PcsSlurmVersion`` pins,
    config/image.py) exactly where it or an environment it builds for has a ``slurm:`` section, of that Slurm version:
    every node runs its cluster's version. The builder needs no PCS cluster of its own."""
    problems = []
    for name in sorted(n for n, e in environments.items() if e.image.build):
        builder = environments[name]
        users = [n for n in [name, *sorted(r for r, b in received_from.items() if name in b)] if environments[n].slurm]
        versions = {n: environments[n].slurm.slurm_version for n in users}  # type: ignore[union-attr]
        if not users:
            problems += [
                f"{shown[name]}: image.versions.{key}: set, but neither {name!r} nor an environment it builds for has a "
                "slurm section, so its image carries no AWS PCS software; fix: remove it, or add the slurm section"
                for key in SLURM_VERSION_PARAMETERS
                if key in builder.image.versions
            ]
        elif len(set(versions.values())) > 1:
            runs = ", ".join(f"{n} {v}" for n, v in versions.items())
            problems.append(
                f"{shown[name]}: image: one image carries one Slurm build, and the environments it is for run Slurm "
                f"{runs}; fix: give them the same slurm.slurm_version"
            )
        elif builder.slurm is None and builder.region not in PCS_REGIONS:
            problems.append(
                f"{shown[name]}: region: {builder.region} has no AWS PCS repository to download the agent and Slurm "
                f"from, and {' and '.join(users)} {'runs' if len(users) == 1 else 'run'} Slurm on the image it builds; fix: build their image in a region "
                "where PCS runs (e.g. us-east-1), or from an environment there"
            )
        elif builder.slurm is None:
            (version,) = set(versions.values())
            runs = f"{' and '.join(users)} {'runs' if len(users) == 1 else 'run'} Slurm {version} on it"
            problems += [
                f"{shown[name]}: {line[1:]}" for line in pcs_pin_problems(builder.image.versions, version, runs)
            ]
    return problems


def _account_problems(
    environments: Mapping[str, Environment], shown: Mapping[str, str], received_from: Mapping[str, list[str]]
) -> list[str]:
    """An account holds one distribution role (its name is fixed): one receiving environment per account."""
    problems = []
    first_in_account: dict[str, str] = {}
    for name in sorted(received_from):
        env = environments[name]
        if any(environments[b].account == env.account for b in received_from[name]):
            continue  # same account as its builder: the AMI is already there, no role needed
        other = first_in_account.setdefault(env.account, name)
        if other != name:
            problems.append(
                f"{shown[name]}: account: {env.account!r} is also the account of {other!r} ({shown[other]}), and "
                f"both receive AMIs through the one {DISTRIBUTION_ROLE_NAME} an account can hold; "
                "fix: give each environment that receives AMIs its own account"
            )
    return problems
