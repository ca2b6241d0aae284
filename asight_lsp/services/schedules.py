"""The best schedule of a run applied to a function: scheduled TVMScript and trace (for code actions)."""
from __future__ import annotations

from ..engine import wire
from ..engine.client import borrowed
from ..errors import AsightError
from ..store.runs import RunStore
from ..tvmscript.outline import build_outline
from ..tvmscript.selection import check_selection, select
from .lookup import check_run_function, chosen_records, latest_run, prepare_run, read_text


def apply_best(path: str, function: str | None = None, run: str | None = None, store_root: str | None = None,
               worker=None, text: str | None = None) -> dict:
    """The best schedule of a run applied to the function: scheduled TVMScript and trace per function."""
    text = read_text(path) if text is None else text
    outline = build_outline(text, path)
    selection = select(outline, function)
    check_selection(outline, selection)
    store = RunStore(store_root)
    found = store.get(run) if run else latest_run(store, path, selection)
    if found is None:
        raise AsightError(f"no run of {selection.label} in {store.runs_dir}: tune it first")
    check_run_function(found, selection)
    meta = prepare_run(found)
    params = {**wire.source_params(text, outline, selection.unit, selection.member), "run_dir": str(found.path),
              "target": meta.target, "chosen": chosen_records(meta)}
    with borrowed(worker) as client:
        reply = client.request(wire.APPLY_BEST, params, timeout=300)
    return {"run": found.id, "function": selection.label, **reply}
