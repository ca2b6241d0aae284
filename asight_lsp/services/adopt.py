"""``asight adopt``: a run made from a MetaSchedule work folder tuned elsewhere (TVM-free orchestration).

A GPU box, a cluster or a script tuned with MetaSchedule and left its JSON database
(``database_workload.json``, ``database_tuning_record.json``).  ``adopt`` copies both files verbatim
into a new run of the store (the record lines keep their numbers, so a ``counters.jsonl`` made
there still names the right candidates), matches the workload to the function of the source file
through the worker (``worker/adopt.py``: structural hash, else the IR), takes the target from the
records and marks the run ``done``: every view works on it here, without the device and without
re-tuning (docs/tuning.md, "Runs tuned elsewhere").
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from ..analysis.traces import blocks_gone, blocks_named_otherwise
from ..engine import wire
from ..errors import AsightError
from ..store.counters import COUNTERS, counters_text, parse_counters
from ..store.database import database_health, records_note
from ..store.runs import DB_RECORDS, DB_WORKLOADS, Run, RunMeta, RunStore, read_records
from ..tvmscript.hashing import function_hash
from ..tvmscript.outline import build_outline
from ..tvmscript.selection import check_selection, select
from .adopt_checks import faster_counters, counter_candidates, require_adoptable, target_label
from .lookup import read_text


def adopt(work_dir: str, source: str, worker, function: str | None = None, counters: str | None = None,
          store_root: str | None = None) -> Run:
    """The new run (see module doc); AsightError (one line) for a folder, source or counters file
    that cannot be used — nothing is written then."""
    folder = _check_folder(Path(work_dir))
    text = read_text(source)      # bounded, undecodable bytes replaced, as every command reads a source
    outline = build_outline(text, source)
    selection = select(outline, function)
    check_selection(outline, selection, "adopt")
    require_prim_func(selection, source)
    counter_text, counter_from, entries = _counters(folder, counters)
    unit = selection.unit
    reply = worker.request(wire.ADOPT_MATCH, {
        "text": text, "unit": {"start_line": unit.start_line, "end_line": unit.end_line},
        "constants": outline.constants, "aliases": outline.aliases, "member": selection.member,
        "work_dir": str(folder)}, timeout=600)
    if reply.get("workload") is None:
        raise AsightError(f"{source}: {selection.label} is not in {folder}: {reply.get('how')}")
    _refuse_unloadable(folder, reply.get("bad"))
    require_adoptable(read_records(folder), reply, folder, selection.label)
    unused = counter_candidates(entries, read_records(folder), reply["workload"], counter_from,
                                torn=database_health(folder).unreadable > 0, work=reply)
    store = RunStore(store_root)
    earlier = adopted_before(store, folder, selection.label)
    run = store.create(_meta(store, folder, source, text, outline, selection, reply))
    try:
        _fill(run, folder, text, counter_text)
    except OSError as err:
        shutil.rmtree(run.path, ignore_errors=True)
        raise AsightError(f"cannot write the adopted run: {err}") from None
    _finish(run, reply["workload"], counter_from, unused, earlier)
    _note_named_otherwise(run, selection, reply["workload"])
    _note_lacking(run, entries, faster_counters(entries, read_records(folder)) if entries else None)
    return run


def _note_named_otherwise(run: Run, selection, workload: int) -> None:
    """The records get blocks the function names otherwise (matching ignores names): the views cannot
    show the schedule on them, said at adopt (the code view says it too)."""
    gone = blocks_gone((r["insts"] for r in read_records(run.path) if r["workload"] == workload),
                       (b.name for fn in selection.functions for b in fn.blocks))
    if gone:
        meta = run.load()
        meta.extra["adopted"]["blocks_note"] = blocks_named_otherwise(run.id, gone)
        run.save(meta)


def _note_lacking(run: Run, entries: list[dict], faster: str | None = None) -> None:
    """One note naming the metrics the GPU views use that the counters file has on no line (an ncu
    run with fewer ``--metrics``): the views then say those figures are not measured; the lines not
    checked for want of a kernel time; ``faster`` (``faster_counters``)."""
    from ..analysis.counters import VIEW_METRICS, lacking
    from ..analysis.ncu import DURATION
    lack = lacking(entries) if entries else []
    untimed = sum(1 for e in entries if e["candidate"] != "baseline" and DURATION not in e["metrics"])
    if not lack and not untimed and not faster:
        return
    said = [f"the counters lack {len(lack)} of the {len(VIEW_METRICS)} metrics the GPU views use: {', '.join(lack)} "
            "(the views say those figures are not measured)"] if lack else []
    if untimed:        # said: another kernel's counters pass unchecked on such a line
        said.append(f"{untimed} counters line{'s' * (untimed > 1)} without {DURATION}: not checked against "
                    "their records' latencies (counters of another program would not be caught)")
    said += [faster] if faster else []
    meta = run.load()
    meta.extra["adopted"]["counters_lack"] = "; ".join(said)
    run.save(meta)


def adopted_before(store: RunStore, folder: Path, function: str) -> str | None:
    """The newest run of ``function`` adopted from the same folder with the same records file (said: a
    second adopt makes a second, identical run; another function's run from a folder of several is no
    copy).  The size is the folder's at adopt (a torn last line is set
    aside in the run)."""
    size = (folder / DB_RECORDS).stat().st_size

    def from_size(meta) -> int | None:
        kept = meta.adopted.from_size
        path = store.runs_dir / meta.id / DB_RECORDS
        return kept if kept is not None else path.stat().st_size if path.is_file() else None

    same = [m for m in store.metas() if m.adopted is not None and m.adopted.source == str(folder)
            and m.function == function and from_size(m) == size]
    return max(same, key=lambda m: m.created).id if same else None


def _check_folder(folder: Path) -> Path:
    for name in (DB_WORKLOADS, DB_RECORDS):
        if os.path.lexists(folder / name) and not _regular(folder / name):
            raise AsightError(f"{folder / name} is not a regular file (a link, a FIFO or a device): adopt reads "
                              "plain files only; nothing was adopted")
        if not (folder / name).is_file():
            raise AsightError(f"{folder} is not a MetaSchedule work folder: {name} is missing")
    health = database_health(folder)
    if health.problems:      # adopt copies nothing: the folder's owner mends it, or tunes again where it was tuned
        more = f" (and {len(health.problems) - 1} more)" if len(health.problems) > 1 else ""
        raise AsightError(f"{folder}: the database cannot be adopted: {health.problems[0]}{more}; nothing was copied")
    return folder.resolve()


def _regular(path: Path) -> bool:
    """A plain file, not a link to one (a work folder is data from elsewhere)."""
    return not path.is_symlink() and path.is_file()


def require_prim_func(selection, source: str) -> None:
    """adopt matches one PrimFunc to a workload; a Relax model's tasks are not its functions."""
    if any(fn.kind == "prim_func" for fn in selection.functions):
        return
    models = ", ".join(fn.id for fn in selection.functions if fn.kind == "relax_function") or selection.label
    raise AsightError(f"{source}: adopt takes a TIR function (a PrimFunc) tuned elsewhere; {models} is a Relax model: "
                      "adopt does not take models (TVM makes their tasks from the model): tune it with `asight tune`")


