"""Simulated cache misses per TVMScript line: valgrind cachegrind on a serial build (docs/tvm.md)."""
from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ..engine.spawn import isolated_env, script_argv
from . import sandbox
from .compat import tvm
from .programs import entry_name


_DRIVER = r"""
import sys, numpy as np, tvm
lib, entry, spec = sys.argv[1], sys.argv[2], sys.argv[3]
rt = tvm.runtime.load_module(lib)
args = [tvm.runtime.tensor(np.load(p)) for p in spec.split(",")]
rt[entry](*args)
"""


def cachegrind(mod, target, arrays: list[np.ndarray], timeout: float = 300.0) -> dict:
    """Simulated cache misses per TVMScript line (valgrind cachegrind on a serial build)."""
    if sandbox.STATUS.active:   # no files, no processes in the sandbox (docs/sandbox.md)
        return {"skipped": "cachegrind needs a worker without the OS sandbox (asight profile --cachegrind starts "
                           "one)", "source": "valgrind cachegrind"}
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return {"skipped": "valgrind is not installed", "source": "valgrind cachegrind"}
    workdir = Path(tempfile.mkdtemp(prefix="asight-cg-"))
    try:
        from .parse import checked_for_build    # valgrind runs it outside the sandbox
        tvm.compile(checked_for_build(mod, target, "the kernel"), target=target).export_library(str(workdir / "k.so"))
        paths = []
        for i, array in enumerate(arrays):
            np.save(workdir / f"a{i}.npy", array)
            paths.append(str(workdir / f"a{i}.npy"))
        (workdir / "driver.py").write_text(_DRIVER)
        out_file = workdir / "cg.out"
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=yes", "--D1=32768,8,64", "--LL=33554432,16,64",
               f"--cachegrind-out-file={out_file}", *script_argv(str(workdir / "driver.py"), str(workdir / "k.so"),
                                                              entry_name(mod), ",".join(paths))]
        env = dict(isolated_env(), OPENBLAS_NUM_THREADS="1", TVM_NUM_THREADS="1")
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=workdir)
        if proc.returncode != 0 or not out_file.exists():
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
            return {"error": f"cachegrind failed: {tail[0]}", "source": "valgrind cachegrind"}
        lines = parse_cachegrind(out_file.read_text(errors="replace"))
        return {"lines": lines, "seconds": time.perf_counter() - started,
                "cache": {"D1": "32 KiB 8-way 64 B", "LL": "32 MiB 16-way 64 B"},
                "source": "valgrind cachegrind (simulated caches, one call, serial build)"}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def parse_cachegrind(text: str) -> list[dict]:
    """Counters per TVMScript line of the generated kernel (files named by TVM's codegen)."""
    events, file_name, names, agg = [], None, {}, {}
    for raw in text.splitlines():
        if raw.startswith("events:"):
            events = raw.split()[1:]
        elif raw.startswith("fl="):
            file_name = _cg_name(names, "fl", raw[3:])
        elif raw.startswith(("fn=", "fi=", "fe=")):
            if raw.startswith(("fi=", "fe=")):
                file_name = _cg_name(names, "fl", raw[3:])
            else:
                _cg_name(names, "fn", raw[3:])
        elif raw[:1].isdigit() and file_name and _is_tvm_file(file_name):
            parts = raw.split()
            line, values = int(parts[0]), [int(x) for x in parts[1:]]
            values += [0] * (len(events) - len(values))
            agg[line] = [a + b for a, b in zip(agg.get(line, [0] * len(events)), values)]
    return [dict(line=line, **dict(zip(events, values))) for line, values in sorted(agg.items())]


def _cg_name(names: dict, kind: str, value: str) -> str:
    """Resolve cachegrind's name compression: ``(id) name`` defines, ``(id)`` refers."""
    if value.startswith("("):
        close = value.index(")")
        key, rest = (kind, value[1:close]), value[close + 1:].strip()
        if rest:
            names[key] = rest
        return names.get(key, value)
    return value


def _is_tvm_file(name: str) -> bool:
    """TVM's LLVM codegen names the kernel's debug file ``./IRModule.CodeGenLLVM``; its lines are
    TVMScript lines (from the statement spans)."""
    return "CodeGenLLVM" in name
