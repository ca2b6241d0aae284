"""The best schedule of a run applied to a function: scheduled TVMScript and trace (for code actions)."""
from __future__ import annotations

from ..analysis.schedule_text import NotASchedule, require_script_function, require_trace_function
from ..engine import wire
from ..engine.client import borrowed
from ..errors import AsightError
from .lookup import chosen_records, tuned_file


def apply_best(path: str, function: str | None = None, run: str | None = None, store_root: str | None = None,
               worker=None, text: str | None = None) -> dict:
    """The best schedule of a run applied to the function: scheduled TVMScript and trace per function."""
    tf = tuned_file(path, function, run, store_root, text)
    found, meta, selection = tf.run, tf.meta, tf.selection
    params = {**wire.source_params(tf.text, tf.outline, selection.unit, selection.member), "run_dir": str(found.path),
              "target": meta.target, "chosen": chosen_records(meta), "weights": wire.weights_beside(path)}
    with borrowed(worker) as client:
        reply = client.request(wire.APPLY_BEST, params, timeout=300)
    return {"run": found.id, "function": selection.label, **reply}


def require_insertable(entry: dict, mode: str) -> None:
    """The entry's text for ``mode`` ("trace": the record's trace function; "script": the scheduled
    TVMScript) has a schedule's shape (``analysis/schedule_text``), before it goes into the user's
    file: a record is data a repository can ship (red team round 8, F10).  AsightError otherwise."""
    check = require_trace_function if mode == "trace" else require_script_function
    try:
        check(entry.get(mode) or "")
    except NotASchedule as err:
        raise AsightError(f"the run's best {'trace' if mode == 'trace' else 'schedule'} is not inserted: "
                          f"{err} (a tampered record?)") from None
