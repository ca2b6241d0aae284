"""What the model levers of issue 21 need from the store (TVM-free): a run's ``extra`` (twins and
transfers, the budget's outlook) for the model view."""
from __future__ import annotations

from ..analysis.levers import refusal_lines, refusals_of
from ..store.runs import RunStore


def run_extra(run: dict | None, store_root: str | None) -> dict | None:
    """run.json ``extra`` of the run a profile measured (None without a run, or when it is gone)."""
    if not run or not run.get("id"):
        return None
    try:
        return RunStore(store_root).get(run["id"]).load().extra
    except Exception:  # noqa: BLE001 - the view shows the profile; the twins section is left out
        return None


def compare_onnx(path: str, onnx: str, run: str | None = None, function: str | None = None,
                 store_root: str | None = None, worker=None, rounds: int = 15, budget_s: float = 20.0) -> dict:
    """The tuned model (the run's chosen records, weights bound, as ``asight export`` builds it) against
    onnxruntime on ``onnx``, timed interleaved in one worker process (``worker/onnx_compare.py``)."""
    import os

    from ..engine import wire
    from ..engine.client import WorkerClient
    from ..errors import AsightError
    from .lookup import chosen_records, tuned_file
    if not os.path.isfile(onnx):
        raise AsightError(f"{onnx}: no such ONNX file")
    tf = tuned_file(path, function, run, store_root)
    if tf.meta.kind != "relax":
        raise AsightError(f"run {tf.meta.id} tuned {tf.meta.kind or 'no'} kernels, not a Relax model: "
                          "--compare-onnx times a model")
    if not tf.run.records():
        raise AsightError(f"run {tf.meta.id} has no records yet")
    params = {**wire.source_params(tf.text, tf.outline, tf.selection.unit, tf.selection.member),
              "run_dir": str(tf.run.path), "target": tf.meta.target, "chosen": chosen_records(tf.meta),
              "weights": wire.weights_beside(path), "onnx": os.path.abspath(onnx), "rounds": rounds,
              "budget_s": budget_s,
              "function": next((f.name for f in tf.selection.functions if f.kind == "relax_function"), "main")}
    with WorkerClient(getattr(worker, "python", None), 3600) as sandboxed:   # runs the model: in the sandbox
        reply = sandboxed.request(wire.COMPARE_ONNX, params, timeout=3600)
    reply["run"] = tf.meta.id
    reply["levers_refused"] = refusals_of(tf.meta.extra, reply)
    reply["levers_refused_text"] = refusal_lines(tf.meta.extra, reply)
    return reply
