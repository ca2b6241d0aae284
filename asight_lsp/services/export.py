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


def load_snippet(reply: dict) -> str:
    """Python that loads the library and calls it (the model's inputs as numpy arrays)."""
    lines = [f'{i["name"]} = tvm.runtime.tensor(np.zeros({tuple(i["shape"])}, "{i["dtype"]}"))  # your input'
             for i in reply["inputs"]]
    return LOAD_SNIPPET.format(library=reply["library"], function=reply["function"], args="\n".join(lines),
                               names=", ".join(i["name"] for i in reply["inputs"]))
