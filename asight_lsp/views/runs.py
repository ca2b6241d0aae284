"""Run summaries as the protocol shows them (``protocol.RunSummary``, the ``asight/runs`` payload)."""
from __future__ import annotations

from .. import protocol as P
from ..store.runs import RunMeta
from ..tvmscript.hashing import function_hash
from ..tvmscript.model import Function


def run_summary(meta: RunMeta, stale: bool | None = None) -> dict:
    """``protocol.RunSummary`` of a run."""
    speedup = meta.baseline_us / meta.best_us if meta.baseline_us and meta.best_us else None
    out = {"id": meta.id, "file": meta.file, "function": meta.function, "state": meta.state,
           "trialsRequested": meta.trials_requested, "trialsDone": meta.trials_done,
           "baselineUs": meta.baseline_us, "bestUs": meta.best_us, "speedup": speedup,
           "target": meta.target_label or str(meta.target or ""), "created": meta.created,
           "finished": meta.finished, "error": meta.error}
    if stale is not None:
        out["stale"] = stale
    return out


def runs_payload(metas: list[RunMeta], function: Function | None = None, text: str | None = None) -> dict:
    """``asight/runs``: these runs, each marked stale when ``function``'s text changed since it."""
    current = {function.id: function_hash(text, function)} if function is not None and text is not None else {}
    runs = []
    for meta in metas:
        stale = None
        if function is not None and function.id in (meta.source_hashes or {}):
            stale = meta.source_hashes[function.id] != current.get(function.id)
        runs.append(run_summary(meta, stale))
    return {"schema": P.SCHEMA_RUNS, "status": P.STATUS_OK, "runs": runs}
