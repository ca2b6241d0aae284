"""Find the run a CLI request means and the text it tuned (TVM-free, shared by the services).

``selection_view`` asks the run catalogue (``services/catalogue.py``, the one rule of which run and
whether it is valid) for a file's selected function; ``check_run_function`` refuses a run given by
id that tuned another function; ``run_source`` gives the text a run tuned (the file while its
functions still hash as tuned, else the run's snapshot).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import AsightError
from ..store.database import require_records_target
from ..store.owner import is_own
from ..store.place import run_file
from ..store.runs import Run, RunMeta, RunStore, read_records
from ..tvmscript.hashing import function_hash
from ..tvmscript.outline import build_outline
from ..tvmscript.pysource import decode_source, read_bounded
from ..tvmscript.selection import Selection, check_selection, select
from .catalogue import Catalogue, Current, stale_reasons, unreadable_note
from .jobs import LIVE_STATES


def check_run_function(run: Run, selection: Selection) -> None:
    """A run given by id must have tuned the selected function (or its unit)."""
    tuned = run.load().function
    if tuned not in selection_names(selection):
        raise AsightError(f"run {run.id} tuned {tuned}, not {selection.label}; pick the function with --func")


def latest_run(store: RunStore, path: str, selection: Selection, text: str | None = None) -> Run | None:
    """The run the catalogue shows for the selection (``catalogue.Catalogue.require_view``), None when it
    has none; AsightError when the selection's newest run cannot be read."""
    try:
        return Run(selection_view(store.root, path, selection, text).run_dir)
    except NoRun:
        return None


class NoRun(AsightError):
    """The selection has no run (tune it first)."""


def selection_view(store_root, path: str, selection: Selection, text: str | None = None, ref: str | None = None):
    """The catalogue's answer for a selection of ``path`` (``ref``: a run named by id, prefix or folder)."""
    catalogue = Catalogue.of_store(store_root)
    text = read_text(path) if text is None else text
    current = Current.of_text(text, selection.functions, path)
    names = selection_names(selection)
    if ref is not None:
        run = RunStore(store_root).get(ref)
        check_run_function(run, selection)
        return catalogue.view_of(run.load(), path, names, current, run.path)
    if not catalogue.runs_of(path, names) and not catalogue.index.unreadable_for(path, names):
        raise NoRun(f"no run of {selection.label} in {catalogue.runs_dir}: tune it first (asight tune {path})")
    return catalogue.require_view(path, names, current, selection.label)


def stale_now(meta: RunMeta, text: str, functions, path: str | None = None, constants: dict | None = None) -> list[str]:
    """Why the run is stale for ``functions`` as ``text`` has them (``catalogue.stale_reasons``), [] when fresh;
    ``constants``: the module constants of ``text`` when the caller has its outline."""
    return stale_reasons(meta, Current.of_text(text, functions, path, constants))


def selection_names(selection: Selection) -> set[str]:
    """The names a selection's runs are filed under: its label, its unit's name, its functions' ids."""
    return {selection.label, selection.unit.name, *(f.id for f in selection.functions)}


@dataclass
class TunedFile:
    """A file, its selected function and the run a request means (``tuned_file``)."""
    text: str
    outline: object
    selection: Selection
    run: Run
    meta: RunMeta
    view: object = None       # the catalogue's ``RunView``: status, reasons, shipped, moved


def tuned_file(path: str, function: str | None, run: str | None, store_root: str | None,
               text: str | None = None) -> TunedFile:
    """The selection of ``path`` and its run (``run`` given, else the newest); an error when there is none."""
    text = read_text(path) if text is None else text
    outline = build_outline(text, path)
    selection = select(outline, function)
    check_selection(outline, selection, "read")
    view = selection_view(store_root, path, selection, text, run)
    found = Run(view.run_dir)
    return TunedFile(text, outline, selection, found, prepare_run(found), view)


def prepare_run(run: Run) -> RunMeta:
    """Load the run; make a finished run's JSON DB loadable by TVM (sets a torn last line aside), in this
    user's own run only: a shipped run is read as it is (``owner.require_own``)."""
    meta = run.load()
    if meta.state not in LIVE_STATES:
        require_records_target(run, meta)
        if is_own(run.path):
            run.repair_db()
        if meta.adopted:
            from .adopt_checks import require_adopted_records
            require_adopted_records(run, meta, read_records(run.path))
    return meta


def chosen_records(meta: RunMeta | None) -> list[dict] | None:
    """The records the run's measurement chose by re-measurement (what builds and views use as best);
    ``[]`` when it measured and every task kept its default schedule (what ``asight export`` ships:
    not the run's fastest trials, as None means), None when the run has no measurement."""
    measured = meta.measured if meta is not None else None
    return list(measured.chosen) if measured is not None and measured.chosen is not None else None


def run_source(run: Run, meta: RunMeta) -> tuple[str, str]:
    """(text, path): the file (in the workspace the run is in now) if its functions still hash as tuned,
    else the run's snapshot."""
    path = run_file(meta, run.path)
    try:
        text = read_text(path)
        outline = build_outline(text, path)
        hashes = {f.id: function_hash(text, f) for f in outline.functions if f.id in meta.source_hashes}
        if hashes == meta.source_hashes:
            return text, path
    except AsightError:
        pass
    if run.source_path.exists():
        return decode_source(read_bytes(str(run.source_path))), path      # bounded, as the user's file
    raise AsightError(f"run {run.id}: {path} changed since tuning and the run has no source snapshot")


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


def file_runs(path: str, function: str | None, store_root: str | None) -> list[dict]:
    """``asight runs``: for each function of ``path`` (or the one named), the ``asight/runs`` payload the
    editor gets for it: its runs newest first, each with the catalogue's status, and the run it shows."""
    from ..views.runs import runs_payload
    text = read_text(path)
    outline = build_outline(text, path)
    functions = outline.functions if function is None else select(outline, function).functions
    catalogue = Catalogue.of_store(store_root)
    out = []
    for fn in functions:
        names = {name for name in (fn.id, fn.unit) if name}
        metas, views, shown = catalogue.listing(path, names, Current.of_text(text, [fn], path, outline.constants))
        unreadable = catalogue.index.unreadable_for(path, names)
        payload = runs_payload(metas, views, [unreadable_note(*u) for u in unreadable],
                               shipped={m.id for m in metas if views[m.id].shipped},
                               shown=shown.meta.id if shown else None)
        out.append({"function": fn.id, **payload})
    return out
