"""The fast build path: builder workers never import the 19 s tensor intrinsics, and keep their pool."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.tvm]

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent('''
    import json, sys, time
    sys.path.insert(0, sys.argv[1])
    import cloudpickle
    from matmul64 import matmul64
    from asight_lsp.worker import builder as bu, metaschedule as tu
    from asight_lsp.worker.compat import ms, normalize_mod

    def probe():   # defined in __main__: cloudpickle sends it by value to a builder worker
        import os, sys
        return os.getpid(), sorted(m for m in sys.modules if m.startswith("tvm.s_tir.tensor_intrin"))

    target = tu.resolve_target(None)
    builder = bu.make_builder(max_workers=1)
    inputs = [ms.builder.BuilderInput(normalize_mod(matmul64), target)]
    first = builder.build(inputs)
    pid1, loaded1 = builder._executor().submit(probe).result()
    second = builder.build(inputs)
    pid2, loaded2 = builder._executor().submit(probe).result()
    root = builder.root
    builder.shutdown()
    pickled = cloudpickle.dumps(bu.fast_build)
    print(json.dumps({"errors": [r.error_msg for r in first + second], "artifacts": [bool(r.artifact_path) for r in first + second],
                      "loaded": loaded1 + loaded2, "same_worker": pid1 == pid2,
                      "by_reference": b"asight_lsp.worker.builder" in pickled and len(pickled) < 300,
                      "root_removed": bool(root) and not __import__("os").path.exists(root),
                      "main_loaded": sorted(m for m in sys.modules if m.startswith("tvm.s_tir.tensor_intrin"))}))
''')


def test_builder_workers_skip_tensor_intrinsics_and_are_reused():
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT / "fixtures")], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["errors"] == [None, None] and data["artifacts"] == [True, True]
    assert data["loaded"] == []                 # no tvm.s_tir.tensor_intrin.* in the builder worker
    assert data["by_reference"]                 # fast_build travels as a module reference
    assert data["same_worker"]                  # the pool outlives a batch
    assert data["root_removed"]                 # its libraries' folder goes with it
    assert data["main_loaded"] == []            # nor in the process that only builds
