"""The best schedule of a run applied to a function: scheduled TVMScript and trace (for code actions)."""
from __future__ import annotations

import textwrap

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


def require_insertable(text: str, mode: str) -> None:
    """The text "Apply best schedule" puts into the user's file for ``mode`` ("trace": the record's trace
    as a schedule function; "script": the scheduled TVMScript function, indented as in the file) has a
    schedule's shape (``analysis/schedule_text``): a record is data a repository can ship (red team
    rounds 8 and 9).  Checked on the exact text inserted.  AsightError otherwise."""
    check = require_trace_function if mode == "trace" else require_script_function
    try:
        check(textwrap.dedent(text).strip("\n") + "\n")
    except NotASchedule as err:
        raise AsightError(f"the run's best {'trace' if mode == 'trace' else 'schedule'} is not inserted: "
                          f"{err} (a tampered record?)") from None
