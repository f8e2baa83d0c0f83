"""Storage config mistakes: each gives its exact one-line error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.config.helpers import load_error, valid_dev, write_env


def _fs(**changes: Any) -> dict[str, Any]:
    fs = {"deployment_type": "SCRATCH_2", "storage_capacity_gib": 1200, "availability_zone": "us-east-1a"}
    fs.update(changes)
    return {k: v for k, v in fs.items() if v is not None}


def _dra(path: str, prefix: str) -> dict[str, str]:
    return {"file_system_path": path, "bucket_prefix": prefix}


CASES = [
    pytest.param(
        {"file_system": _fs(deployment_type="SCRATCH_1", storage_capacity_gib=4800), "associations": []},
        [
            "dev.yaml: storage.file_system.storage_capacity_gib: 4800 is not valid for SCRATCH_1; fix: use 1200, 2400 or a multiple of 3600"
        ],
        id="scratch1-capacity",
    ),
    pytest.param(
        {"file_system": _fs(storage_capacity_gib=3600)},
        [
            "dev.yaml: storage.file_system.storage_capacity_gib: 3600 is not valid for SCRATCH_2; fix: use 1200 or a multiple of 2400"
        ],
        id="scratch2-capacity",
    ),
    pytest.param(
        {
            "file_system": _fs(
                deployment_type="PERSISTENT_2", storage_capacity_gib=2000, per_unit_storage_throughput=125
            )
        },
        [
            "dev.yaml: storage.file_system.storage_capacity_gib: 2000 is not valid for PERSISTENT_2; fix: use 1200 or a multiple of 2400"
        ],
        id="persistent2-capacity",
    ),
    pytest.param(
        {"file_system": _fs(deployment_type="PERSISTENT_2", per_unit_storage_throughput=200)},
        [
            "dev.yaml: storage.file_system.per_unit_storage_throughput: 200 is not offered for PERSISTENT_2; "
            "fix: use one of 125, 250, 500, 1000 (MB/s per TiB)"
        ],
        id="persistent2-throughput",
    ),
    pytest.param(
        {"file_system": _fs(deployment_type="PERSISTENT_1")},
        [
            "dev.yaml: storage.file_system.per_unit_storage_throughput: required for PERSISTENT_1; "
            "fix: set one of 50, 100, 200 (MB/s per TiB)"
        ],
        id="persistent1-throughput-missing",
    ),
    pytest.param(
        {"file_system": _fs(per_unit_storage_throughput=125)},
        [
            "dev.yaml: storage.file_system.per_unit_storage_throughput: SCRATCH_2 takes no per-unit throughput; "
            "fix: remove it (scratch throughput follows capacity)"
        ],
        id="scratch-throughput",
    ),
    pytest.param(
        {"file_system": _fs(automatic_backup_retention_days=7), "associations": []},
        [
            "dev.yaml: storage.file_system.automatic_backup_retention_days: SCRATCH_2 file systems have no backups; "
            "fix: set it to 0, or use a PERSISTENT deployment type"
        ],
        id="scratch-backups",
    ),
    pytest.param(
        {
            "file_system": _fs(
                deployment_type="PERSISTENT_2", per_unit_storage_throughput=125, automatic_backup_retention_days=7
            )
        },
        [
            "dev.yaml: storage.file_system.automatic_backup_retention_days: FSx for Lustre does not back up file "
            "systems linked to S3; fix: set it to 0 (the versioned data bucket is the durable copy) or remove the "
            "associations"
        ],
        id="backups-with-associations",
    ),
    pytest.param(
        {"file_system": _fs(deployment_type="SCRATCH_1")},
        [
            "dev.yaml: storage.associations: SCRATCH_1 file systems cannot have data repository associations; "
            "fix: use SCRATCH_2 or a PERSISTENT type, or remove the associations"
        ],
        id="scratch1-associations",
    ),
    pytest.param(
        {"file_system": _fs(), "associations": [_dra(f"/d{i}", f"d{i}/") for i in range(9)]},
        [
            "dev.yaml: storage.associations: 9 data repository associations; fix: FSx for Lustre allows at most 8 "
            "per file system: merge prefixes or drop some"
        ],
        id="nine-associations",
    ),
    pytest.param(
        {"file_system": _fs(), "associations": [_dra("/data", "datasets/"), _dra("/data", "checkpoints/")]},
        [
            "dev.yaml: storage.associations[1].file_system_path: '/data' overlaps associations[0] ('/data'); "
            "fix: give each association its own directory, none inside another"
        ],
        id="duplicate-path",
    ),
    pytest.param(
        {"file_system": _fs(), "associations": [_dra("/data", "datasets/"), _dra("/data/ckpt", "checkpoints/")]},
        [
            "dev.yaml: storage.associations[1].file_system_path: '/data/ckpt' overlaps associations[0] ('/data'); "
            "fix: give each association its own directory, none inside another"
        ],
        id="nested-path",
    ),
    pytest.param(
        {"file_system": _fs(), "associations": [_dra("/a", "data/"), _dra("/b", "data/sub/")]},
        [
            "dev.yaml: storage.associations[1].bucket_prefix: 'data/sub/' overlaps associations[0] ('data/'); "
            "fix: give each association its own prefix, none inside another"
        ],
        id="nested-prefix",
    ),
    pytest.param(
        {"file_system": _fs(), "associations": [_dra("datasets", "datasets/")]},
        [
            "dev.yaml: storage.associations[0].file_system_path: 'datasets' is not an absolute directory path; "
            "fix: write it like /datasets"
        ],
        id="relative-path",
    ),
    pytest.param(
        {"file_system": _fs(), "associations": [_dra("/datasets", "/datasets")]},
        [
            "dev.yaml: storage.associations[0].bucket_prefix: '/datasets' is not a bucket prefix; "
            "fix: write it like datasets/ (no leading '/', one trailing '/')"
        ],
        id="bad-prefix",
    ),
    pytest.param(
        {"file_system": _fs(availability_zone="us-east-1c")},
        [
            "dev.yaml: storage.file_system.availability_zone: 'us-east-1c' is not one of this environment's zones; "
            "fix: use one of us-east-1a, us-east-1b"
        ],
        id="zone-not-in-environment",
    ),
    pytest.param(
        {"file_system": _fs(deployment_type="SCRATCH_3")},
        [
            "dev.yaml: storage.file_system.deployment_type: 'SCRATCH_3' is invalid: Input should be 'SCRATCH_1', "
            "'SCRATCH_2', 'PERSISTENT_1' or 'PERSISTENT_2'; fix: use one of 'SCRATCH_1', 'SCRATCH_2', 'PERSISTENT_1' "
            "or 'PERSISTENT_2'"
        ],
        id="unknown-deployment-type",
    ),
    pytest.param(
        {"file_system": _fs(), "associations": [{**_dra("/d", "d/"), "import_events": ["NEW", "MOVED"]}]},
        [
            "dev.yaml: storage.associations[0].import_events[1]: 'MOVED' is invalid: Input should be 'NEW', "
            "'CHANGED' or 'DELETED'; fix: make it 'NEW', 'CHANGED' or 'DELETED'"
        ],
        id="unknown-event",
    ),
]


@pytest.mark.parametrize(("storage", "expected"), CASES)
def test_invalid_storage_gives_exact_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, storage: dict[str, Any], expected: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    data = valid_dev()
    data["storage"] = storage
    write_env(tmp_path, "dev", data)
    assert load_error("dev", tmp_path) == expected
