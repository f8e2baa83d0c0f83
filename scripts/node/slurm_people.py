#!/usr/bin/env python3
"""The people of the environment's Slurm cluster on this node, from the people file its user data writes
(``/etc/gpu-platform/people.json``, rendered from config's ``slurm.teams`` and ``slurm.users``):

    slurm_people.py users [--people FILE]     # every person's POSIX user, with the config's uid (every Slurm node)
    slurm_people.py accounts [--people FILE]  # Slurm accounting (a login node): teams, people, the urgent QoS
    slurm_people.py apply [--people FILE]     # both

``users``: ``useradd --uid UID --user-group --create-home`` for a person this node does not know yet (the group
takes the same id where it is free). A person already here with the config's uid is left as is; a name here with
another uid, or the uid taken by someone else, is refused in one line: jobs, files on Lustre and Session Manager's
Run As must see one uid per person on every node.

``accounts`` (``sacctmgr --immediate``): the QoS ``urgent`` with its priority; per team an account with its
fair-share shares that may use ``normal`` and ``urgent``; each person in their team's account, their default.
What is already so is not touched: a second run changes nothing. Nothing is deleted (a person or team left out of
the config keeps their Slurm records; ``sacctmgr delete`` is an administrator's decision).

Settings (environment): ``PEOPLE_FILE``, ``GETENT_BIN``, ``USERADD_BIN``, ``SACCTMGR_BIN`` (tests move them;
``sacctmgr`` is looked up on PATH, then under PCS's Slurm prefix ``/opt/aws/pcs/scheduler/slurm-*/bin``).
Exit 0 done; 1 refused or a command failed (one line); 2 bad usage or a people file that cannot be read.
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

PEOPLE_FILE = os.environ.get("PEOPLE_FILE") or "/etc/gpu-platform/people.json"
GETENT = os.environ.get("GETENT_BIN") or "getent"
USERADD = os.environ.get("USERADD_BIN") or "useradd"
#: Where PCS installs its Slurm build (not on a unit's PATH).
PCS_SLURM_BINS = "/opt/aws/pcs/scheduler/slurm-*/bin"


def _find_sacctmgr() -> str:
    """SACCTMGR_BIN, else ``sacctmgr`` on PATH, else the newest under PCS's Slurm prefix, else the bare name."""
    found = sorted(glob.glob(f"{PCS_SLURM_BINS}/sacctmgr"))
    return os.environ.get("SACCTMGR_BIN") or shutil.which("sacctmgr") or (found[-1] if found else "sacctmgr")


SACCTMGR = _find_sacctmgr()
TIMEOUT_S = 60.0
#: What config/slurm.py allows: anything else could not be a POSIX name or a sacctmgr word.
NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
#: The QoS every account may use besides the urgent one.
NORMAL_QOS = "normal"


class PeopleError(Exception):
    """One line: what is refused, or which command failed and what it said."""


@dataclass(frozen=True)
class Person:
    name: str
    uid: int
    team: str


@dataclass(frozen=True)
class People:
    teams: dict[str, int]  # account -> fair-share shares
    users: list[Person]
    urgent_qos: str
    urgent_priority: int


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not NAME.match(value):
        raise ValueError(f"{what} {value!r} is not a POSIX or Slurm name")
    return value


