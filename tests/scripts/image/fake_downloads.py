"""What the parent image downloads and verifies, faked: ``curl`` (AWS PCS's regional repository, served by URL, and a
key for anything else), ``gpg`` and ``gpgv`` (keys that carry their fingerprint, signatures over a file's SHA-256),
and AWS PCS's installers (``fake-pcs-install``) that the served tarballs run. Run by
tests/scripts/image/fake_tool_server.py like the other fake tools.

The repository serves every release asked for, signed with AWS PCS's key, except what the state says: the file
names in ``pcs_unpublished`` answer 404, those in ``pcs_tampered`` are served changed after signing, and
``pcs_key`` (a fingerprint) replaces the key the repository serves.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path

from fake_tools import ROOT, load, save

#: The fingerprint of AWS PCS's signing key, as the AWS PCS User Guide publishes it (spaces left out).
PCS_KEY = "1C2432C1862F64D1F90A239A7EEF030EDDF5C21C"
#: CloudWatch's: the fingerprint ``gpg --show-keys`` gives a key that names none.
SIGNING_KEY = "0123456789ABCDEF0123456789ABCDEFD58167303B789C72"
REPOSITORY = re.compile(r"^https://aws-pcs-repo-(?P<region>[a-z0-9-]+)\.s3\.(?P=region)\.amazonaws\.com/")
AGENT = re.compile(r"aws-pcs-agent/aws-pcs-agent-v(?P<version>[\d.]+)-(?P<release>\d+)\.tar\.gz$")
SLURM = re.compile(
    r"aws-pcs-slurm/aws-pcs-slurm-(?P<major>\d+\.\d+)-installer-(?P<version>[\d.]+)-(?P<release>\d+)\.tar\.gz$"
)
KEY_URL = re.compile(r"^https://aws-pcs-repo-public-keys-(?P<region>[a-z0-9-]+)\.s3\.(?P=region)\.amazonaws\.com/")


def _tarball(folder: str, script: str) -> bytes:
    """A .tar.gz of ``folder``/installer.sh, byte for byte the same each time (signed and served apart)."""
    data = script.encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo(f"{folder}/installer.sh")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    return gzip.compress(buffer.getvalue(), mtime=0)


def _signed(url: str) -> bytes | None:
    """The genuine file at ``url`` of AWS PCS's repository (what its signature is made over), or None."""
    if match := AGENT.search(url):
        version, release = match["version"], match["release"]
        return _tarball("aws-pcs-agent", f'#!/bin/sh\nexec fake-pcs-install agent {version} {release} "$@"\n')
    if match := SLURM.search(url):
        folder = f"aws-pcs-slurm-{match['major']}-installer"
        return _tarball(folder, f'#!/bin/sh\nexec fake-pcs-install slurm {match["version"]} {match["release"]} "$@"\n')
    return None


def _served(url: str, state: dict) -> bytes | None:
    """What ``url`` answers, None for a 404."""
    name = url.rsplit("/", 1)[1]
    if name in state.get("pcs_unpublished", []) or name.removesuffix(".sig") in state.get("pcs_unpublished", []):
        return None
    if KEY_URL.match(url) and "pcs_key_file" in state:  # what the bucket served instead of a key
        return str(state["pcs_key_file"]).encode()
    if KEY_URL.match(url):
        keys = [state.get("pcs_key", PCS_KEY), *state.get("pcs_extra_keys", [])]  # one file may hold several keys
        lines = "".join(f"fpr:{key}\n" for key in keys)
        return f"-----BEGIN PGP PUBLIC KEY BLOCK-----\n{lines}-----END PGP PUBLIC KEY BLOCK-----\n".encode()
    if not REPOSITORY.match(url):
        return None
    if url.endswith(".sig"):
        genuine = _signed(url.removesuffix(".sig"))
        signer = state.get("pcs_signer", PCS_KEY)  # who signed: AWS PCS's key, or another
        return None if genuine is None else f"fake-signature {signer} {hashlib.sha256(genuine).hexdigest()}\n".encode()
    genuine = _signed(url)
    return None if genuine is None else genuine + (b"changed" if name in state.get("pcs_tampered", []) else b"")


def curl(args: list[str]) -> int:
    """``curl -o FILE URL`` from AWS PCS's repository (``curl: (22)`` for a 404, as ``-f`` makes it); without ``-o``,
    a key on stdout (``curl URL | gpg --dearmor``)."""
    if "-o" not in args:
        print("-----BEGIN PGP PUBLIC KEY BLOCK-----\nfake\n-----END PGP PUBLIC KEY BLOCK-----")
        return 0
    target = args[args.index("-o") + 1]
    url = next(a for a in args if a.startswith("https://"))
    content = _served(url, load())
    if content is None:
        print("curl: (22) The requested URL returned error: 404", file=sys.stderr)
        return 22
    Path(target).write_bytes(content)
    return 0


