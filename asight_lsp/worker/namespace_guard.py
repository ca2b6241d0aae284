"""Keep one file's evaluation from changing how later files parse (docs/sandbox.md).

The worker is long-lived: every file the editor opens is evaluated by the same TVM.  A TVMScript call
that rebinds a name in TVM's script modules (``T.register_script_namespace("Buffer", T.int8)`` did:
``globals()[name] = ...`` plus ``setattr`` on four modules) would change the results of every later
file.  The gate refuses the members known to do this (``scripts/make_tvmscript_api.GLOBAL_STATE``);
this guard is the second line: the worker snapshots the globals (and ``__all__`` lists) of TVM's
script modules once, after ``import tvm``, and after every request puts back any name that was added,
removed or rebound, saying so on stderr.  A check is identity comparisons only (< 1 ms, measured in
docs/sandbox.md), so it costs no keystroke.
"""
from __future__ import annotations

import sys

PREFIXES = ("tvm.script", "tvm.tirx.script", "tvm.relax.script", "tvm.ir.script")


class NamespaceGuard:
    def __init__(self, prefixes: tuple[str, ...] = PREFIXES):
        self.prefixes = prefixes
        self.saved: dict[str, tuple[object, dict, list | None]] = {}
        self.snapshot()

    def snapshot(self) -> None:
        for name, module in list(sys.modules.items()):
            if module is not None and name.startswith(self.prefixes) and name not in self.saved:
                names = vars(module)
                exported = names.get("__all__")
                self.saved[name] = (module, dict(names), list(exported) if isinstance(exported, list) else None)

    def restore(self) -> list[str]:
        """Put every snapshotted module back as it was; the names that had changed ("module.name")."""
        changed: list[str] = []
        for name, (module, before, exported) in self.saved.items():
            now = vars(module)
            diff = [key for key in now.keys() | before.keys()
                    if key != "__all__" and (key not in now or key not in before or now[key] is not before[key])]
            if diff:
                for key in diff:
                    if key in before:
                        now[key] = before[key]
                    else:
                        del now[key]
                changed += [f"{name}.{key}" for key in sorted(diff)]
            current = now.get("__all__")
            if exported is not None and isinstance(current, list) and current != exported:
                current[:] = exported
                changed.append(f"{name}.__all__")
        self.snapshot()   # modules imported lazily by this request join the snapshot as they are now
        return changed


def after_request(guard: NamespaceGuard | None) -> None:
    if guard is None:
        return
    changed = guard.restore()
    if changed:
        print(f"asight worker: a request changed TVM's script namespaces; restored: {', '.join(changed[:10])}",
              file=sys.stderr, flush=True)
