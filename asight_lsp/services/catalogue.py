"""The run catalogue: which run speaks for a function, and whether it is valid (TVM-free).

Every view asks here and nothing else decides: the server's lenses, hovers, hints and panels
through its ``RunIndex``, the CLI through an index it reads once (``Catalogue.of_store``).

* **Which run.** A live run of the current source, else the newest fresh run that measured
  something, else the newest run that measured something, else the newest run (``choose``).
  "Newest" is the order the runs were created in.
* **Its status.** ``live`` (queued or tuning), ``fresh``, ``stale`` (with its reasons: a function's
  source, a module constant it uses, the weights file beside a model), ``failed`` (failed before
  measuring anything).  Besides: ``shipped`` (made by another user or on another machine: shown
  read-only, ``store/owner.py``), ``moved_from`` (found by its place in the workspace, under
  another path: ``store/place.py``) and the function's runs whose run.json cannot be read
  (headless folders included) — one written after the shown run is ``newer_unreadable``: the CLI
  refuses to pass over it, the editor names it beside the run it shows.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import AsightError
from ..store.index import RunIndex
from ..store.owner import is_own
from ..store.place import moved_from
from ..store.record import build_of, section_problems
from ..store.runs import RunMeta, RunStore, measured_something
from ..tvmscript.hashing import constants_hold, constants_used, function_hash, function_text
from ..tvmscript.outline import build_outline
from .jobs import LIVE_STATES

LIVE, FRESH, STALE, FAILED = "live", "fresh", "stale", "failed"


@dataclass(frozen=True)
class Current:
    """A file's functions as they are now: each one's source hash and the module constants it uses
    (None for a function whose hash is not known: it is not compared)."""
    hashes: dict = field(default_factory=dict)       # function id -> source hash
    constants: dict = field(default_factory=dict)    # function id -> {constant: value}
    file: str | None = None                          # the file now: a model's weights are beside it

    @classmethod
    def of_text(cls, text: str, functions, file: str | None = None, constants: dict | None = None) -> "Current":
        """``constants``: the module constants of ``text`` when the caller has its outline already."""
        found = build_outline(text).constants if constants is None else constants
        hashes, constants = {}, {}
        for fn in functions:
            own = function_text(text, fn)
            hashes[fn.id] = function_hash(text, fn)
            constants[fn.id] = constants_used(found, own)
        return cls(hashes, constants, file)


@dataclass(frozen=True)
class RunView:
    """A run as every consumer sees it: which one, its status and the reasons, one line each."""
    meta: RunMeta
    run_dir: Path
    status: str
    reasons: tuple = ()                 # why stale (or failed), one line each
    shipped: bool = False
    moved_from: str | None = None
    unreadable: tuple = ()              # (run id, why, whose) of the function's other runs not read, oldest first
    newer_unreadable: tuple | None = None   # the last of them when written after this run
    problems: tuple = ()                # run.json sections not read, and why (``record.section_problems``)

    @property
    def stale(self) -> bool:
        return self.status == STALE

    @property
    def live(self) -> bool:
        return self.status == LIVE

    @property
    def reason(self) -> str:
        """One line: the status and why (what ``asight runs`` prints, the lens's tooltip begins with)."""
        parts = [self.status] + list(self.reasons)
        if self.shipped:
            parts.append("shipped: made by another user or on another machine, read-only")
        if self.moved_from:
            parts.append(f"tuned as {self.moved_from} (the project was moved or copied)")
        return "; ".join(parts)


def names_of(fn) -> set[str]:
    """The names a function's runs are filed under: its id and its unit's name."""
    return {name for name in (fn.id, fn.unit) if name}


def unreadable_note(run_id: str, why: str, whose: str) -> str:
    """One sentence for a function's run that is not shown (the CLI's error, the editor's lens tooltip)."""
    return f"{why}; {whose}, not shown while its run.json cannot be read: adopt or tune again, or move {run_id} away"


def stale_reasons(meta: RunMeta, current: Current) -> list[str]:
    """What changed since the run, one line each: a function's source, a constant it uses, the weights."""
    reasons = []
    hashes = meta.source_hashes or {}
    recorded = (meta.extra or {}).get("constants")
    for fid, now in current.hashes.items():
        if now is not None and hashes.get(fid) not in (None, now):
            reasons.append(f"{fid}'s source changed since run {meta.id}")
        used = current.constants.get(fid) or {}
        changed = sorted(name for name in used if not constants_hold(recorded, {name: used[name]}))
        if changed:
            reasons.append(f"{', '.join(changed)} (used by {fid}) has another value than run {meta.id} tuned")
    weights = _weights_reason(meta, current)
    return reasons + ([weights] if weights else [])


def _weights_reason(meta: RunMeta, current: Current) -> str | None:
    """A model run tuned with other weights than the file beside the model holds now."""
    if meta.kind != "relax":
        return None
    from ..analysis.deployable import CHANGED, headline_build
    from ..engine import wire
    build = build_of(meta)
    weights = wire.weights_beside(current.file or meta.file)
    return CHANGED if build and headline_build(build.as_dict(), wire.weights_digest(weights))["text"] == CHANGED else None


def choose(runs: list[RunMeta], current: Current, measured=measured_something) -> RunMeta | None:
    """The run to show among a function's runs, newest first (the module's rule); ``measured``: whether
    a run measured something (its figures, else records on disk)."""
    if not runs:
        return None
    fresh = {m.id: not stale_reasons(m, current) for m in runs}
    useful = [m for m in runs if measured(m)]
    return (next((m for m in runs if m.state in LIVE_STATES and fresh[m.id]), None)
            or next((m for m in useful if fresh[m.id]), None)
            or next(iter(useful), None)
            or next((m for m in runs if m.state != "failed"), None)
            or runs[0])


def status_of(meta: RunMeta, current: Current, measured=measured_something) -> tuple[str, tuple]:
    reasons = tuple(stale_reasons(meta, current))
    if meta.state in LIVE_STATES and not reasons:
        return LIVE, ()
    if meta.state == "failed" and not measured(meta):
        return FAILED, (f"run {meta.id} failed before measuring: {meta.error or 'no reason recorded'}",) + reasons
    return (STALE, reasons) if reasons else (FRESH, ())


class Catalogue:
    """The runs of one store, by file and function names (a function id, its unit's name)."""

    def __init__(self, index: RunIndex):
        self.index = index

    @classmethod
    def of_store(cls, store_root: str | os.PathLike | None) -> "Catalogue":
        """A catalogue read from disk now (the CLI's): a linked store is refused in one line."""
        store = RunStore(store_root)
        index = RunIndex(store.root, min_interval=0.0)
        refused = index.store_refusal()
        if refused:
            raise AsightError(refused)
        return cls(index)

    @classmethod
    def of_run(cls, run_dir: Path) -> "Catalogue":
        """The catalogue of the store a run folder sits in (``<store>/runs/<id>``); of none (an empty
        index) for a folder elsewhere."""
        return cls(RunIndex(Path(run_dir).parent.parent, min_interval=0.0))

    def view_of_run(self, meta: RunMeta, run_dir: Path, file: str | None, function, text: str | None) -> RunView:
        """The status of a run named by its folder, for ``function`` as ``text`` has it in ``file`` (the
        file now; None: where the run tuned it); unknown function or text: the source is not compared."""
        file = file or meta.file
        names = names_of(function) if function is not None else {meta.function}
        current = (Current.of_text(text, [function], file) if function is not None and text is not None
                   else Current(file=file))
        return self.view_of(meta, file, names, current, run_dir=Path(run_dir))

    def measured(self, meta: RunMeta) -> bool:
        """The run measured something: its figures say so, or its records file holds a line."""
        return self.index.measured(meta)

    @property
    def runs_dir(self) -> Path:
        return self.index.runs_dir

    def runs_of(self, file: str, names: set[str]) -> list[RunMeta]:
        """The runs of ``names`` in ``file``, newest first."""
        return [m for m in reversed(self.index.for_file(file))
                if m.function in names or any(n in (m.source_hashes or {}) for n in names)]

    def view(self, file: str, names: set[str], current: Current) -> RunView | None:
        """The run to show for ``names`` in ``file``; None when there is none."""
        meta = choose(self.runs_of(file, names), current, self.measured)
        if meta is None:
            return None
        return self.view_of(meta, file, names, current)

    def view_of(self, meta: RunMeta, file: str, names: set[str], current: Current,
                run_dir: Path | None = None) -> RunView:
        """The status of ``meta`` for ``file`` (``run_dir``: a run named by its folder, in this store or not)."""
        status, reasons = status_of(meta, current, self.measured)
        unreadable = tuple(u for u in self.index.unreadable_for(file, names) if u[0] != meta.id)
        written = self.index.written(meta.id)
        newer = [u for u in unreadable if self.index.written(u[0]) > written]
        run_dir = run_dir or self.index.run_dir(meta.id)
        shipped = self.index.shipped(meta.id) if run_dir == self.index.run_dir(meta.id) else not is_own(run_dir)
        return RunView(meta, run_dir, status, reasons, shipped,
                       moved_from(meta, file), unreadable, newer[-1] if newer else None,
                       tuple(section_problems(meta)))

    def listing(self, file: str, names: set[str], current: Current) -> tuple[list, dict, RunView | None]:
        """``(runs newest first, {run id: RunView}, the run shown)`` of ``names`` in ``file``: what
        ``asight runs`` prints and the ``asight/runs`` request answers for a function."""
        metas = self.runs_of(file, names)
        views = {m.id: self.view_of(m, file, names, current) for m in metas}
        shown = choose(metas, current, self.measured)
        return metas, views, views[shown.id] if shown is not None else None

    def require_view(self, file: str, names: set[str], current: Current, label: str) -> RunView:
        """The CLI's answer: the run to show, or one line saying why there is none to show."""
        found = self.view(file, names, current)
        last = (found.newer_unreadable if found is not None
                else (self.index.unreadable_for(file, names) or [None])[-1])
        if last is not None:
            older = f" (run {found.meta.id}, written before it, can be read: pass --run {found.meta.id})" if found else ""
            raise AsightError(unreadable_note(*last) + older)
        if found is None:
            raise AsightError(f"no run of {label} in {self.runs_dir}: tune it first (asight tune {file})")
        return found
