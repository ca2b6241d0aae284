"""Every pipeline lever goes through this guard (docs/models.md, "A lever TVM refuses").

A lever TVM refuses (an ``InternalError`` in a pass, a rewrite that fails) is skipped where it was
refused, for one binding (``each``) or for the whole model (``whole``), and the pipeline goes on with
the module without it.  Each refusal is kept once per request (``start``, ``refused``) as an
``analysis.levers.Refusal``: a worker's reply carries them (``levers_refused``), the tuning job writes
them to run.json (``extra.levers_refused``), and the tune summary, the model view, the export and
``--compare-onnx`` say them in one line each.

The same module always gets the same answer (TVM's passes are deterministic), so the tuning job,
the re-measurement, the profile and the export build the same kernels; ``each``'s search is kept
per module and lever, so a process that builds a pipeline several times searches once.
"""
from __future__ import annotations

from typing import Callable

from ..analysis.levers import REFUSED_KEY, STEPS, Refusal, accepted_subset, merge_refusals, refusal_line
from ..analysis.levers import reason_line as reason
from .compat import tvm_ffi

_REFUSED: dict[tuple, Refusal] = {}
_SEARCHED: dict[tuple, tuple[list, dict]] = {}   # (bindings kept, reasons of the others) per module


def note(lever: str, err: BaseException | str, kernel: str | None = None) -> Refusal:
    """Keep one refusal (once per lever, kernel and step)."""
    why = err if isinstance(err, str) else reason(err)
    refusal = Refusal(lever, STEPS.get(lever, lever), why, kernel)
    _REFUSED.setdefault((lever, kernel, refusal.step), refusal)
    return refusal


def start() -> None:
    """Forget the refusals kept so far (a worker starts each request afresh; ``each``'s searches stay)."""
    _REFUSED.clear()


def refused() -> list[dict]:
    """The refusals of this process so far, as run.json keeps them."""
    return [r.as_dict() for r in _REFUSED.values()]


def record(extra: dict, update: Callable, event: Callable, new: list | None = None) -> None:
    """A run's refusals (``extra``, its run.json's) with this request's and ``new`` added, each once,
    saved by ``update(extra=...)``; each one added said by ``event("status", ...)``."""
    earlier = extra.get(REFUSED_KEY) or []
    merged = merge_refusals(earlier, refused() + list(new or []))
    if len(merged) > len(earlier):
        update(extra={**extra, REFUSED_KEY: merged})
    for item in merged[len(earlier):]:
        event("status", stage="lever", message=refusal_line(Refusal.of(item)), refused=item)


def whole(lever: str, apply: Callable, mod):
    """``apply(mod)``, or ``mod`` when TVM refuses it (the refusal kept)."""
    return either(lever, lambda: apply(mod), lambda: mod)


def either(lever: str, with_lever: Callable, without: Callable, kernel: str | None = None):
    """``with_lever()``, or ``without()`` when TVM refuses it (the refusal kept, for ``kernel`` if named)."""
    try:
        return with_lever()
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as err:  # noqa: BLE001 - any refusal of a lever leaves the work without it
        note(lever, err, kernel)
    return without()


def each(lever: str, mod, names: list[str], apply: Callable[[list[str]], object]):
    """``apply(kept)`` for the largest set of bindings ``names`` TVM takes the lever on together
    (``analysis.levers.accepted_subset``), each binding left out kept as a refusal; ``mod`` when none is."""
    key = (lever, str(tvm_ffi.structural_hash(mod)), tuple(names))
    last: dict = {"module": mod}
    if key not in _SEARCHED:

        def refuses(subset: list) -> str | None:
            try:
                last["module"] = apply(subset)   # the last one taken is the kept set's
            except (MemoryError, KeyboardInterrupt):
                raise
            except Exception as err:  # noqa: BLE001 - the reason is the answer
                return reason(err)
            return None

        _SEARCHED[key] = accepted_subset(names, refuses)
    elif _SEARCHED[key][0]:
        last["module"] = apply(_SEARCHED[key][0])   # a fresh module: callers change what they get
    kept, reasons = _SEARCHED[key]
    for name, why in reasons.items():
        note(lever, why, name)
    return last["module"] if kept else mod
