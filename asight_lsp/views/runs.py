"""Run summaries as the protocol shows them (``protocol.RunSummary``, the ``asight/runs`` payload)."""
from __future__ import annotations

from .. import protocol as P
from ..store.record import UNMEASURED, measured_headline
from ..store.runs import RunMeta
from .measured import measurement_stamp
from .text import headline_text


def run_summary(meta: RunMeta, stale: bool | None = None, refused: str | None = None) -> dict:
    """``protocol.RunSummary`` of a run: its figures are the measurement record's (docs/measurement.md);
    ``refused``: why the run's records are not used (an adopted run edited since): no figure of it."""
    shown = measured_headline(meta) or UNMEASURED
    speedup = shown.speedup or {}
    out = {"id": meta.id, "file": meta.file, "function": meta.function, "state": meta.state,
           "trialsRequested": meta.trials_requested, "trialsDone": meta.trials_done,
           "baselineUs": meta.baseline_us, "bestUs": meta.best_us, "speedup": speedup.get("estimate"),
           "speedupCi": speedup.get("ci"), "verdict": shown.verdict, "noisy": shown.busy,
           "headline": headline_text(shown.raw, meta.best_us if meta.state != "done" or not shown.headline else None,
                                     meta.extra),
           "target": meta.target_label or str(meta.target or ""), "created": meta.created,
           "finished": meta.finished, "error": meta.error, "kind": meta.kind,
           "failures": [{k: g.get(k) for k in ("reason", "count", "stage", "log")}
                        for g in meta.extra.get("failures") or []],
           "shortfall": meta.shortfall.text if meta.shortfall else None,
           "measurement": measurement_stamp(shown.raw)}
    if refused:
        out.update(bestUs=None, baselineUs=None, speedup=None, speedupCi=None, error=refused,
                   headline=f"not used: {refused}")
    if meta.kind == "relax":     # per-task views and the code view pick one of these
        out["tasks"] = [t.get("name") for t in meta.tasks or [] if isinstance(t, dict) and t.get("name")]
    if stale is not None:
        out["stale"] = stale
    return out


def runs_payload(metas: list[RunMeta], views: dict | None = None, notes: list[str] | None = None,
                 refused: dict[str, str | None] | None = None, shipped: set[str] | None = None,
                 shown: str | None = None) -> dict:
    """``asight/runs``: these runs; ``views``: the run catalogue's answer for each (``catalogue.RunView``,
    by run id) when the runs are a function's — its status, reasons and where it was found;
    ``notes``: why other runs are not shown (``RunIndex.problems``); ``refused``: why a run's records
    are not used, by run id; ``shipped``: the runs this user did not make here (``shipped: true``);
    ``shown``: the run the lenses, hovers and panels show for the function."""
    runs = []
    for meta in metas:
        view = (views or {}).get(meta.id)
        runs.append(run_summary(meta, view.stale if view is not None else None, (refused or {}).get(meta.id)))
        if view is not None:
            runs[-1].update(status=view.status, reasons=list(view.reasons), movedFrom=view.moved_from)
            if view.problems:
                runs[-1]["unread"] = list(view.problems)
        if meta.id in (shipped or ()):
            runs[-1]["shipped"] = True
    payload = {"schema": P.SCHEMA_RUNS, "status": P.STATUS_OK, "runs": runs}
    if notes:
        payload["notes"] = notes[:5]
    if shown is not None:
        payload["shown"] = shown
    return payload
