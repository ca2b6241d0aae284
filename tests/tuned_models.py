"""Tiny models imported and tuned once per test session, each user handed the folder as it was made.

Several files import the same tiny ResNet and tune it with the same inputs (model seed, trials,
batch size, tuning seed, the same command), then only read the run, or change it and put it back.
Each such tuning took 40-60 s.  ``Pristine`` makes the folder once and keeps a copy of it; every
``checkout()`` puts that copy back at the SAME path, replacing whatever the previous user left there.
The same path, because a run records its file and weights by absolute path: a copy elsewhere would be
another workspace with a moved run, not the workspace the command made.

Users must not overlap in time: each takes it in a module-scoped fixture (the last user's files are
gone at the next checkout).  A test that asserts on the tuning itself tunes on its own.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parent.parent


class Pristine:
    """A folder made once by ``make(path)``; ``checkout()`` returns it at ``path`` as it was made.
    ``made``: what ``make`` returned (e.g. the command's output)."""

    def __init__(self, base: Path, make: Callable[[Path], object]):
        self.path = base / "ws"
        self._kept = base / "as-made"
        self.path.mkdir()
        self.made = make(self.path)
        shutil.copytree(self.path, self._kept, symlinks=True)

    def checkout(self) -> Path:
        shutil.rmtree(self.path, ignore_errors=True)
        shutil.copytree(self._kept, self.path, symlinks=True)
        return self.path


def _onnx_build():
    sys.path.insert(0, str(ROOT / "fixtures" / "models"))
    import onnx_build
    return onnx_build


def cli_tuned_tiny_resnet(ws: Path) -> None:
    """The tiny ResNet (seed 1) imported, tuned and profiled by the CLI in ``ws`` (its store:
    ``ws/.asight``): `asight import tiny.onnx`, `asight tune tiny_relax.py --func Module --trials 12`
    (one trial per batch: each of its 6 kernels gets one), `asight model tiny_relax.py`."""
    onnx_build = _onnx_build()
    onnx_build.save(onnx_build.tiny_resnet(seed=1, size=8, width=4), ws / "tiny.onnx")
    env = dict(os.environ, TVM_NUM_THREADS="2", ASIGHT_TRIALS_PER_ITER="1")
    for argv in (["import", "tiny.onnx", "--no-check"], ["tune", "tiny_relax.py", "--func", "Module", "--trials", "12"],
                 ["model", "tiny_relax.py"]):
        done = subprocess.run([sys.executable, "-m", "asight_lsp", *argv], cwd=ws, capture_output=True, text=True,
                              timeout=900, env=env)
        assert done.returncode == 0, done.stderr
        if argv[0] == "tune":     # a tuned model is profiled per kernel call before the command returns
            assert "profiling each kernel call" in done.stdout, done.stdout
            runs = ws / ".asight" / "runs"     # with the graphs its hotspots match
            assert [*runs.glob("*/profile.msgpack")] and [*runs.glob("*/relax-graphs.msgpack")], done.stdout + done.stderr


def job_tuned_tiny_resnet(ws: Path) -> None:
    """The tiny ResNet (seed 3) imported by `asight import` and tuned by a tuning job (12 trials, one
    per batch, seed 0) into the store ``ws/store``."""
    from asight_lsp.cli import main as asight
    from asight_lsp.services.tuning import TuneRequest, start_tune
    onnx_build = _onnx_build()
    onnx_build.save(onnx_build.tiny_resnet(seed=3, size=8, width=4), ws / "tiny.onnx")
    assert asight(["import", str(ws / "tiny.onnx"), "--no-check"]) == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASIGHT_TRIALS_PER_ITER", "1")
        job = start_tune(TuneRequest(file=str(ws / "tiny_relax.py"), function=None, trials=12,
                                     store_root=str(ws / "store"), seed=0))
        meta = job.wait(900)
    assert meta.state == "done", meta.error


def cli_tuned_matmul64(ws: Path) -> dict:
    """fixtures/matmul64.py copied into ``ws`` and tuned by `asight tune FILE --trials 16 --seed 0
    --work-dir ws/.asight --json` (cwd ``ws``); returns the command's JSON reply."""
    import json
    shutil.copy(ROOT / "fixtures" / "matmul64.py", ws / "matmul64.py")
    done = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", str(ws / "matmul64.py"), "--trials", "16", "--seed",
                           "0", "--work-dir", str(ws / ".asight"), "--json"], capture_output=True, text=True, timeout=600,
                          cwd=ws, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def latest_run(store: Path):
    """The metadata of the store's run (what the tuning job's ``wait`` returned: ``Run.load()``)."""
    from asight_lsp.store.runs import RunStore
    return RunStore(str(store)).get("latest").load()


def deployable_module(script: Path):
    """The deployable module of an imported model's script (its first unit, the weights file beside
    it bound), as the worker builds it for tuning, profiling and export."""
    from asight_lsp.engine.wire import weights_beside
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker.parse import parse_unit
    from asight_lsp.worker.relax_pipeline import deployable
    text = script.read_text()
    outline = build_outline(text)
    unit = outline.units[0]
    parsed = parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                        outline.constants, outline.aliases)
    return deployable(parsed, None, weights_beside(str(script)))[0]