def _refuse_unloadable(folder: Path, bad: dict | None) -> None:
    """One line when a record's trace does not replay on its workload: TVM would refuse the whole
    database in every view (the worker's ``adopt.unloadable``)."""
    if not bad or not bad.get("count"):
        return
    first = bad["first"][0]
    more = f" (and {bad['count'] - 1} more record{'s' * (bad['count'] > 2)})" if bad["count"] > 1 else ""
    raise AsightError(f"{folder / DB_RECORDS} line {first['line']}: the record's trace does not replay on its "
                      f"workload ({first['why']}){more}; TVM cannot load a database that holds it, so nothing was "
                      "adopted")


def _counters(folder: Path, counters: str | None) -> tuple[str | None, str | None, list]:
    """The counters file's text, where it came from and its entries (a bad file is refused before
    anything is written; an empty one is not adopted: ``_finish`` says so)."""
    path = Path(counters) if counters else folder / COUNTERS
    if not counters and os.path.lexists(path) and not _regular(path):
        raise AsightError(f"{path} is not a regular file (a link, a FIFO or a device): adopt reads plain files "
                          "only (name another with --counters); nothing was adopted")
    if not path.is_file():
        if counters:
            raise AsightError(f"{counters} is not a regular file" if path.exists() else f"no counters file {counters}")
        return None, None, []
    text = counters_text(path)            # what the views will read: bounded, plain, UTF-8
    entries = parse_counters(text, str(path))
    return (text if entries else None), str(path), entries


