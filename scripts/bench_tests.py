#!/usr/bin/env python3
"""Benchmark: ``make test`` once set up, over several runs, and where the suite's CPU goes.

Each run times ``make test``'s two parts as it runs them: the checks before the suite (``make test-checks``:
lint, mypy, the node code against the node's Python), then pytest with ``make test``'s own arguments
(``--pytest-args``, the Makefile's PYTEST_ARGS). Wall time and CPU (user + system of every process the part
started and reaped) are printed per run, their medians against the targets (pytest and the whole ``make test``),
and where pytest's CPU went, by test folder: this module is also the pytest plugin (``-p scripts.bench_tests``)
that records each test's CPU in each xdist worker: the worker's own and that of every process it started, reaped
or still running (the jsii runtime of its synths, a daemon; read from Linux's /proc) while the test ran. A
session fixture is counted where it is set up (the first test that asks for it) and apart where it is torn down
(after each worker's last test); what no test holds is pytest's and its workers' start and collection.

Exit status: 0 when both targets are met, 1 when one is missed, 2 when nothing could be measured (bad input,
a failed check, a failed test).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: The folder each worker writes its tests' CPU to (set by the benchmark for the pytest it starts).
REPORT_DIR_VAR = "BENCH_TESTS_REPORT_DIR"
PYTEST_TARGET_S = 90.0
MAKE_TEST_TARGET_S = 120.0


# --- the plugin: loaded in pytest and in each of its xdist workers ------------------------------------------


_TICK = os.sysconf("SC_CLK_TCK")


def _live_children_cpu(pid: int) -> float:
    """CPU of ``pid``'s children still running (the jsii runtime of a worker's synths, a daemon), their own reaped
    children's and, around, their live children's: CPU that os.times() counts only once they are reaped."""
    total = 0.0
    for listing in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            children = [int(child) for child in listing.read_text().split()]
        except OSError:  # the thread ended meanwhile
            continue
        for child in children:
            try:
                fields = Path(f"/proc/{child}/stat").read_text().rpartition(")")[2].split()
            except OSError:  # the child ended meanwhile: reaped, it is in os.times()
                continue
            total += sum(int(value) for value in fields[11:15]) / _TICK + _live_children_cpu(child)
    return total


def _cpu_now() -> float:
    """This process's CPU and that of all it started, reaped or still running (Linux's /proc)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + _live_children_cpu(os.getpid())


_rows: list[tuple[str, float]] = []
#: The CPU of the session's fixtures torn down (daemons stopped and reaped) in each worker's last teardown.
SESSION_TEARDOWN = "(session fixtures torn down after each worker's last test)"
_last_teardown: list[float] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    before = _cpu_now()
    try:
        return (yield)
    finally:
        session = sum(_last_teardown)
        _rows.append((item.nodeid, _cpu_now() - before - session))
        if _last_teardown:
            _rows.append((SESSION_TEARDOWN, session))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, object, object]:
    """The last test's teardown also ends the session's fixtures: counted apart, not as that test's."""
    before = _cpu_now()
    try:
        return (yield)
    finally:
        if nextitem is None:
            _last_teardown.append(_cpu_now() - before)


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get(REPORT_DIR_VAR)
    if folder and _rows:
        name = os.environ.get("PYTEST_XDIST_WORKER", "main")
        (Path(folder) / f"{name}.json").write_text(json.dumps(_rows))


# --- the benchmark ------------------------------------------------------------------------------------------


class BenchError(Exception):
    """Nothing could be measured: one line for the person, exit status 2."""


@dataclass
class Run:
    checks_s: float
    checks_cpu: float
    pytest_s: float
    pytest_cpu: float
    by_folder: dict[str, float] = field(default_factory=dict)
    tests: dict[str, int] = field(default_factory=dict)

    @property
    def make_test_s(self) -> float:
        return self.checks_s + self.pytest_s


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], cwd: Path, env: dict[str, str], what: str) -> tuple[float, float]:
    """Run ``argv`` to its end: its wall time and CPU, or BenchError naming it with its last output line."""
    start, cpu = time.perf_counter(), _children_cpu()
    try:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    except OSError as err:
        raise BenchError(f"{what} could not start ({err}); fix: name a command that exists here") from err
    wall, used = time.perf_counter() - start, _children_cpu() - cpu
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines() or ["(no output)"]
        raise BenchError(
            f"{what} failed (exit {done.returncode}), so nothing was measured: {lines[-1]}; "
            f"fix: run `{shlex.join(argv)}` to see why, make it pass, then measure"
        )
    return wall, used


def folder_of(nodeid: str) -> str:
    """The folder of a test's module (``tests/scripts/node`` for ``tests/scripts/node/test_x.py::test_y``)."""
    module = nodeid.split("::", 1)[0]
    return os.path.dirname(module) or "."


def read_report(folder: Path) -> tuple[dict[str, float], dict[str, int]]:
    """The CPU and the number of tests per test folder, over every worker's report in ``folder``."""
    cpu: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for path in folder.glob("*.json"):
        for nodeid, used in json.loads(path.read_text()):
            if nodeid == SESSION_TEARDOWN:
                cpu[nodeid] += used
                continue
            cpu[folder_of(nodeid)] += used
            tests[folder_of(nodeid)] += 1
    return dict(cpu), dict(tests)


