"""Failed builds and runs of a tune, grouped by reason (pure: no TVM).

MetaSchedule keeps no error text in its database (a failed trial is stored with run_secs [1e10]);
the builder's and runner's ``error_msg`` exist only during the batch.  The tuning job hands each one
to ``FailureLog`` (``worker/tune_job.py``), which appends the full text to ``failures.log`` in the
run directory and keeps the grouped summary that goes to ``run.json`` (``extra.failures``) and from
there to the CLI, the run info the server sends, the lens tooltip and the panels.

A reason is the error's own line (``InternalError: S_global has duplicate definitions``), not the
first line of the message, which is the builder's header ("LocalBuilder: An exception occurred")
followed by a traceback.  Addresses and numbers are masked so that the same error from different
candidates (other buffer sizes, other pointers) falls in one group.
"""
from __future__ import annotations

import re
from pathlib import Path

FAILURES_LOG = "failures.log"
MAX_REASON = 200
_HEADER = re.compile(r"^(Local|RPC)?\s*(Builder|Runner)\w*:\s*An exception occurred\s*$", re.I)
_ERROR_LINE = re.compile(r"^\s*(?:[\w.]+\.)?(\w*(?:Error|Exception|Interrupt)|Timeout\w*)\b\s*(?::|$)")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_SPACE = re.compile(r"\s+")


def reason(message: str | None) -> str:
    """The normalised one-line reason of an error message (see module doc)."""
    lines = [ln.rstrip() for ln in (message or "").splitlines() if ln.strip()]
    lines = [ln for ln in lines if not _HEADER.match(ln.strip())]
    if not lines:
        return "failed without a message"
    errors = [k for k, ln in enumerate(lines) if _ERROR_LINE.match(ln) and not ln.lstrip().startswith("File ")]
    line = lines[errors[-1]].strip() if errors else _first_meaningful(lines)
    where = _innermost_frame(lines[:errors[-1]]) if errors else None
    if where:
        line += f" (in {where})"
    line = _NUMBER.sub("N", _HEX.sub("0x…", line))
    line = _SPACE.sub(" ", line)
    return line if len(line) <= MAX_REASON else line[:MAX_REASON - 1] + "…"


_FRAME = re.compile(r'^\s*File "[^"]*", line \d+, in (.+)$')
_FUNC = re.compile(r"([A-Za-z_][\w:~<>]*)\s*\(")


def _innermost_frame(lines: list[str]) -> str | None:
    """The function of the last traceback frame before the error line (C++ signatures reduced to the
    qualified name): "not implemented" says little, "in tvm::codegen::CodeGenLLVM::GetThreadIndex" more."""
    for ln in reversed(lines):
        m = _FRAME.match(ln)
        if m:
            func = m.group(1).strip()
            names = _FUNC.findall(func)
            return names[-1] if names else func
    return None


def _first_meaningful(lines: list[str]) -> str:
    """The first line that is not a traceback frame (``Traceback``, ``File ...``, code lines)."""
    for ln in lines:
        s = ln.strip()
        if s.startswith(("Traceback", "File ", "^")) or s.startswith("  "):
            continue
        return s
    return lines[0].strip()


def group(failures: list[dict], log: str | None = None) -> list[dict]:
    """``[{stage, message}]`` → ``[{reason, count, stage, log}]``, largest group first (ties: build
    before run, then by reason)."""
    groups: dict[tuple[str, str], dict] = {}
    for f in failures:
        stage = "run" if f.get("stage") == "run" else "build"
        key = (stage, reason(f.get("message")))
        entry = groups.get(key)
        if entry is None:
            entry = groups[key] = {"reason": key[1], "count": 0, "stage": stage, "log": log}
        entry["count"] += 1
    return sorted(groups.values(), key=lambda g: (-g["count"], g["stage"] != "build", g["reason"]))


def merge(old: list[dict], new: list[dict]) -> list[dict]:
    """Add the counts of ``new`` groups into ``old`` ones (same stage and reason)."""
    out = {(g["stage"], g["reason"]): dict(g) for g in old or []}
    for g in new:
        key = (g["stage"], g["reason"])
        if key in out:
            out[key]["count"] += g["count"]
            out[key]["log"] = g.get("log") or out[key].get("log")
        else:
            out[key] = dict(g)
    return sorted(out.values(), key=lambda g: (-g["count"], g["stage"] != "build", g["reason"]))


def summary_lines(groups: list[dict], limit: int = 5) -> list[str]:
    """Text lines for a CLI: ``17 × build: InternalError: … (log: path)``."""
    if not groups:
        return []
    total = sum(g["count"] for g in groups)
    lines = [f"{total} candidate(s) failed; by reason:"]
    for g in groups[:limit]:
        lines.append(f"  {g['count']:>4} × {g['stage']}: {g['reason']}")
    if len(groups) > limit:
        rest = sum(g["count"] for g in groups[limit:])
        lines.append(f"  {rest:>4} × {len(groups) - limit} other reason(s)")
    log = next((g.get("log") for g in groups if g.get("log")), None)
    if log:
        lines.append(f"  full messages: {log}")
    return lines


def log_entry(trial: int | None, task: str | None, stage: str, message: str | None) -> str:
    """One block of ``failures.log``: a header line, then the message as MetaSchedule gave it."""
    head = f"=== trial {trial if trial is not None else '?'}" + (f" · task {task}" if task else "") + f" · {stage}"
    return f"{head}\n{(message or '').rstrip()}\n\n"


def log_path(run_dir: str | Path) -> str:
    return str(Path(run_dir) / FAILURES_LOG)
