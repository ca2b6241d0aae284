"""One line for a comparison of outputs (``worker/inputs.compare_outputs``' record): whether two
programs computed the same, with the largest differences and the tolerance, or the first output
that differs.  The import's check against onnxruntime prints it; any reference (PyTorch) words the
same way."""
from __future__ import annotations


def tolerance_text(check: dict) -> str:
    return f"rtol {check['rtol']:g}, atol {check['atol']:g} x max(1, max|reference|)"


def verdict(result: dict) -> tuple[bool, str]:
    """(outputs match, the line) for ``{check, against}``; ``{skipped}`` (nothing compared) is no
    mismatch: its line says why."""
    if "skipped" in result:
        return True, f"outputs: not compared ({result['skipped']})"
    check, against = result["check"], result.get("against", "the reference")
    buffers = check["buffers"]
    if check["ok"]:
        worst_abs = max((b["max_abs_err"] for b in buffers), default=0.0)
        worst_rel = max((b["max_rel_err"] for b in buffers), default=0.0)
        return True, (f"outputs match {against} on one seeded input ({len(buffers)} output{'s' * (len(buffers) != 1)}; "
                      f"max abs diff {worst_abs:.2g}, max rel diff {worst_rel:.2g}; tolerance {tolerance_text(check)})")
    if "count" in check:
        return False, (f"warning: the imported model returns {check['count']['candidate']} outputs, "
                       f"{against} {check['count']['reference']}")
    first = next(b for b in buffers if not b["ok"])
    if "shape" in first:
        return False, (f"warning: output {first['name']} differs from {against}: shape {first['shape']['candidate']} "
                       f"instead of {first['shape']['reference']}")
    tol = check if "rtol" not in first else {**check, **first}
    return False, (f"warning: output {first['name']} differs from {against}: {first['mismatched']} of "
                   f"{first['elements']} values beyond the tolerance ({tolerance_text(tol)}; max abs diff "
                   f"{first['max_abs_err']:.2g}, max rel diff {first['max_rel_err']:.2g})")
