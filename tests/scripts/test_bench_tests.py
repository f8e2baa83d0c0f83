"""make bench-tests (scripts/bench_tests.py), run for real on a small suite of its own: its checks command and
pytest timed per run, the medians against the targets, and pytest's CPU by test folder from every xdist worker."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.bench_tests import folder_of, main

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench_tests.py"
# One folder burns CPU in the test's process, one in a process it starts and leaves running (as a worker leaves its
# jsii runtime), one sleeps: the report must count the first two and rank the third last.
BUSY = """
import time

def test_busy():
    end = time.process_time() + 0.4
    while time.process_time() < end:
        pass
"""
IDLE = """
import time

def test_idle(daemon):
    time.sleep(0.2)

def test_idle_too():
    time.sleep(0.1)
"""
SPAWN = """
import subprocess
import sys
import time

BURN = "import pathlib, sys, time\\nend = time.process_time() + 0.4\\nwhile time.process_time() < end: pass\\n" \\
    "pathlib.Path(sys.argv[1]).touch()\\ntime.sleep(60)"

def test_spawn(tmp_path, spawned):
    marker = tmp_path / "burnt"
    spawned.append(subprocess.Popen([sys.executable, "-c", BURN, str(marker)]))
    while not marker.exists():
        time.sleep(0.02)
"""
# A session fixture's teardown (a daemon stopped at the end) runs in the last test's teardown: counted apart.
CONFTEST = """
import time
import pytest

@pytest.fixture(scope="session")
def spawned():
    children = []
    yield children
    for child in children:
        child.kill()
        child.wait()

@pytest.fixture(scope="session")
def daemon():
    yield
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    for folder, text in (("busy", BUSY), ("spawn", SPAWN), ("idle", IDLE)):
        (tmp_path / "tests" / folder).mkdir(parents=True)
        (tmp_path / "tests" / folder / f"test_{folder}.py").write_text(text)
    (tmp_path / "tests" / "conftest.py").write_text(CONFTEST)
    return tmp_path


def bench(suite: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(BENCH), "--cwd", str(suite), "--checks-command", "true", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def folder_lines(stdout: str) -> dict[str, tuple[float, int]]:
    found = re.findall(r"^\s+([\d.]+) s\s+(\d+) tests\s+(\S+)$", stdout, flags=re.M)
    return {name: (float(cpu), int(count)) for cpu, count, name in found}


@pytest.mark.parametrize(
    ("workers", "runs", "pytest_target", "verdict", "status"),
    [("-p no:xdist", 2, "0.01", "MISSED", 1), ("-n 2", 1, "90", "met", 0)],
    ids=["one-process-target-missed", "two-xdist-workers-targets-met"],
)
def test_each_folders_cpu_is_gathered_from_every_worker_ranked_and_held_to_the_targets(
    suite: Path, workers: str, runs: int, pytest_target: str, verdict: str, status: int
) -> None:
    args = ["--runs", str(runs), "--pytest-target", pytest_target]
    run = bench(suite, *args, "--pytest-args", f"-q -p no:cacheprovider {workers}")
    assert run.returncode == status, run.stderr
    assert len(re.findall(r"^run \d: checks", run.stdout, flags=re.M)) == runs
    folders = folder_lines(run.stdout)
    assert list(folders)[-1] == "tests/idle" and len(folders) == 3  # most CPU first
    assert folders["tests/busy"][0] >= 0.35 and folders["tests/busy"][1] == 1
    assert 0.35 <= folders["tests/spawn"][0] < 1.5 and folders["tests/spawn"][1] == 1  # its child still running
    assert folders["tests/idle"][0] < 0.2 and folders["tests/idle"][1] == 2
    median = rf"[\d.]+ s, median of {runs}"
    assert re.search(rf"^make test :\s+{median} \(target <= 120 s: met\)$", run.stdout, flags=re.M)
    pytest_line = rf"^  pytest  :\s+{median} \(target <= {pytest_target} s: {verdict}\); [\d.]+ s of CPU"
    assert re.search(pytest_line, run.stdout, flags=re.M)
    teardown = re.search(
        r"^\s+([\d.]+) s\s+\(session fixtures torn down after each worker's last test\)$", run.stdout, re.M
    )
    assert teardown and float(teardown[1]) >= 0.25, run.stdout
    elsewhere = re.search(
        r"^\s+(-?[\d.]+) s\s+in no test: pytest's and its workers' start and collection$", run.stdout, re.M
    )
    assert elsewhere and float(elsewhere[1]) >= 0, run.stdout  # nothing counted twice


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--runs", "0"], "bench-tests: --runs must be 1 or more (got 0)"),
        (["--cwd", "/nonexistent"], "bench-tests: --cwd /nonexistent: no such folder; fix: name the repository"),
        (["--pytest-target", "nan"], "bench-tests: --pytest-target must be a number of seconds above 0 (got nan)"),
        (
            ["--make-test-target", "-1"],
            "bench-tests: --make-test-target must be a number of seconds above 0 (got -1.0)",
        ),
        (["--pytest-args", '-k "busy'], "bench-tests: --pytest-args or --checks-command: No closing quotation; fix:"),
        (["--checks-command", " "], "bench-tests: --checks-command is blank; fix: name the command, or pass ''"),
        (["--checks-command", "no-such-checks"], "bench-tests: no-such-checks could not start ([Errno 2]"),
        (
            ["--checks-command", "false"],
            "bench-tests: false failed (exit 1), so nothing was measured: (no output); fix: run `false` to see why",
        ),
    ],
)
def test_bad_input_or_a_failed_check_measures_nothing_in_one_line(
    args: list[str], line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(line) and err.count("\n") == 1


def test_a_failing_test_measures_nothing(suite: Path) -> None:
    (suite / "tests" / "idle" / "test_fails.py").write_text("def test_no():\n    assert False\n")
    run = bench(suite, "--runs", "2", "--pytest-args", "-q -p no:cacheprovider")
    assert run.returncode == 2
    assert run.stderr.startswith("bench-tests: pytest failed (exit 1), so nothing was measured: ")
    assert run.stdout == ""


def test_a_test_is_counted_in_its_modules_folder() -> None:
    assert folder_of("tests/scripts/node/test_x.py::test_y[a/b]") == "tests/scripts/node"
    assert folder_of("test_top.py::test_y") == "."