def _fingerprints(path: str) -> list[str]:
    """The primary keys' fingerprints of a key file, in order; none where it is not a key."""
    text = Path(path).read_text()
    if "PGP PUBLIC KEY" not in text and "fake" not in text:
        return []
    return re.findall(r"^fpr:(\w+)$", text, re.MULTILINE) or [SIGNING_KEY]


def gpg(args: list[str]) -> int:
    """``--dearmor -o OUT [IN]`` keeps the key's text (and so its fingerprint); ``--show-keys`` lists it."""
    if "--show-keys" in args:  # --with-colons: a pub record, then its fingerprint, per key
        if not _fingerprints(args[-1]):
            print("gpg: no valid OpenPGP data found.", file=sys.stderr)
            return 2
        for key in _fingerprints(args[-1]):
            print(f"pub:-:4096:1:{key[-16:]}:1700000000:::-:::scESC::::::23::0:")
            print(f"fpr:::::::::{key}:")
    elif "-o" in args:
        out = args[args.index("-o") + 1]
        text = sys.stdin.read() if args[-1] == out else Path(args[-1]).read_text()  # no input file: curl | gpg
        Path(out).write_text(text)
    return 0


def gpgv(args: list[str]) -> int:
    """``gpgv --keyring KEYRING SIG FILE``: a fake signature holds its key's fingerprint and the file's SHA-256 and
    verifies only against both; another signature (the other components' made-up downloads) passes."""
    keyring = args[args.index("--keyring") + 1]
    signature, signed = [a for a in args[args.index("--keyring") + 2 :] if not a.startswith("-")]
    words = Path(signature).read_text().split()
    if words[:1] != ["fake-signature"]:
        return 0
    if words[1] not in _fingerprints(keyring) or words[2:] != [hashlib.sha256(Path(signed).read_bytes()).hexdigest()]:
        print(f'gpgv: BAD signature from "AWS PCS Packages (AWS PCS Packages)" on {Path(signed).name}', file=sys.stderr)
        return 1
    return 0


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def pcs_install(args: list[str]) -> int:
    """``fake-pcs-install agent|slurm VERSION RELEASE [-y]``: what AWS's installer.sh of the agent or of PCS's Slurm
    leaves (the version file, the programs, slurmd's unit), as the user guide describes it. The Slurm installer asks
    before it builds unless given ``-y``; neither takes another option."""
    what, version, release, *options = args
    if any(option != "-y" for option in options):
        return _refuse(f"Invalid option: {next(o for o in options if o != '-y')}")
    state = load()
    pcs = ROOT / "opt/aws/pcs"
    if what == "agent":
        _write(pcs / "version", f"AGENT_INSTALL_DATE='today'\nAGENT_VERSION='{version}'\nAGENT_RELEASE='{release}'\n")
        _write(pcs / "bin/pcs_bootstrap_init.sh", "#!/bin/sh\nexit 0\n", 0o755)
    else:
        if "-y" not in options:
            return _refuse("Proceed with the Slurm build? [y/N] no answer (stdin is closed); run ./installer.sh -y")
        major = version.rsplit(".", 1)[0]
        prefix = pcs / f"scheduler/slurm-{major}"
        _write(
            prefix / "version",
            f"SLURM_INSTALL_DATE='today'\nSLURM_VERSION='{version}'\nPCS_SLURM_RELEASE='{release}'\n",
        )
        for program in ("bin/sinfo", "bin/srun", "sbin/slurmd"):
            _write(prefix / program, f"#!/bin/sh\necho 'slurm {version}'\n", 0o755)
        _write(ROOT / f"etc/systemd/system/slurmd-{major}.service", f"[Service]\nExecStart={prefix}/sbin/slurmd\n")
    package = "aws-pcs-agent" if what == "agent" else f"aws-pcs-slurm-{version.rsplit('.', 1)[0]}"
    before = state.setdefault("pcs", {}).get(package)
    state["pcs"][package] = f"{version}-{release}"
    state["log"].append(
        {"tool": "pcs installer", "package": package, "version": f"{version}-{release}", "before": before}
    )
    save(state)
    return 0


def _refuse(message: str) -> int:
    print(message, file=sys.stderr)
    return 1


TOOLS: dict[str, Callable[[list[str]], int]] = {
    "curl": curl,
    "gpg": gpg,
    "gpgv": gpgv,
    "fake-pcs-install": pcs_install,
}
