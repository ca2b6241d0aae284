"""``asight library``: the schedule library listed, pruned, exported and imported (store/library.py).

Listing, pruning and exporting read the library's files as data; importing a library file checks it as
data (``store/library.read_library_file``) and then, in a sandboxed worker, that every record replays on
its own workload (``worker/library.check_records``): the records that do not are refused with their
reason, the others join the library.
"""
from __future__ import annotations

import json
import os

from ..engine import wire
from ..engine.client import WorkerClient
from ..errors import AsightError
from ..store import library as shelf


def listing() -> dict:
    """Where the library is and, per target, its workloads (task name, best µs), fed last first."""
    base = shelf.root()
    if base is None:
        return {"folder": None, "off": f"${shelf.LIBRARY_ENV}=off", "targets": []}
    out = []
    for folder, target in shelf.targets():
        kept = shelf.entries(folder)
        out.append({"target": target, "key": folder.name, "folder": str(folder), "workloads": len(kept),
                    "entries": [{"task": e.task, "best_us": e.mean_us} for e in reversed(kept)]})
    return {"folder": str(base), "targets": out}


def chosen(target: str | None) -> tuple:
    """(folder, target text) of the library's target named by ``target`` (its key, or a part of its text
    that only one holds); the only one when ``target`` is None."""
    found = shelf.targets()
    if target is not None:
        found = [(f, t) for f, t in found if f.name == target or target in t]
    if len(found) == 1:
        return found[0]
    names = "; ".join(f"{f.name} ({t})" for f, t in shelf.targets()) or "none"
    if not found:
        raise AsightError(f"the schedule library holds no target {target!r} (its targets: {names})" if target
                          else "the schedule library is empty (every `asight tune` adds its best schedules)")
    raise AsightError(f"the schedule library holds several targets: name one with --target (its targets: {names})")


def prune(target: str | None, keep: int) -> dict:
    """Keep the ``keep`` workloads fed last of one target (0: empty it)."""
    if keep < 0:
        raise AsightError("--keep must be 0 or more")
    folder, text = chosen(target)
    before = len(shelf.entries(folder))
    with shelf.locked(folder):
        after = shelf.compact(folder, keep)
    return {"target": text, "before": before, "kept": after}


def export(out: str, target: str | None) -> dict:
    folder, text = chosen(target)
    data = shelf.export_library(folder, text)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(data, handle, ensure_ascii=False)
    return {"target": text, "file": os.path.abspath(out), "workloads": len(data["workloads"])}


def import_file(path: str, python: str | None = None) -> dict:
    """Add a library file's records that replay (checked in a sandboxed worker) to the library."""
    target, incoming = shelf.read_library_file(path)
    folder = shelf.folder_for(target)
    if folder is None:
        raise AsightError(f"the schedule library is off (${shelf.LIBRARY_ENV}=off): nothing was imported")
    with WorkerClient(python, 600) as sandboxed:
        reply = sandboxed.request(wire.LIBRARY_CHECK, {"entries": [[e.workload, e.record] for e in incoming]})
    refused = [{"task": incoming[r["index"]].task, "why": r["why"]} for r in reply["refused"]]
    bad = {r["index"] for r in reply["refused"]}
    added, kept = shelf.merge(folder, target, [e for i, e in enumerate(incoming) if i not in bad]) \
        if len(bad) < len(incoming) else (0, 0)
    return {"target": target, "added": added, "not_faster": kept, "refused": refused}
