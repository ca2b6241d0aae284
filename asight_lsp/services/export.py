"""Export a tuned Relax model (TVM-free orchestration): the run's chosen records + the weights
beside the file -> a shared library, reloaded and checked against the untuned build by the worker
(``worker/model_export.py``).  Decisions: docs/models.md."""
from __future__ import annotations

import os

from ..engine import wire
from ..engine.client import borrowed, trusted
from ..errors import AsightError
from ..tvmscript.diagnostics import require_parsed
from .jobs import LIVE_STATES
from .lookup import chosen_records, tuned_file

LOAD_SNIPPET = """import numpy as np, tvm
from tvm import relax
vm = relax.VirtualMachine(tvm.runtime.load_module("{library}"), tvm.cpu())
{args}
out = vm["{function}"]({names})"""


def export_model(path: str, out: str, run: str | None = None, function: str | None = None,
                 store_root: str | None = None, worker=None, text: str | None = None) -> dict:
    """Build ``path``'s Relax model with a run's records into ``out`` (see the module doc)."""
    tf = tuned_file(path, function, run, store_root, text)
    found, meta, selection, text, outline = tf.run, tf.meta, tf.selection, tf.text, tf.outline
    if meta.kind != "relax":
        raise AsightError(f"run {meta.id} tuned {meta.kind or 'no'} kernels, not a Relax model: export builds models "
                          "(asight code --level asm shows a PrimFunc's machine code)")
    if meta.state in LIVE_STATES:
        raise AsightError(f"run {meta.id} is still tuning; export when it is done (or cancel it)")
    if not found.records():
        raise AsightError(f"run {meta.id} has no records yet")
    if os.path.isdir(out):
        raise AsightError(f"{out} is a directory; name the library file (model.so)")
    params = {**wire.source_params(text, outline, selection.unit, selection.member),
              "run_dir": str(found.path), "target": meta.target, "chosen": chosen_records(meta),
              "weights": wire.weights_beside(path), "out": os.path.abspath(out)}
    entry = next((f.name for f in selection.functions if f.kind == "relax_function"), "main")
    params["function"] = entry
    with borrowed(worker) as client:
        require_parsed(text, path, selection.unit, client)     # the sandboxed worker parses first
    with trusted(getattr(worker, "python", None), 3600) as unsandboxed:   # the linker is a process
        reply = unsandboxed.request(wire.EXPORT_MODEL, params, timeout=3600)
    reply.update(run=meta.id, weights=params["weights"], load=load_snippet(reply))
    return reply


def default_output(path: str) -> str:
    """Where the editor's export writes when the user names no file: ``<stem>.so`` beside the model."""
    return os.path.splitext(os.path.abspath(path))[0] + ".so"


def applied_text(reply: dict) -> str:
    """``3 of 4 tuned kernels from run R's records`` (+ what was not applied, what folded away)."""
    applied = reply.get("applied") or {}
    text = f"{len(applied.get('from_records') or [])} of {applied.get('kernels', '?')} kernels from run {reply.get('run')}'s records"
    if applied.get("missing"):
        text += f"; NOT applied (default schedule): {', '.join(applied['missing'])}"
    if applied.get("folded"):
        text += f"; folded into constants with the weights: {', '.join(applied['folded'])}"
    return text


def export_summary(reply: dict) -> str:
    """One paragraph for the editor: the library, the records check, the weights and the output check."""
    check = reply.get("check") or {}
    weights = (f"{reply['bound_weights']} weights bound from {os.path.basename(reply['weights'])}"
               if reply.get("bound_weights") else
               "no weights file beside the model (<file>.weights.npz): the library takes every parameter as an input")
    outputs = "outputs match the untuned build" if check.get("ok") else "outputs DIFFER from the untuned build"
    return f"wrote {reply.get('library')} · {applied_text(reply)} · {weights} · {outputs}"


def load_snippet(reply: dict) -> str:
    """Python that loads the library and calls it (the model's inputs as numpy arrays)."""
    lines = [f'{i["name"]} = tvm.runtime.tensor(np.zeros({tuple(i["shape"])}, "{i["dtype"]}"))  # your input'
             for i in reply["inputs"]]
    return LOAD_SNIPPET.format(library=reply["library"], function=reply["function"], args="\n".join(lines),
                               names=", ".join(i["name"] for i in reply["inputs"]))
