"""Find the run a request means and the text it tuned (TVM-free, shared by the services).

``latest_run`` picks the newest run of a file's selected function; ``check_run_function`` refuses a
run given by id that tuned another function; ``run_source`` gives the text a run tuned (the file
while its functions still hash as tuned, else the run's snapshot).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import AsightError
from ..store.database import require_records_target
from ..store.folders import claimed_owner, claims
from ..store.owner import is_own
from ..store.runs import DB_RECORDS, Run, RunMeta, RunStore, read_records
from ..tvmscript.hashing import constants_hold, constants_used, function_hash, function_text
from ..tvmscript.outline import build_outline
from ..tvmscript.pysource import decode_source, read_bounded
from ..tvmscript.selection import Selection, check_selection, select
from .jobs import LIVE_STATES


def check_run_function(run: Run, selection: Selection) -> None:
    """A run given by id must have tuned the selected function (or its unit)."""
    tuned = run.load().function
    names = {selection.label, selection.unit.name, *(f.id for f in selection.functions)}
    if tuned not in names:
        raise AsightError(f"run {run.id} tuned {tuned}, not {selection.label}; pick the function with --func")


def latest_run(store: RunStore, path: str, selection: Selection) -> Run | None:
    """The newest run of this file whose function is the selection (its label, a function id, the unit),
    passing over runs that failed before measuring (``RunStore.latest_for``, the rule of ``latest``)."""
    names = {selection.label, selection.unit.name, *(f.id for f in selection.functions)}
    newest = store.latest_for(path, names)
    require_no_unreadable(store, path, names, newest)
    return Run(store.runs_dir / newest.id) if newest else None


def changed_since(meta: RunMeta, text: str, functions) -> bool:
    """Whether any of ``functions`` differs in ``text`` from what the run tuned: its source hash, or a module
    constant it uses (``N = 1024`` -> 512) given another value (jobs.start_tune's hashes and constants)."""
    hashes = meta.source_hashes or {}
    constants = build_outline(text).constants
    return any(hashes[fn.id] != function_hash(text, fn) or not constants_hold(
        (meta.extra or {}).get("constants"), constants_used(constants, function_text(text, fn)))
        for fn in functions if fn.id in hashes)


def unreadable_runs(store: RunStore, path: str, names: set[str]) -> list[tuple[str, str, str]]:
    """``(run id, why, whose)`` of the runs of ``names`` in ``path`` whose run.json cannot be read (by the names
    it still holds, else by its id), oldest first."""
    out, runs = [], store.all()          # (a linked store is refused there first)
    for run in sorted(headless_runs(store) + runs, key=lambda r: _written(store, r.id)):
        try:
            run.load()
        except AsightError as err:
            whose = claims(claimed_owner(run.meta_path), run.id, path, names, store.run_id_prefix)
            if whose:
                out.append((run.id, str(err), whose))
    return out


def require_no_unreadable(store: RunStore, path: str, names: set[str], shown: RunMeta | None = None) -> None:
    """A function whose only runs are unreadable is not "never tuned", and one whose run.json written
    last is unreadable is not its older run: AsightError naming the newest, as ``get("latest")`` (space,
    loops) refuses it (outside probe 11, F2: "this function has no run"; probe 13, F1: the code view
    showed the older run while space and loops refused)."""
    unreadable = unreadable_runs(store, path, names)
    if shown is not None:
        after = _written(store, shown.id)
        unreadable = [u for u in unreadable if _written(store, u[0]) > after]
    if unreadable:
        older = f" (run {shown.id}, written before it, can be read: pass --run {shown.id})" if shown else ""
        raise AsightError(unreadable_note(*unreadable[-1]) + older)


def headless_runs(store: RunStore) -> list[Run]:
    """Run folders with records and no run.json to read (deleted, a broken or looping link): runs, said
    (outside probe 14, F4; probe 15, F1), not skipped as ``RunStore.all`` skips them."""
    if not store.runs_dir.is_dir():
        return []
    return [Run(p) for p in store.runs_dir.iterdir()
            if p.is_dir() and not (p / "run.json").exists() and (p / DB_RECORDS).is_file()]


def require_no_newer_headless(store: RunStore, shown: Run | None) -> None:
    """``latest`` is not an older run while the newest folder has records and no run.json (the CLI's
    space and loops showed the older run without a word: outside probe 15, F1)."""
    after = _written(store, shown.id) if shown is not None else float("-inf")
    newer = sorted((r for r in headless_runs(store) if _written(store, r.id) > after),
                   key=lambda r: _written(store, r.id))
    if newer:
        raise AsightError(f"run {newer[-1].id} has no run.json (its records are there); it is the newest run: view "
                          f"another with --run R (the runs are in {store.runs_dir})")


def _written(store: RunStore, run_id: str) -> float:
    """When a run's run.json was last written; its records' time when it has none; 0 when neither is there."""
    for name in ("run.json", DB_RECORDS):
        try:
            return (store.runs_dir / run_id / name).stat().st_mtime
        except OSError:
            continue
    return 0.0


def unreadable_note(run_id: str, why: str, whose: str) -> str:
    """One sentence for a function's run that is not shown (the CLI's error, the editor's lens tooltip)."""
    return f"{why}; {whose}, not shown while its run.json cannot be read: adopt or tune again, or move {run_id} away"


@dataclass
class TunedFile:
    """A file, its selected function and the run a request means (``tuned_file``)."""
    text: str
    outline: object
    selection: Selection
    run: Run
    meta: RunMeta


def tuned_file(path: str, function: str | None, run: str | None, store_root: str | None,
               text: str | None = None) -> TunedFile:
    """The selection of ``path`` and its run (``run`` given, else the newest); an error when there is none."""
    text = read_text(path) if text is None else text
    outline = build_outline(text, path)
    selection = select(outline, function)
    check_selection(outline, selection, "read")
    store = RunStore(store_root)
    found = store.get(run) if run else latest_run(store, path, selection)
    if found is None:
        raise AsightError(f"no run of {selection.label} in {store.runs_dir}: tune it first (asight tune {path})")
    check_run_function(found, selection)
    return TunedFile(text, outline, selection, found, prepare_run(found))


def prepare_run(run: Run) -> RunMeta:
    """Load the run; make a finished run's JSON DB loadable by TVM (sets a torn last line aside), in this
    user's own run only: a shipped run is read as it is (``owner.require_own``)."""
    meta = run.load()
    if meta.state not in LIVE_STATES:
        require_records_target(run, meta)
        if is_own(run.path):
            run.repair_db()
        if (meta.extra or {}).get("adopted"):
            from .adopt_checks import require_adopted_records
            require_adopted_records(run, meta, read_records(run.path))
    return meta


def chosen_records(meta: RunMeta | None) -> list[dict] | None:
    """The records the run's measurement chose by re-measurement (what builds and views use as best);
    ``[]`` when it measured and every task kept its default schedule (what ``asight export`` ships:
    not the run's fastest trials, as None means), None when the run has no measurement."""
    chosen = (meta.measurement or {}).get("chosen") if meta is not None else None
    return list(chosen) if isinstance(chosen, list) else None


def run_source(run: Run, meta: RunMeta) -> tuple[str, str]:
    """(text, path): the file if its functions still hash as tuned, else the run's snapshot."""
    try:
        text = read_text(meta.file)
        outline = build_outline(text, meta.file)
        hashes = {f.id: function_hash(text, f) for f in outline.functions if f.id in meta.source_hashes}
        if hashes == meta.source_hashes:
            return text, meta.file
    except AsightError:
        pass
    if run.source_path.exists():
        return decode_source(read_bytes(str(run.source_path))), meta.file      # bounded, as the user's file
    raise AsightError(f"run {run.id}: {meta.file} changed since tuning and the run has no source snapshot")


def read_text(path: str) -> str:
    file = Path(path)
    if not file.is_file():
        raise AsightError(f"no such file: {path}" if not file.exists() else f"{path} is not a file")
    return decode_source(read_bytes(path))


def read_bytes(path: str) -> bytes:
    """A source file's bytes, bounded (``pysource.read_bounded``), or a one-line error."""
    try:
        return read_bounded(path)
    except ValueError as err:
        raise AsightError(f"{path} is {err}") from None
    except OSError as err:
        raise AsightError(f"cannot read {path}: {err.strerror}") from None
