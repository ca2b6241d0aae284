"""``asight library``: the schedule library listed, pruned, exported and imported (store/library.py).

Listing, pruning and exporting read the library's files as data; importing a library file checks it as
data (``store/library.read_library_file``), asks TVM (the sandboxed worker) for the target's own text
(so a target written another way lands where tuning looks), and replays every record on its own
workload there, one request each (``worker/library.check_records``): a record that does not replay,
or that crashes TVM, is refused with its reason; the others join the library where they are faster.
"""
from __future__ import annotations

import json
import os

from ..engine import wire
from ..engine.client import WorkerClient
from ..errors import AsightError
from ..store import library as shelf


def listing() -> dict:
    """Where the library is and, per target, its workloads (task name, best µs), fed last first, and
    what of it is not valid."""
    base = shelf.root()
    if base is None:
        return {"folder": None, "off": f"${shelf.LIBRARY_ENV}=off", "targets": []}
    if base.exists() and not base.is_dir():
        return {"folder": str(base), "targets": [], "problem": f"{base} is not a folder: no run can use or feed it"}
    out = []
    for folder, target in shelf.targets():
        read = shelf.read(folder)
        out.append({"target": target, "key": folder.name, "folder": str(folder), "workloads": len(read.entries),
                    "entries": [{"task": e.task, "best_us": e.mean_us} for e in reversed(read.entries)],
                    **({"problem": read.problem()} if read.problem() else {})})
    return {"folder": str(base), "targets": out}


def chosen(target: str | None) -> tuple:
    """(folder, target text) of the library's target named by ``target`` (its key or a prefix of it, its
    text, or a part of its text only one holds); the only one when ``target`` is None."""
    every = shelf.targets()
    found = every
    if target is not None:
        exact = [(f, t) for f, t in every if f.name.startswith(target) or t == target]
        found = exact or [(f, t) for f, t in every if target in t]
    if len(found) == 1:
        return found[0]
    names = "; ".join(f"{f.name} ({t})" for f, t in found or every) or "none"
    if not found:
        raise AsightError(f"the schedule library holds no target {target!r} (its targets: {names})" if target
                          else "the schedule library is empty (every `asight tune` adds its best schedules)")
    raise AsightError(f"the schedule library holds several targets{' matching ' + repr(target) if target else ''}: "
                      f"name one by its key with --target (the targets: {names})")


def prune(target: str | None, keep: int) -> dict:
    """Keep the ``keep`` workloads fed last of one target (0: empty it)."""
    if keep < 0:
        raise AsightError("--keep must be 0 or more")
    folder, text = chosen(target)
    shelf_before, kept = shelf.change(folder, text, lambda entries: entries[len(entries) - keep:] if keep else [])
    return {"target": text, "before": len(shelf_before.entries), "kept": len(kept)}


def export(out: str, target: str | None) -> dict:
    folder, text = chosen(target)
    data = shelf.export_library(folder, text)
    try:
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False)
    except OSError as err:
        raise AsightError(f"cannot write {out}: {err.strerror or err}") from None
    return {"target": text, "file": os.path.abspath(out), "workloads": len(data["workloads"])}


def import_file(path: str, python: str | None = None) -> dict:
    """Add a library file's records that replay (checked in a sandboxed worker) to the library."""
    written, incoming = shelf.read_library_file(path)
    if shelf.root() is None:
        raise AsightError(f"the schedule library is off (${shelf.LIBRARY_ENV}=off): nothing was imported")
    refused, good = [], []
    with WorkerClient(python, 600) as sandboxed:
        target = canonical_target(sandboxed, written)
        for entry in incoming:
            why = wire.library_replay_problem(sandboxed, entry.workload, entry.record)
            (refused.append({"task": entry.task, "why": why}) if why else good.append(entry))
    taken = [0]

    def edit(entries):
        entries, taken[0] = shelf.merge(entries, good)
        return entries
    if good:
        shelf.change(shelf.folder_for(target), target, edit)
    return {"target": target, "added": taken[0], "not_faster": len(good) - taken[0], "refused": refused}


def canonical_target(worker, text: str) -> str:
    """The target's text as TVM prints it (the key tuning looks under); ``AsightError`` for one TVM refuses."""
    try:
        return worker.request(wire.TARGET, {"target": text})["label"]
    except AsightError as err:
        raise AsightError(f"the library file's target is not one TVM knows ({str(err).splitlines()[0][:200]}): "
                          "nothing was imported") from None

