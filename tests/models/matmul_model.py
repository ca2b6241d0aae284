"""A small Relax model that starts with a matmul of its input by a weight (4x16 @ 16x32), written with
its weights file, and the CLI run on it: what the model tests that need "a matmul, then an operator
TVM handles specially" share."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

MODEL = '''from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 16), dtype="float32"), w: R.Tensor((16, 32), dtype="float32")) -> R.Tensor({out}, dtype="float32"):
        R.func_attr({{"num_input": 1}})
        with R.dataflow():
            lv: R.Tensor((4, 32), dtype="float32") = R.matmul(x, w, out_dtype=None)
{body}
            R.output(gv)
        return gv
'''


def write_model(folder: Path, stem: str, out: str, body: list[str]) -> Path:
    """``<stem>_relax.py`` (the matmul, then ``body``'s bindings ending in ``gv`` of shape ``out``) and
    its seeded weights file; returns the script's path."""
    source = folder / f"{stem}_relax.py"
    source.write_text(MODEL.format(out=out, body="\n".join(" " * 12 + line for line in body)))
    np.savez(folder / f"{stem}_relax.weights.npz", w=np.random.default_rng(0).standard_normal((16, 32)).astype("float32"))
    return source


def asight(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "ASIGHT_HOME": str(cwd / "home")})
