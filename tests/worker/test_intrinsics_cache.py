"""TVM's CUDA tensor intrinsics are parsed once per TVM and kept in the user's cache
(``worker/intrinsics.py``): a GPU target's tensor-core design space is the same from the cache as
from the parse, and a damaged cache is said, parsed again and rewritten."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.tvm, pytest.mark.slow]

SCRIPT = '''
import json, sys, time
from tvm.script import tirx as T
from asight_lsp.worker.compat import ms, tvm
from asight_lsp.worker import intrinsics

@T.prim_func(s_tir=True)
def mm(a: T.Buffer((64, 64), "float16"), b: T.Buffer((64, 64), "float16"), c: T.Buffer((64, 64), "float32")):
    for i, j, k in T.grid(64, 64, 64):
        with T.sblock("c"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                c[vi, vj] = T.float32(0)
            c[vi, vj] = c[vi, vj] + T.Cast("float32", a[vi, vk]) * T.Cast("float32", b[vk, vj])

target = tvm.target.Target("nvidia/nvidia-h100")
started = time.process_time()
how = intrinsics.prepare(target)
seconds = time.process_time() - started
context = ms.TuneContext(mod=mm, target=target, space_generator="post-order-apply", search_strategy="replay-trace",
                         num_threads=1, rand_state=0)
print(json.dumps({"how": how, "seconds": seconds, "file": str(intrinsics.cache_file()),
                  "spaces": [str(space.trace) for space in context.generate_design_space()]}))
'''


def _prepare(cache: Path) -> tuple[dict, str]:
    env = {**os.environ, "ASIGHT_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    script = cache.parent / "space.py"      # a file: TVMScript reads the function's source
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_a_gpu_space_is_the_same_from_the_kept_intrinsics(tmp_path):
    parsed, _ = _prepare(tmp_path / "cache")
    kept = Path(parsed["file"])
    assert parsed["how"] == "parsed" and kept.parent == tmp_path / "cache" and kept.stat().st_size > 100_000
    assert parsed["spaces"] and all("wmma" in space for space in parsed["spaces"])   # tensor-core rules used them

    cached, err = _prepare(tmp_path / "cache")
    assert cached["how"] == "cache" and cached["spaces"] == parsed["spaces"] and not err.strip()
    assert cached["seconds"] < parsed["seconds"] / 3, (cached["seconds"], parsed["seconds"])


def test_a_damaged_cache_is_said_parsed_again_and_rewritten(tmp_path, monkeypatch, capsys):
    """In this process, with the parse replaced by two real x86 intrinsics (the CUDA parse is the test above)."""
    from asight_lsp.worker import intrinsics
    from asight_lsp.worker.compat import s_tir, stub_tensor_intrin
    stub_tensor_intrin()
    names = ["dot_16x4_avx512", "dot_16x4_vnni"]
    parsed = {n: (s_tir.TensorIntrin.get(n).desc, s_tir.TensorIntrin.get(n).impl) for n in names}
    monkeypatch.setenv("ASIGHT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(intrinsics, "_REGISTERED", [])
    monkeypatch.setattr(intrinsics, "import_tensor_intrin", lambda: parsed)
    kept = intrinsics.cache_file()
    kept.write_text('{"dot_16x4_vnni": ["{')          # a write cut short
    assert intrinsics.gpu_intrinsics() == "parsed"
    err = capsys.readouterr().err
    assert f"the kept tensor intrinsics {kept} are unreadable" in err and "parsing them again" in err
    assert sorted(json.loads(kept.read_text())) == names          # rewritten whole
    assert intrinsics._read(kept).keys() == parsed.keys()
