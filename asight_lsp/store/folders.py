"""What a run folder and its store must be before anything is read from them (pure filesystem checks):
a run folder is data a repository can ship (docs/sandbox.md)."""
from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from ..errors import AsightError
from .files import read_plain
from .record import Adopted, require_schema, set_aside_measurement


MAX_META_BYTES = 4 << 20      # run.json: metadata (a tiny model's is 19 KB), never more
MAX_META_CONTAINERS = 100_000  # its lists and objects (that model's: 139): 3 bytes of JSON, 56 of Python
MAX_RUN_ENTRIES = 20_000       # files and folders of a run folder (a tuned model's: a few dozen)


def meta_json(data: bytes) -> dict:
    """run.json's object.  Its lists and objects are counted first (an upper bound: brackets inside
    strings count too): five 15 MiB files of empty lists would hold 1.9 GB of the untrusted server.
    ValueError when there are too many, or it is not an object."""
    meta = capped_json(data)
    if not isinstance(meta, dict):
        raise ValueError(f"a JSON {type(meta).__name__}, not an object")
    require_schema(meta)
    require_meta_types(meta)
    set_aside_measurement(meta)
    return meta


def capped_json(data: bytes):
    """``json.loads`` of a run.json's bytes after counting its lists and objects (ValueError past
    ``MAX_META_CONTAINERS``): every reader of a run.json goes through it, readable or not."""
    containers = data.count(b"[") + data.count(b"{")
    if containers > MAX_META_CONTAINERS:
        raise ValueError(f"{containers} lists and objects, more than the {MAX_META_CONTAINERS} a run.json may hold")
    return json.loads(data)


_TYPES = {"file": (str,), "function": (str,), "kind": (str,), "state": (str,), "target_label": (str,),
          "trials_requested": (int,), "trials_done": (int,), "baseline_us": (int, float, type(None)),
          "best_us": (int, float, type(None)), "source_hashes": (dict,),
          "tasks": (list,), "sessions": (list,), "extra": (dict,), "error": (str, type(None)),
          "guided_by": (str, type(None)), "rpc": (str, type(None))}


def require_meta_types(meta: dict) -> None:
    """run.json's fields hold what asight writes: a hand-edited ``"target": 42`` would otherwise reach a
    view as "'int' object has no attribute 'strip'".  ValueError naming the field."""
    for name, kinds in _TYPES.items():
        value = meta.get(name)
        if name in meta and (not isinstance(value, kinds) or isinstance(value, bool)):
            raise ValueError(f"its {name} is {json.dumps(value)[:60]}, not what asight writes there")
    extra = meta.get("extra") if isinstance(meta.get("extra"), dict) else {}
    if "adopted" in meta:               # RunMeta.from_dict moves unknown top-level keys into extra
        extra = {**extra, "adopted": meta["adopted"]}
    adopted = extra.get("adopted")
    if adopted is not None and not isinstance(adopted, dict):
        raise ValueError(f"its extra.adopted is {json.dumps(adopted)[:60]}, not what `asight adopt` writes there "
                         "(adopt the work folder again)")      # else reading its fields is an internal error
    workload = (adopted or {}).get("workload")
    if adopted is not None and (not isinstance(workload, int) or isinstance(workload, bool)):
        # named as its own field: all of extra.adopted, cut at 60 characters, may not reach the bad value
        raise ValueError(f"its extra.adopted.workload is {json.dumps(workload)[:60]}, not what `asight adopt` writes "
                         "there (a workload's line index; adopt the work folder again)")
    why = Adopted.read(extra)[1]       # its other fields: a run of a wrong-typed one would skip adopt's checks
    if why:
        raise ValueError(f"its {why}, not what `asight adopt` writes there (adopt the work folder again)")
    target = meta.get("target")
    readable = target is None or (isinstance(target, str) and 0 < len(target) <= 4096) or \
        (isinstance(target, dict) and isinstance(target.get("kind"), str))
    if not readable:
        raise ValueError(f"its target {json.dumps(target)[:60]} is not a target (a text such as \"llvm\", or "
                         "TVM's target JSON with a \"kind\")")