def _meta(store: RunStore, folder: Path, source: str, text: str, outline, selection, reply: dict) -> RunMeta:
    first = next((r for r in read_records(folder) if r["workload"] == reply["workload"]), None)
    target = first["target"] if first else None
    hashes = {fn.id: function_hash(text, fn) for fn in selection.functions}
    workload_hash = json.loads((folder / DB_WORKLOADS).read_text().splitlines()[reply["workload"]])[0]
    name = selection.member or (selection.functions[0].name if selection.functions else "main")
    return RunMeta(id=store.new_run_id(selection.label), file=os.path.abspath(source), function=selection.label,
                   kind="tir", source_hashes=hashes, target=target, target_label=target_label(target, tagged=False),
                   state="done", created=time.time(), started=time.time(), finished=time.time(),
                   tasks=[{"name": name, "weight": 1.0, "functions": [name], "workload_hash": str(workload_hash)}],
                   extra={"selection": {"unit": selection.unit.name, "member": selection.member},
                          "constants": outline.constants, "target_spec": target_spec(target),
                          "adopted": {"from": str(folder), "from_size": (folder / DB_RECORDS).stat().st_size,
                                      "how": reply["how"], "workload": reply["workload"],
                                      "flops": reply.get("flops"), "dtypes": reply.get("dtypes")}})


def target_spec(target) -> str | None:
    """What ``--target`` re-tunes on the records' target: its tag, else its Target JSON (host left to
    the job, which gives GPU targets this machine's CPU as host)."""
    if not isinstance(target, dict):
        return str(target) if target else None
    if target.get("tag"):
        return str(target["tag"])
    return json.dumps({k: v for k, v in target.items() if k != "host" and v != ""}, separators=(",", ":"))


def _fill(run: Run, folder: Path, text: str, counter_text: str | None) -> None:
    for name in (DB_WORKLOADS, DB_RECORDS):
        shutil.copyfile(folder / name, run.path / name)
    run.source_path.write_text(text, encoding="utf-8")
    if counter_text is not None:
        (run.path / COUNTERS).write_text(counter_text, encoding="utf-8")


def _finish(run: Run, workload: int, counter_from: str | None, unused: str | None, earlier: str | None) -> None:
    run.repair_db()                 # a torn last line set aside now, and said: the digest is of what views read
    records = [r for r in read_records(run.path) if r["workload"] == workload]
    ok = [r["latency_us"] for r in records if r.get("latency_us") is not None]
    meta = run.load()
    meta.trials_requested = meta.trials_done = len(records)
    meta.best_us = min(ok) if ok else None
    empty = counter_from is not None and not (run.path / COUNTERS).exists()
    meta.extra["adopted"].update({"records": len(records), "measured": len(ok), "counters": counter_from,
                                  "counters_note": f"{counter_from} is empty: no counters adopted" if empty else unused,
                                  "note": records_note(run, meta),
                                  "earlier": f"{earlier} was adopted from this folder before (same records file "
                                             "size): this is a second run of it" if earlier else None,
                                  "digest": run.database_digest(),
                                  "set_aside": int(meta.extra.get("set_aside_records") or 0)})
    if empty:
        meta.extra["adopted"]["counters"] = None
    meta.extra["tuning"] = {"best_us": meta.best_us, "failed": len(records) - len(ok),
                            "source": "MetaSchedule's runner on the machine that tuned (adopted records)"}
    run.save(meta)
