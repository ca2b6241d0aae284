"""Whose run a run folder is: this user's, made on this machine, or shipped (cloned, copied, unpacked).

A run folder is data a repository can ship, and a shipped run must never be taken for the user's own:
tuning never resumes it, appends to it or prunes it.  ``RunStore.create`` writes an ``owner`` file into
each run it makes: an HMAC of the run's id and this machine's id under a key only this user can read
(``key_path``: ``~/.config/asight/owner.key`` of the user's passwd home, 0600, made on first use).
Another user, another machine or a repository cannot write a marker that verifies here; a run folder
without one (made before markers, or elsewhere) is shipped.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import pwd
import secrets
from functools import lru_cache
from pathlib import Path

from ..errors import AsightError
from .files import NotPlainFile, read_plain, write_atomic

OWNER_FILE = "owner"
_SCHEMA = "asight-run-owner/1"


KEY_ENV = "ASIGHT_OWNER_KEY"


def key_path() -> Path:
    """``$ASIGHT_OWNER_KEY``, else ``.config/asight/owner.key`` in the user's home as the password
    database gives it: not ``$HOME`` or ``$XDG_CONFIG_HOME``, which an editor may change (a Flatpak
    VS Code, an isolated test profile), so that the runs this user makes in a terminal are the user's
    own in the editor too."""
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV])
    try:
        home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:                   # a uid without an entry (some containers)
        home = Path.home()
    return home / ".config" / "asight" / "owner.key"


@lru_cache(maxsize=4)
def _key(path: Path) -> bytes:
    """This user's key (made 0600 in a 0700 folder when missing)."""
    try:
        return read_plain(path, 1024)
    except FileNotFoundError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:           # another process made it first
        return read_plain(path, 1024)
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(32))
    return read_plain(path, 1024)


def _machine() -> str:
    for name in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            return Path(name).read_text().strip()
        except OSError:
            continue
    return os.uname().nodename


def _marker(run_id: str) -> str:
    digest = hmac.new(_key(key_path()), f"{run_id}\0{_machine()}".encode(), hashlib.sha256).hexdigest()
    return f"{_SCHEMA} {digest}\n"


def make_own_folder(run_dir: Path) -> None:
    """Make a new run's folder (``FileExistsError`` when it is there) and mark it as this user's own."""
    run_dir.mkdir(parents=True, exist_ok=False)
    mark_own(run_dir)


def mark_own(run_dir: Path) -> None:
    """Mark a run this process has just made as this user's own (when the key cannot be kept, the run
    is left unmarked: shown and tuned, never resumed)."""
    try:
        write_atomic(run_dir / OWNER_FILE, _marker(run_dir.name))
    except (OSError, NotPlainFile):
        pass


def is_own(run_dir: Path) -> bool:
    """Whether this user made the run folder on this machine (its marker verifies); False for a shipped
    run, and when the marker or the key cannot be read."""
    try:
        found = read_plain(run_dir / OWNER_FILE, 256).decode("ascii")
        return hmac.compare_digest(found, _marker(run_dir.name))
    except (OSError, NotPlainFile, UnicodeDecodeError):
        return False


class ShippedRun(AsightError):
    """An action that would write into a run folder this user did not make here (``is_own``)."""


def require_own(run_dir: Path, action: str) -> None:
    """The one rule for every action that writes into an existing run (measure, remeasure, cancel,
    tune its missing kernels; a repair is skipped instead): only this user's own run is written; a
    shipped run (cloned, copied, unpacked, or made before runs were marked) is read-only, shown as it
    was recorded."""
    if not is_own(run_dir):
        raise ShippedRun(f"run {run_dir.name} is shipped (its folder was not made by you on this machine), so it "
                         f"is read-only and {action} would write into it; its recorded results are shown as they "
                         f"are. To measure or tune on from its records, make them your own run: "
                         f"asight adopt {run_dir} --file <the tuned file>")