def claimed_owner(meta_path: Path) -> tuple[str | None, str | None]:
    """The file (absolute) and function an unreadable ``run.json`` still names as plain strings, else
    None for each: the editor and the CLI say which function's run they do not show, instead of "no
    run yet".  Nothing of it is used but to match names."""
    try:
        data = capped_json(read_plain(meta_path, MAX_META_BYTES))
    except (OSError, ValueError, RecursionError, AsightError):   # a link, too large, not JSON
        return None, None
    if not isinstance(data, dict):
        return None, None
    file, function = data.get("file"), data.get("function")
    plain = isinstance(file, str) and 0 < len(file) <= 4096 and "\0" not in file
    return (os.path.abspath(file) if plain else None), (function if isinstance(function, str) else None)


def claims(owner: tuple[str | None, str | None], run_id: str, file: str, names: set[str], prefix) -> str | None:
    """Is an unreadable run (``owner``: ``claimed_owner``) one of ``names``' runs in ``file``?  By the
    names run.json still holds, else by its id (``prefix(name)``: how a function's run ids begin):
    the sentence that says which, None when it is not."""
    owner_file, owner_function = owner
    if owner_file is not None and owner_function is not None:
        mine = owner_file == os.path.abspath(file) and owner_function in names
        return "it is this function's run (its run.json names this file and function)" if mine else None
    if any(run_id.startswith(prefix(name)) for name in names):
        return "it may be this function's run (its id begins as this function's runs do)"
    return None


RUN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")      # what ``new_run_id`` makes


def require_run_name(name: str) -> None:
    """A run's id is its folder's name, and it is shown and written (a comment above an applied
    schedule): a name with a newline would end that comment and put code into the user's file.
    AsightError unless the name is what ``RunStore.new_run_id`` makes."""
    if not RUN_NAME.fullmatch(name) or len(name) > 200:
        raise AsightError(f"the run folder {name[:60]!r} has a name asight never gives a run (letters, digits, "
                          "'_', '.', '-'): rename it to use it")


def require_plain_store(root: Path) -> None:
    """A store's folder and its ``runs/`` are not symbolic links: a repository can ship ``.asight`` ->
    elsewhere, and then tune would write there and every view would read runs from there and write its
    caches there.  AsightError naming the link."""
    for folder in (root, root / "runs"):
        if folder.is_symlink():
            raise AsightError(f"{folder} is a symbolic link (to {os.readlink(folder)}); runs are read and written "
                              "only in a plain folder (ASIGHT_HOME or --work-dir names a store elsewhere)")


def require_plain_folder(path: Path) -> None:
    """A run folder holds plain files and folders only: a link (``source.py`` -> a shell rc,
    ``profiles/`` -> another folder), a FIFO or a device (``run.json`` -> /dev/zero) in a shipped run
    would make the product write, delete or read where the link points.  AsightError
    naming the first such entry.  (Each file's size is ``read_plain``'s to bound.)"""
    if path.is_symlink() or not path.is_dir():
        raise AsightError(f"run {path.name}: not a plain folder (a symbolic link?); not used")
    seen = 0
    for folder, dirs, files in os.walk(path):
        seen += len(dirs) + len(files)
        if seen > MAX_RUN_ENTRIES:
            raise AsightError(f"run {path.name}: more than {MAX_RUN_ENTRIES:,} files and folders, more than a run "
                              "asight writes holds; not used")
        for name in dirs + files:
            entry = os.path.join(folder, name)
            try:
                info = os.lstat(entry)
            except FileNotFoundError:     # a temporary file replaced by a write in progress (store/files)
                continue
            mode = info.st_mode
            linked = stat.S_ISREG(mode) and info.st_nlink > 1      # a hard link (an archive can hold one)
            if linked or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                what = "a symbolic link" if stat.S_ISLNK(mode) else "a hard link" if linked else "not a plain file"
                raise AsightError(f"run {path.name}: {os.path.relpath(entry, path)} is {what}; a run folder "
                                  "holds plain files only, so this run is not used")
