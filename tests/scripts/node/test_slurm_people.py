"""scripts/node/slurm_people.py: the POSIX users against a fake getent and useradd on PATH (a passwd file of the
test's own), and the accounting step's changes against a recording sacctmgr (the real one: tests/flows/slurm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.scripts.node.helpers import NODE_DIR  # puts scripts/node on sys.path

# isort: split
import slurm_people

SCRIPT = NODE_DIR / "slurm_people.py"
PEOPLE = {
    "teams": [{"name": "vision", "shares": 60}, {"name": "nlp", "shares": 40}],
    "users": [{"name": "ada", "uid": 5001, "team": "vision"}, {"name": "lin", "uid": 5002, "team": "nlp"}],
    "urgent_qos": {"name": "urgent", "priority": 1000},
}
FAKE_GETENT = """#!/usr/bin/env bash
[[ "$1" == passwd ]] || exit 1
while IFS=: read -r name pw uid rest; do
  if [[ "$name" == "$2" || "$uid" == "$2" ]]; then echo "$name:$pw:$uid:$rest"; exit 0; fi
done < "$FAKE_PASSWD"
exit 2
"""
FAKE_USERADD = """#!/usr/bin/env bash
echo "$*" >> "$FAKE_LOG"
uid=""
while [[ $# -gt 1 ]]; do [[ "$1" == --uid ]] && uid="$2"; shift; done
echo "$1:x:$uid:$uid::/home/$1:/bin/bash" >> "$FAKE_PASSWD"
"""


class Node:
    """A node's passwd file and the fakes that read and write it."""

    def __init__(self, tmp: Path, passwd: list[str]) -> None:
        self.bin, self.passwd, self.log, self.people = tmp / "bin", tmp / "passwd", tmp / "useradd.log", tmp / "p.json"
        self.bin.mkdir()
        for name, body in (("getent", FAKE_GETENT), ("useradd", FAKE_USERADD)):
            (self.bin / name).write_text(body)
            (self.bin / name).chmod(0o755)
        self.passwd.write_text("".join(f"{line}\n" for line in passwd))
        self.people.write_text(json.dumps(PEOPLE))

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PATH": f"{self.bin}:{os.environ['PATH']}", "FAKE_PASSWD": str(self.passwd),
               "FAKE_LOG": str(self.log)}  # fmt: skip
        for key in ("GETENT_BIN", "USERADD_BIN", "PEOPLE_FILE"):
            env.pop(key, None)
        argv = [sys.executable, str(SCRIPT), *args, "--people", str(self.people)]
        return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=False)

    def useradds(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path, ["root:x:0:0:root:/root:/bin/bash", "ubuntu:x:1000:1000::/home/ubuntu:/bin/bash"])


def test_users_are_added_with_their_uids_once(node: Node) -> None:
    done = node.run("users")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "slurm_people: added user ada (uid 5001, team vision)",
        "slurm_people: added user lin (uid 5002, team nlp)",
    ]
    assert node.useradds() == [
        "--uid 5001 --user-group --create-home --shell /bin/bash --comment GPU platform, team vision ada",
        "--uid 5002 --user-group --create-home --shell /bin/bash --comment GPU platform, team nlp lin",
    ]
    again = node.run("users")
    assert (again.returncode, again.stdout.strip()) == (0, "slurm_people: users: nothing to change")
    assert len(node.useradds()) == 2


def test_a_name_with_another_uid_is_refused_in_one_line(tmp_path: Path) -> None:
    node = Node(tmp_path, ["ada:x:1001:1001::/home/ada:/bin/bash"])
    done = node.run("users")
    assert done.returncode == 1 and node.useradds() == []
    assert done.stderr.count("\n") == 1
    assert "ada has uid 1001 on this node and 5001 in the config; fix:" in done.stderr


def test_a_uid_taken_by_someone_else_is_refused_in_one_line(tmp_path: Path) -> None:
    node = Node(tmp_path, ["builder:x:5001:5001::/home/builder:/bin/bash"])
    done = node.run("users")
    assert done.returncode == 1 and node.useradds() == []
    assert done.stderr.strip().startswith("slurm_people: uid 5001 of ada is builder's on this node; fix:")
    assert done.stderr.count("\n") == 1


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("{", "Expecting property name"),
        (json.dumps({**PEOPLE, "users": [{"name": "Ada!", "uid": 5001, "team": "vision"}]}), "user 'Ada!'"),
        (json.dumps({**PEOPLE, "users": [{"name": "ada", "uid": 5001, "team": "ops"}]}), "does not list: ops"),
    ],
)
def test_a_bad_people_file_is_exit_2_in_one_line(node: Node, content: str, said: str) -> None:
    node.people.write_text(content)
    done = node.run("apply")
    assert done.returncode == 2 and said in done.stderr and done.stderr.count("\n") == 1
    assert node.useradds() == []


def test_no_sacctmgr_is_one_line(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(slurm_people, "SACCTMGR", str(node.bin / "no-sacctmgr"))
    with pytest.raises(slurm_people.PeopleError, match="no-sacctmgr not found"):
        slurm_people.apply_accounts(slurm_people.parse_people(PEOPLE))


def test_accounts_set_what_differs_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """The records as an earlier config left them: nlp's shares, vision's QoS, urgent's priority, ada's default."""
    shown = {
        "qos": "normal|0\nurgent|500\n",
        "assoc": "root||1|normal\nvision||60|normal\nvision|ada|1|normal\nnlp||10|normal,urgent\nold|ada|1|normal\n",
        "user": "root|root\nada|old\n",
    }
    changes: list[str] = []

    def sacctmgr(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
        if "show" in argv:
            return 0, shown[argv[argv.index("show") + 1]]
        changes.append(" ".join(argv[2:]))
        return 0, ""

    monkeypatch.setattr(slurm_people, "_run", sacctmgr)
    done = slurm_people.apply_accounts(slurm_people.parse_people(PEOPLE))
    assert changes == [
        "modify qos where name=urgent set Priority=1000",
        "modify account where name=vision set QosLevel=normal,urgent",
        "modify account where name=nlp set Fairshare=40",
        "add user lin Account=nlp DefaultAccount=nlp",
        "modify user where name=ada set DefaultAccount=vision",
    ]
    assert done == [
        "QoS urgent: priority 500 -> 1000",
        "account vision: QoS normal -> normal,urgent",
        "account nlp: fair share 10 -> 40",
        "added lin to account nlp",
        "ada: default account old -> vision",
    ]
