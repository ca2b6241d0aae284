"""The tensor intrinsics a target's design spaces need, without parsing them in every process.

MetaSchedule's ``TuneContext`` imports ``tvm.s_tir.tensor_intrin``: every intrinsic TVM has, each
parsed from TVMScript at import, 17 CPU-seconds (docs/tvm.md §0).  A CPU target needs only the x86
ones (``compat.stub_tensor_intrin``, 0.2 s).  A GPU target needs the CUDA ones: the first process
parses what the package registers (all but the x86 ones, which the stub registers) and keeps it,
as TVM's JSON, in the user's cache (``cache_file``: keyed by TVM's version and the sources of the
package); every later process registers them from there (0.6 s).  A cache that cannot be read or
parsed is parsed again and rewritten; one that cannot be written (the sandboxed worker opens nothing
for writing) is only not kept.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from pathlib import Path

from ..engine.targets import DEVICE_KINDS
from ..store.files import cache_dir
from .compat import import_tensor_intrin, register_tensor_intrin, s_tir, stub_tensor_intrin, tvm

_REGISTERED: list[str] = []   # how this process registered them, once


def prepare(target) -> str:
    """Register the tensor intrinsics ``target``'s default design-space rules refer to; returns how
    (``"x86"`` on a CPU target, else ``gpu_intrinsics``'s answer)."""
    if target.kind.name in DEVICE_KINDS:
        return gpu_intrinsics()
    stub_tensor_intrin()
    return "x86"


def cache_file() -> Path:
    """The kept intrinsics of this TVM: its version and the sources of ``tvm/s_tir/tensor_intrin``."""
    digest = hashlib.sha256(tvm.__version__.encode())
    package = Path(s_tir.__file__).parent / "tensor_intrin"
    for source in sorted(package.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return cache_dir() / f"tensor-intrin-{digest.hexdigest()[:16]}.json"


def gpu_intrinsics() -> str:
    """Every tensor intrinsic registered, the package left a stub (``TuneContext``'s import of it then
    costs nothing): from the cache when it holds them, else parsed (and kept, unless part of them had
    been imported before).  Returns how: ``"imported"`` (done before in this process), ``"cache"`` or
    ``"parsed"``."""
    if _REGISTERED:
        return "imported"
    stub_tensor_intrin()
    path = cache_file()
    kept = _read(path)
    if kept is not None:
        register_tensor_intrin(kept)
        how = "cache"
    else:
        _write(path, import_tensor_intrin())
        how = "parsed"
    _REGISTERED.append(how)
    return how


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
        return {name: (tvm.ir.load_json(desc), tvm.ir.load_json(impl)) for name, (desc, impl) in data.items()}
    except (FileNotFoundError, PermissionError):   # none yet, or a sandbox that may not read it
        return None
    except Exception as err:  # noqa: BLE001  a damaged cache is parsed again and rewritten
        print(f"asight: the kept tensor intrinsics {path} are unreadable ({str(err).splitlines()[0][:200]}): "
              "parsing them again", file=sys.stderr)
        return None


def _write(path: Path, registered: dict | None) -> None:
    if not registered:
        return
    text = json.dumps({name: [tvm.ir.save_json(desc), tvm.ir.save_json(impl)] for name, (desc, impl) in registered.items()})
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text)
        os.replace(temporary, path)
    except OSError:   # read-only cache, a full disk, the sandbox: the next process parses them again
        with contextlib.suppress(OSError):
            temporary.unlink()