def one_run(args: argparse.Namespace) -> Run:
    env = dict(os.environ)
    if args.cwd.resolve() != ROOT:  # the plugin is this module, found from the repository (make test's own PATHs)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    checks_s = checks_cpu = 0.0
    if args.checks:
        checks_s, checks_cpu = timed(args.checks, args.cwd, env, args.checks_command)
    with tempfile.TemporaryDirectory(prefix="bench-tests-") as report:
        argv = [sys.executable, "-m", "pytest", "-p", "scripts.bench_tests", *args.pytest]
        pytest_s, pytest_cpu = timed(argv, args.cwd, {**env, REPORT_DIR_VAR: report}, "pytest")
        by_folder, tests = read_report(Path(report))
    return Run(checks_s, checks_cpu, pytest_s, pytest_cpu, by_folder, tests)


def _median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def _verdict(value: float, target: float) -> str:
    return f"target <= {target:g} s: {'met' if value <= target else 'MISSED'}"


def report(runs: list[Run], args: argparse.Namespace) -> list[str]:
    n = len(runs)
    make_test, pytest_s = _median(r.make_test_s for r in runs), _median(r.pytest_s for r in runs)
    pytest_cpu = _median(r.pytest_cpu for r in runs)
    cores = len(os.sched_getaffinity(0))
    lines = [
        f"run {i}: checks {r.checks_s:.1f} s ({r.checks_cpu:.1f} s CPU), pytest {r.pytest_s:.1f} s "
        f"({r.pytest_cpu:.1f} s CPU), make test {r.make_test_s:.1f} s"
        for i, r in enumerate(runs, 1)
    ]
    lines += [
        f"make test : {make_test:6.1f} s, median of {n} ({_verdict(make_test, args.make_test_target)})",
        f"  checks  : {_median(r.checks_s for r in runs):6.1f} s ({args.checks_command or 'none'})",
        f"  pytest  : {pytest_s:6.1f} s, median of {n} ({_verdict(pytest_s, args.pytest_target)}); "
        f"{pytest_cpu:.1f} s of CPU on {cores} cores: no faster than {pytest_cpu / cores:.1f} s here",
        f"where pytest's CPU went (median of {n} per folder; a test's own and that of all it started meanwhile):",
    ]
    folders = {name for r in runs for name in r.by_folder}
    cpu = {name: _median(r.by_folder.get(name, 0.0) for r in runs) for name in folders}
    ranked = sorted(cpu, key=lambda name: -cpu[name])
    for name in ranked[: args.top]:
        count = runs[-1].tests.get(name)
        lines.append(f"  {cpu[name]:7.1f} s {f'{count:5d} tests' if count else '':11}  {name}")
    rest = ranked[args.top :]
    if rest:
        lines.append(f"  {sum(cpu[name] for name in rest):7.1f} s {'':11} {len(rest)} other folders")
    elsewhere = _median(r.pytest_cpu - sum(r.by_folder.values()) for r in runs)
    lines.append(f"  {elsewhere:7.1f} s {'':11} in no test: pytest's and its workers' start and collection")
    return lines


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2, help="runs of make test's two parts (default 2)")
    parser.add_argument("--pytest-args", default="", help="make test's pytest arguments (the Makefile's PYTEST_ARGS)")
    parser.add_argument(
        "--checks-command",
        default="make --no-print-directory test-checks",
        help="what make test runs before pytest ('' for none)",
    )
    parser.add_argument("--cwd", type=Path, default=ROOT, help="where both run (default: the repository)")
    parser.add_argument("--top", type=int, default=15, help="folders listed by their CPU (default 15)")
    parser.add_argument("--pytest-target", type=float, default=PYTEST_TARGET_S, help="seconds (default 90)")
    parser.add_argument("--make-test-target", type=float, default=MAKE_TEST_TARGET_S, help="seconds (default 120)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        raise BenchError(f"--runs must be 1 or more (got {args.runs})")
    if args.top < 0:
        raise BenchError(f"--top must be 0 or more (got {args.top})")
    if not args.cwd.is_dir():
        raise BenchError(f"--cwd {args.cwd}: no such folder; fix: name the repository (or leave --cwd out)")
    for name in ("pytest_target", "make_test_target"):
        if not 0 < getattr(args, name) < math.inf:
            raise BenchError(
                f"--{name.replace('_', '-')} must be a number of seconds above 0 (got {getattr(args, name)})"
            )
    try:
        args.pytest, args.checks = shlex.split(args.pytest_args), shlex.split(args.checks_command)
    except ValueError as err:
        raise BenchError(f"--pytest-args or --checks-command: {err}; fix: quote as a shell would") from err
    if args.checks_command and not args.checks:
        raise BenchError("--checks-command is blank; fix: name the command, or pass '' for none")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
        runs = []
        for i in range(args.runs):
            runs.append(one_run(args))
            print(f"bench-tests: run {i + 1} of {args.runs}: {runs[-1].make_test_s:.1f} s", file=sys.stderr, flush=True)
    except BenchError as err:
        print(f"bench-tests: {err}", file=sys.stderr)
        return 2
    print("\n".join(report(runs, args)))
    make_test, pytest_s = _median(r.make_test_s for r in runs), _median(r.pytest_s for r in runs)
    return 0 if make_test <= args.make_test_target and pytest_s <= args.pytest_target else 1


if __name__ == "__main__":
    sys.exit(main())
