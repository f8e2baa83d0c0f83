"""``job`` and ``job fabric-test`` refuse what the nodes would refuse, from their arguments, before they look
for credentials: each mistake is one line and exit 2 with no AWS credentials at all (a check that came after
the credentials would print the no-credentials line instead). The working directory is normalised first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ops import args
from ops.args import ArgumentError
from ops.cli import NO_CREDENTIALS
from tests.ops.helpers import run_cli
from tests.ops.job.fakes import ENV, FakeNodes, deploy
from tests.synth import TEST_CONFIG_DIR


@pytest.fixture
def no_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def _job(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run_cli(capsys, "job", *argv[:1], "--env", ENV, "--config-dir", str(TEST_CONFIG_DIR), *argv[1:])


RUN = ("run", "--fleet", "training")
FABRIC = ("fabric-test", "--fleet", "training")  # staging's training fleet: p4d.24xlarge, 40 GiB per GPU


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ((*RUN, "--workdir", "/fsx/../etc", "--", "true"), "--workdir: '/fsx/../etc' is not below /fsx (it is /etc)"),
        ((*RUN, "--workdir", "/fsx/jobs/../../home", "--", "true"), "is not below /fsx (it is /home)"),
        ((*RUN, "--workdir", "jobs/a", "--", "true"), "--workdir: 'jobs/a' is not an absolute path"),
        ((*RUN, "--workdir", "/fsx/my job", "--", "true"), "--workdir: '/fsx/my job' has a character the job document"),
        ((*RUN, "--name", "-bad", "--", "true"), "--name: '-bad' is not a job name"),
        ((*RUN, "--name", "a/b", "--", "true"), "--name: 'a/b' is not a job name"),
        ((*RUN, "--resume", "../j"), "--resume: '../j' is not a job name"),
        ((*RUN, "--resume", "j", "--name", "k"), "--resume reuses the job's command"),
        ((*RUN,), "no command; fix: give the job's command after --"),
        ((*RUN, "--", "", "x"), "the command's first word '' is empty"),
        ((*RUN, "--", "python3", "-c", "a\nb"), "the command holds a line break"),
        ((*RUN, "--", "x" * 4097), "the command is 4097 characters, the job document takes at most 4096"),
        ((*RUN, "--nodes", "3", "--", "true"), "--nodes: 3 is more than fleets[training].capacity.max (2) in "),
        (("run", "--fleet", "inference", "--", "true"), "fleets: inference is an inference fleet"),
        (("status", "../x"), "JOB: '../x' is not a job name"),
        (("cancel", "x;y"), "JOB: 'x;y' is not a job name"),
        (("logs", "a b"), "JOB: 'a b' is not a job name"),
        ((*FABRIC, "--max-bytes", "1X"), "fabric-test: --max-bytes: '1X' is not a size; fix: a whole number of bytes"),
        ((*FABRIC, "--max-bytes", "-1G"), "fabric-test: --max-bytes: '-1G' is not a size"),
        ((*FABRIC, "--max-bytes", "4"), "fabric-test: --max-bytes: '4' is below the smallest message (8 bytes)"),
        ((*FABRIC, "--max-bytes", "32G"), "two buffers (64 GiB) on each GPU, more than the 40 GiB of p4d.24xlarge"),
        ((*FABRIC, "--timeout", "-5"), "fabric-test: --timeout: -5 is not a wait; fix: a positive number of seconds"),
        ((*FABRIC, "--timeout", "0"), "fabric-test: --timeout: 0 is not a wait"),
        ((*FABRIC, "--timeout", "inf"), "fabric-test: --timeout: inf is not a wait"),
    ],
)
def test_a_mistake_is_one_line_before_any_credentials(
    no_credentials: None, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], expected: str
) -> None:
    code, out, err = _job(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and expected in err, err
    assert NO_CREDENTIALS not in err


def test_good_arguments_go_on_to_the_credentials(no_credentials: None, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ((*RUN, "--workdir", "/fsx/a/../b", "--", "true"), (*FABRIC, "--max-bytes", "16G", "--timeout", "60")):
        code, _, err = _job(capsys, *argv)
        assert code == 2 and NO_CREDENTIALS in err, err


def test_the_normalised_working_directory_reaches_the_document(aws: Any, nodes: FakeNodes, capsys) -> None:
    fleet, _ = deploy(aws, 1)
    code, out, err = _job(capsys, *RUN, "--name", "j1", "--workdir", "/fsx/exp/./a/../b//", "--", "true")
    assert (code, out) == (0, "j1\n"), err
    (command,) = fleet.commands()
    assert command["Parameters"]["WorkingDirectory"] == ["/fsx/exp/b"]


@pytest.mark.parametrize(
    ("given", "normal"),
    [
        ("/fsx", "/fsx"),
        ("/fsx/", "/fsx"),
        ("/fsx//jobs/./a", "/fsx/jobs/a"),
        ("/fsx/a/..", "/fsx"),
        ("/../fsx/a", "/fsx/a"),
    ],
)
def test_fsx_paths_are_normalised_as_the_node_resolves_them(given: str, normal: str) -> None:
    assert args.fsx_path(given) == normal


@pytest.mark.parametrize("bad", ["/fsx/..", "/fsxdata", "//fsx/a", "/", "/fsx/../fsx2"])
def test_paths_that_leave_fsx_are_refused(bad: str) -> None:
    with pytest.raises(ArgumentError):
        args.fsx_path(bad)


def test_sizes_read_as_the_benchmark_reads_them() -> None:
    assert [args.byte_size(s) for s in ("8", "64k", "128M", "1G", " 16g ")] == [8, 65536, 2**27, 2**30, 16 * 2**30]
    assert args.gpu_buffers(16 * 2**30, 40, "p4d.24xlarge") == 16 * 2**30  # two 16 GiB buffers fit in 40 GiB
