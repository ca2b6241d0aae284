"""``asight import``'s output check (TVM-free side): the imported file's untuned build and
onnxruntime on one seeded input, in a sandboxed worker (``worker/import_check.py``: it runs the model)."""
from __future__ import annotations


def check_import(script: str, model: str, python: str | None = None, seed: int = 0) -> dict:
    """``{check, against, seconds, inputs}`` or ``{skipped}`` (``views/outputs.verdict`` words it)."""
    from pathlib import Path

    from ..engine import wire
    from ..engine.client import WorkerClient
    from ..tvmscript.outline import build_outline
    text = Path(script).read_text()
    outline = build_outline(text, script)
    params = {**wire.source_params(text, outline, outline.units[0]), "weights": wire.weights_beside(script),
              "onnx": str(Path(model).resolve()), "seed": seed}
    with WorkerClient(python, 3600) as sandboxed:
        return sandboxed.request(wire.CHECK_IMPORT, params, timeout=3600)
