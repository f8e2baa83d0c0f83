"""Schema of the ``storage:`` section: FSx for Lustre and its links to the data bucket."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from config.base import Strict

#: Allowed per-unit storage throughput (MB/s/TiB) of SSD deployment types.
PER_UNIT_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
#: Baseline throughput of scratch file systems, MB/s per TiB (FSx for Lustre performance table).
SCRATCH_MB_PER_TIB = 200
MAX_ASSOCIATIONS = 8  # FSx for Lustre: at most 8 data repository associations per file system
Event = Literal["NEW", "CHANGED", "DELETED"]
EVENTS: tuple[Event, ...] = ("NEW", "CHANGED", "DELETED")


class DeploymentType(StrEnum):
    SCRATCH_1 = "SCRATCH_1"
    SCRATCH_2 = "SCRATCH_2"
    PERSISTENT_1 = "PERSISTENT_1"
    PERSISTENT_2 = "PERSISTENT_2"

    @property
    def persistent(self) -> bool:
        return self.value.startswith("PERSISTENT")


class DataRepositoryAssociation(Strict):
    """A file system directory linked to a prefix of the data bucket."""

    file_system_path: str
    bucket_prefix: str
    import_events: list[Event] = Field(default_factory=lambda: list(EVENTS))
    export_events: list[Event] = Field(default_factory=lambda: list(EVENTS))

    @field_validator("file_system_path")
    @classmethod
    def _fs_path(cls, value: str) -> str:
        if not value.startswith("/") or "//" in value or (len(value) > 1 and value.endswith("/")):
            raise ValueError(f"{value!r} is not an absolute directory path; fix: write it like /datasets")
        return value

    @field_validator("bucket_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if value.startswith("/") or not value.endswith("/") or "//" in value:
            raise ValueError(
                f"{value!r} is not a bucket prefix; fix: write it like datasets/ (no leading '/', one trailing '/')"
            )
        return value


class FileSystem(Strict):
    deployment_type: DeploymentType
    storage_capacity_gib: Annotated[int, Field(gt=0)]
    availability_zone: str
    per_unit_storage_throughput: int | None = None
    data_compression: Literal["LZ4", "NONE"] = "LZ4"
    lustre_version: Literal["2.15", "2.12"] = "2.15"
    automatic_backup_retention_days: Annotated[int, Field(ge=0, le=90)] = 0

    @property
    def baseline_throughput_mb_per_s(self) -> float:
        """Baseline throughput of the whole file system: per-unit throughput (scratch: a fixed rate) per TiB."""
        per_tib = self.per_unit_storage_throughput if self.deployment_type.persistent else SCRATCH_MB_PER_TIB
        assert per_tib is not None, "a persistent file system has a per-unit throughput (checked by _rules)"
        return per_tib * self.storage_capacity_gib / 1024

    @model_validator(mode="after")
    def _rules(self) -> FileSystem:
        problems = []
        kind, size = self.deployment_type, self.storage_capacity_gib
        if kind is DeploymentType.SCRATCH_1:
            if size not in (1200, 2400) and size % 3600:
                problems.append(
                    f"@storage_capacity_gib: {size} is not valid for SCRATCH_1; "
                    "fix: use 1200, 2400 or a multiple of 3600"
                )
        elif size != 1200 and size % 2400:
            problems.append(
                f"@storage_capacity_gib: {size} is not valid for {kind}; fix: use 1200 or a multiple of 2400"
            )
        allowed = PER_UNIT_THROUGHPUT.get(kind)
        throughput = self.per_unit_storage_throughput
        if allowed and throughput is None:
            problems.append(
                f"@per_unit_storage_throughput: required for {kind}; "
                f"fix: set one of {', '.join(map(str, allowed))} (MB/s per TiB)"
            )
        elif allowed and throughput not in allowed:
            problems.append(
                f"@per_unit_storage_throughput: {throughput} is not offered for {kind}; "
                f"fix: use one of {', '.join(map(str, allowed))} (MB/s per TiB)"
            )
        if not allowed and throughput is not None:
            problems.append(
                f"@per_unit_storage_throughput: {kind} takes no per-unit throughput; "
                "fix: remove it (scratch throughput follows capacity)"
            )
        if self.automatic_backup_retention_days and not kind.persistent:
            problems.append(
                f"@automatic_backup_retention_days: {kind} file systems have no backups; "
                "fix: set it to 0, or use a PERSISTENT deployment type"
            )
        if problems:
            raise ValueError("\n".join(problems))
        return self


class Storage(Strict):
    file_system: FileSystem
    associations: list[DataRepositoryAssociation] = Field(
        default_factory=lambda: [
            DataRepositoryAssociation(file_system_path="/datasets", bucket_prefix="datasets/"),
            DataRepositoryAssociation(file_system_path="/checkpoints", bucket_prefix="checkpoints/"),
        ]
    )

    @field_validator("associations", mode="before")
    @classmethod
    def _at_most_eight(cls, value: object) -> object:
        if isinstance(value, list) and len(value) > MAX_ASSOCIATIONS:
            raise ValueError(
                f"{len(value)} data repository associations; fix: FSx for Lustre allows at most {MAX_ASSOCIATIONS} "
                "per file system: merge prefixes or drop some"
            )
        return value

    @model_validator(mode="after")
    def _associations(self) -> Storage:
        problems = []
        fs = self.file_system
        if self.associations and fs.deployment_type is DeploymentType.SCRATCH_1:
            problems.append(
                "@associations: SCRATCH_1 file systems cannot have data repository associations; "
                "fix: use SCRATCH_2 or a PERSISTENT type, or remove the associations"
            )
        if self.associations and fs.automatic_backup_retention_days:
            problems.append(
                "@file_system.automatic_backup_retention_days: FSx for Lustre does not back up file systems "
                "linked to S3; fix: set it to 0 (the versioned data bucket is the durable copy) or remove the associations"
            )
        paths: dict[str, int] = {}
        prefixes: dict[str, int] = {}
        for i, dra in enumerate(self.associations):
            for j, other in paths.items():
                if _nested(dra.file_system_path, j):
                    problems.append(
                        f"@associations[{i}].file_system_path: {dra.file_system_path!r} overlaps "
                        f"associations[{other}] ({j!r}); fix: give each association its own directory, none inside another"
                    )
            for p, other in prefixes.items():
                if dra.bucket_prefix.startswith(p) or p.startswith(dra.bucket_prefix):
                    problems.append(
                        f"@associations[{i}].bucket_prefix: {dra.bucket_prefix!r} overlaps "
                        f"associations[{other}] ({p!r}); fix: give each association its own prefix, none inside another"
                    )
            paths.setdefault(dra.file_system_path, i)
            prefixes.setdefault(dra.bucket_prefix, i)
        if problems:
            raise ValueError("\n".join(problems))
        return self


def _nested(a: str, b: str) -> bool:
    """True when one directory is the other or lies inside it."""
    a, b = a.rstrip("/") + "/", b.rstrip("/") + "/"
    return a.startswith(b) or b.startswith(a)
