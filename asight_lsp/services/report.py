"""One self-contained HTML report of a run (TVM-free orchestration).

Sections: hotspots (profiles the tuned program through the worker; skipped without a worker),
search space (honeycomb + contours), loop view, stage graph, design principles, the best schedule
and, for a guided run, its comparison with plain MetaSchedule.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from ..analysis.traces import format_trace
from ..errors import AsightError, WorkerError
from ..store.files import write_atomic
from ..store.runs import RunStore
from ..views.loops import loop_view, stage_graph
from ..views.principles import principles
from ..views.searchspace import search_space
from ..views.context import best_candidate
from ..views.loops import best_summary
from ..views.report import report_html
from .guidance import compare_with_plain
from .hotspots import collect
from ..tvmscript.outline import build_outline
from .lookup import read_text
from .run_data import build_view, load_run


def best_schedule(data) -> dict | None:
    """The best candidate (the one the run's measurement chose, else the fastest while tuning): trial,
    latency, per-block steps and its trace as text."""
    best, _ = best_candidate(data)
    if best is None:
        return None
    rec = data.table.records[best]
    steps = {name: s.get("steps", []) for name, s in best_summary(data).items()}
    return {"trial": int(rec["trial"]), "latency_us": rec["latency_us"], "steps": steps,
            "trace": format_trace(rec["insts"], rec["decisions"])}


def build_report(file: str, run_ref: str, store_root: str | None = None, worker=None, text: str | None = None,
                 hotspots: bool = True, seed: int = 0, task: str | None = None) -> str:
    """The report page of a run (of one of its tasks: ``task``, else the default one).  Without a worker: cached features only, no hotspots."""
    text = read_text(file) if text is None else text
    if run_ref == "latest":
        run_ref = latest_of_file(file, text, store_root)
    data = load_run(run_ref, store_root, worker=worker, extract=worker is not None, text=text, task=task, file=file)
    for note in data.notes:
        print(f"asight: note: {note}", file=sys.stderr)
    payloads = {"searchSpace": search_space(data, seed=seed), "loopView": loop_view(data),
                "stageGraph": build_view("stageGraph", data.run.path, text=text, file=file) if data.meta.kind == "relax"
                else stage_graph(data), "principles": principles(data, seed=seed)}   # a model's: the editor's
    hot, hot_error = None, None
    if hotspots:
        if worker is None:
            hot_error = "the TVM worker was not started (--no-extract)"
        else:
            try:
                hot = collect(file, str(data.run.path), None, store_root, worker, text=text)
            except (AsightError, WorkerError) as err:
                hot_error = str(err)
    meta = data.run.load()
    guided = compare_with_plain(RunStore(data.run.path.parent.parent), data.run) if meta.guided_by else None
    return report_html(payloads, best_schedule(data), hot, hot_error, guided=guided,
                       measurement=meta.measured.raw if meta.measured else None)


def latest_of_file(file: str, text: str, store_root: str | None) -> str:
    """The run the catalogue shows for ``file``'s functions (any of them), by the rule every view follows."""
    from .catalogue import Catalogue, Current
    catalogue = Catalogue.of_store(store_root)
    outline = build_outline(text, file)
    names = {fn.id for fn in outline.functions} | {unit.name for unit in outline.units}
    view = catalogue.require_view(file, names, Current.of_text(text, outline.functions, file, outline.constants), file)
    return view.meta.id


def write_report(file: str, run_ref: str, output: str | os.PathLike, store_root: str | None = None, worker=None,
                 hotspots: bool = True, seed: int = 0, task: str | None = None) -> Path:
    """Build the report and write it atomically to ``output`` (what ``asight demo`` can call)."""
    page = build_report(file, run_ref, store_root, worker, hotspots=hotspots, seed=seed, task=task)
    out = Path(output)
    try:
        write_atomic(out, page)
    except OSError as err:
        raise AsightError(f"cannot write {output}: {err.strerror}") from None
    return out
