"""``asight import model.pt2``: the sandboxed worker loads, imports and checks the saved
``torch.export`` program (``worker/torch_import.py``: loading one unpickles data, docs/safety.md) and
sends the file's text and the weights; this side (TVM-free) writes them, as the unsandboxed import
worker writes an ONNX model's."""
from __future__ import annotations

import os

import numpy as np

from ..engine import wire
from ..store.files import write_model


class Weights:
    """The ``weight`` events of one import, gathered into arrays (raw bytes and a dtype: data only,
    never a pickle)."""

    def __init__(self):
        self.parts: dict[str, list[bytes]] = {}
        self.specs: dict[str, tuple[str, list[int]]] = {}

    def __call__(self, event: dict) -> None:
        if event.get("type") == "weight":
            self.parts.setdefault(event["name"], []).append(bytes(event["data"]))
            self.specs[event["name"]] = (event["dtype"], event["shape"])

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: np.frombuffer(b"".join(parts), dtype=np.dtype(self.specs[name][0])).reshape(self.specs[name][1])
                for name, parts in self.parts.items()}


def import_exported(model: str, out: str, shapes: dict, python: str | None = None, seed: int = 0,
                    worker=None, check: bool = True) -> dict:
    """Import the saved program ``model`` into ``out`` (+ weights): the reply of
    ``worker/torch_import.import_exported`` with ``script`` and ``weights`` the paths written.
    ``worker``: a sandboxed ``WorkerClient`` to use (default: a fresh one)."""
    from ..engine.client import WorkerClient, borrowed
    weights, weights_path = Weights(), os.path.splitext(out)[0] + wire.WEIGHTS_SUFFIX
    params = {"model": model, "shapes": shapes, "seed": seed, "weights_name": os.path.basename(weights_path),
              "check": check}
    with (borrowed(worker) if worker is not None else WorkerClient(python, default_timeout=1800)) as sandboxed:
        reply = sandboxed.request(wire.IMPORT_EXPORTED, params, timeout=1800, on_event=weights)   # unpickles: sandboxed
    write_model(out, weights_path, reply.pop("text"), weights.arrays())
    return {**reply, "script": out, "weights": weights_path}