def _number(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{what} {value!r} is not a whole number")
    return value


def parse_people(data: object) -> People:
    """The people file's content; ValueError (one line) where it is not what the renderer writes."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    teams = {_name(t.get("name"), "team"): _number(t.get("shares"), "shares") for t in data.get("teams", [])}
    users = [
        Person(_name(u.get("name"), "user"), _number(u.get("uid"), "uid"), _name(u.get("team"), "team"))
        for u in data.get("users", [])
    ]
    unknown = sorted({u.team for u in users} - set(teams))
    if unknown:
        raise ValueError(f"users in teams the file does not list: {', '.join(unknown)}")
    qos = data.get("urgent_qos", {})
    return People(teams, users, _name(qos.get("name"), "QoS"), _number(qos.get("priority"), "priority"))


def read_people(path: str) -> People:
    try:
        with open(path, encoding="utf-8") as file:
            return parse_people(json.load(file))
    except (OSError, ValueError, AttributeError) as err:
        raise ValueError(f"{path}: {err}") from None


def _run(argv: list[str], ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise PeopleError(f"{argv[0]} not found") from None
    except subprocess.TimeoutExpired:
        raise PeopleError(f"{' '.join(argv[:4])} did not answer within {TIMEOUT_S:g} s") from None
    if done.returncode not in ok:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise PeopleError(f"{' '.join(argv[:4])} exited {done.returncode}: {said[-1] if said else 'no output'}")
    return done.returncode, done.stdout


# -- POSIX users --


def passwd_entry(key: str) -> list[str] | None:
    """``getent passwd KEY`` (a name or a uid) split on ':'; None when there is none (getent's status 2)."""
    status, out = _run([GETENT, "passwd", key], ok=(0, 2))
    return out.strip().split(":") if status == 0 and out.strip() else None


def ensure_user(person: Person) -> bool:
    """The person's POSIX user with their uid: True when added, False when already there; PeopleError on a clash."""
    entry = passwd_entry(person.name)
    if entry is not None:
        if entry[2] != str(person.uid):
            raise PeopleError(
                f"{person.name} has uid {entry[2]} on this node and {person.uid} in the config; fix: give "
                f"{person.name} uid {entry[2]} in slurm.users, or a node image without that user"
            )
        return False
    owner = passwd_entry(str(person.uid))
    if owner is not None:
        raise PeopleError(
            f"uid {person.uid} of {person.name} is {owner[0]}'s on this node; fix: give {person.name} a uid no "
            "image user has in slurm.users"
        )
    _run([USERADD, "--uid", str(person.uid), "--user-group", "--create-home", "--shell", "/bin/bash",
          "--comment", f"GPU platform, team {person.team}", person.name])  # fmt: skip
    return True


def apply_users(people: People) -> list[str]:
    """Every person's POSIX user; the lines that say what was added."""
    return [f"added user {p.name} (uid {p.uid}, team {p.team})" for p in people.users if ensure_user(p)]


# -- Slurm accounting --


def _show(*what: str) -> list[list[str]]:
    _, out = _run([SACCTMGR, "--noheader", "--parsable2", "show", *what])
    return [line.split("|") for line in out.splitlines() if line.strip()]


def _change(*words: str) -> None:
    _run([SACCTMGR, "--immediate", *words])


def ensure_qos(people: People) -> list[str]:
    name, priority = people.urgent_qos, people.urgent_priority
    known = {row[0]: row[1] for row in _show("qos", "format=Name,Priority")}
    if name not in known:
        _change("add", "qos", name, f"Priority={priority}", "Description=urgent work: ahead of fair share")
        return [f"added QoS {name} (priority {priority})"]
    if known[name] != str(priority):
        _change("modify", "qos", "where", f"name={name}", "set", f"Priority={priority}")
        return [f"QoS {name}: priority {known[name]} -> {priority}"]
    return []


def ensure_teams(people: People, assoc: dict[tuple[str, str], tuple[str, set[str]]]) -> list[str]:
    """Per team its account (no user) with its shares, allowed normal and urgent."""
    done = []
    qos = f"{NORMAL_QOS},{people.urgent_qos}"
    for team, shares in people.teams.items():
        if (team, "") not in assoc:
            _change("add", "account", team, f"Description={team} team", "Organization=gpu-platform",
                    f"Fairshare={shares}", f"QosLevel={qos}")  # fmt: skip
            done.append(f"added account {team} (fair share {shares})")
            continue
        current, allowed = assoc[(team, "")]
        if current != str(shares):
            _change("modify", "account", "where", f"name={team}", "set", f"Fairshare={shares}")
            done.append(f"account {team}: fair share {current} -> {shares}")
        if not {NORMAL_QOS, people.urgent_qos} <= allowed:
            _change("modify", "account", "where", f"name={team}", "set", f"QosLevel={qos}")
            done.append(f"account {team}: QoS {','.join(sorted(allowed)) or 'none'} -> {qos}")
    return done


def ensure_members(people: People, assoc: dict[tuple[str, str], tuple[str, set[str]]]) -> list[str]:
    """Each person in their team's account (one ``add user`` per team for those not in it yet), their default."""
    done = []
    missing: dict[str, list[str]] = {}
    for person in people.users:
        if (person.team, person.name) not in assoc:
            missing.setdefault(person.team, []).append(person.name)
    for team, names in missing.items():
        _change("add", "user", ",".join(names), f"Account={team}", f"DefaultAccount={team}")
        done += [f"added {name} to account {team}" for name in names]
    defaults = {row[0]: row[1] for row in _show("user", "format=User,DefaultAccount")}
    for person in people.users:
        if defaults.get(person.name, person.team) != person.team:
            _change("modify", "user", "where", f"name={person.name}", "set", f"DefaultAccount={person.team}")
            done.append(f"{person.name}: default account {defaults[person.name]} -> {person.team}")
    return done


def associations() -> dict[tuple[str, str], tuple[str, set[str]]]:
    """(account, user) -> (fair-share shares, allowed QoS); user '' is the account's own association."""
    rows = _show("assoc", "format=Account,User,Fairshare,QOS")
    return {(row[0], row[1]): (row[2], set(filter(None, row[3].split(",")))) for row in rows if len(row) >= 4}


def apply_accounts(people: People) -> list[str]:
    """The QoS first (accounts name it), then the teams, then the people in them (an account just added has none)."""
    assoc = associations()
    return ensure_qos(people) + ensure_teams(people, assoc) + ensure_members(people, assoc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The Slurm cluster's people on this node: POSIX users, accounting.")
    parser.add_argument("command", choices=("users", "accounts", "apply"))
    parser.add_argument("--people", default=PEOPLE_FILE, help=f"the people file (default {PEOPLE_FILE})")
    args = parser.parse_args(argv)
    try:
        people = read_people(args.people)
    except ValueError as err:
        print(f"slurm_people: {err}", file=sys.stderr)
        return 2
    try:
        done = apply_users(people) if args.command in ("users", "apply") else []
        if args.command in ("accounts", "apply"):
            done += apply_accounts(people)
    except PeopleError as err:
        print(f"slurm_people: {err}", file=sys.stderr)
        return 1
    for line in done or [f"{args.command}: nothing to change"]:
        print(f"slurm_people: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
