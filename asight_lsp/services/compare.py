"""Two runs side by side (``asight.compareRuns``): their numbers and, per block, what each best
schedule did (TVM-free: the trace summary of each run's best record)."""
from __future__ import annotations

from pathlib import Path

from .. import protocol as P
from ..analysis.trace_summary import block_headline, summarize_trace
from ..analysis.trace_replay import source_blocks
from ..errors import AsightError
from ..store.index import RunIndex
from ..store.runs import Run
from ..tvmscript.outline import build_outline
from ..tvmscript.pysource import decode_source, read_bounded
from ..views.runs import run_summary
from .adopt_checks import adopted_problem
from .lookup import chosen_records
from .run_data import source_text


def compare_payload(index: RunIndex, ids: list[str]) -> dict:
    """Both runs' numbers and, per block, what each best schedule did."""
    metas = []
    for run_id in ids:
        meta = index.get(run_id)
        if meta is None:
            raise AsightError(f"no run '{run_id}'")
        refused = adopted_problem(Run(index.run_dir(run_id)), meta)
        if refused:                      # an adopted run edited since: its figures are not compared
            raise AsightError(refused)
        metas.append(meta)
    blocks: dict[str, list] = {}
    for k, meta in enumerate(metas):
        summary = _run_summary_blocks(index, meta)
        for name, block in summary.items():
            blocks.setdefault(name, [None, None])[k] = {"headline": block_headline(block), "steps": block["steps"]}
    a, b = metas
    ratio = a.best_us / b.best_us if a.best_us and b.best_us else None
    return {"schema": P.SCHEMA_COMPARE_RUNS, "status": P.STATUS_OK, "runs": [run_summary(m) for m in metas],
            "speedupOfSecond": ratio, "blocks": [{"block": n, "runs": v} for n, v in blocks.items()]}


def _run_summary_blocks(index: RunIndex, meta) -> dict:
    run_dir = Path(index.run_dir(meta.id))
    try:        # the run's snapshot, else its file: bounded, regular files only (a run folder is data)
        text = decode_source(read_bounded(str(Run(run_dir).source_path)))
    except (OSError, ValueError):
        text = source_text(meta, run_dir)
    if text is None:
        return {}
    outline = build_outline(text, meta.file)
    fn = outline.function(meta.function) or (outline.functions[0] if len(outline.functions) == 1 else None)
    best = index.best_record(meta.id, fn, chosen_records(meta)) if fn else None
    if not best:
        return {}
    return summarize_trace(best["insts"], best["decisions"], source_blocks(fn))["blocks"]
