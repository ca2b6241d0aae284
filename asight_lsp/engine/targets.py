"""Target text as users write it -> the input of ``tvm.target.Target`` (TVM-free).

Shared by the core (``jobs.check_target`` catches typos before a job starts) and the tuning job
(``worker/metaschedule.resolve_target`` builds the real Target from the same reading).
"""
from __future__ import annotations

import json
import shlex

from ..errors import AsightError


class TargetError(AsightError, ValueError):
    """The target text is not a target TVM knows (one-line message)."""


_LIST_ATTRS = {"mattr", "keys", "libs", "cl-opt", "device_libs"}


def target_config(text: str):
    """Target JSON text, a classic ``kind -key=value ...`` string, or a bare kind/tag -> Target input."""
    if text.startswith("{"):
        try:
            config = json.loads(text)
        except json.JSONDecodeError as err:
            raise TargetError(f"target JSON is not valid JSON: {err}") from None
        if not isinstance(config, dict) or "kind" not in config:
            raise TargetError('target JSON needs a "kind" (e.g. {"kind": "llvm", "mcpu": "znver3"})')
        return config
    try:
        words = shlex.split(text)
    except ValueError as err:
        raise TargetError(f"cannot read target {text!r}: {err}") from None
    kind, options = words[0], words[1:]
    if "/" in kind and not options:
        return kind                          # a tag such as nvidia/geforce-rtx-3080
    config: dict = {"kind": kind}
    for option in options:
        if not option.startswith("-"):
            raise TargetError(f"cannot read target option {option!r} in {text!r} (expected -key=value)")
        key, _, value = option.lstrip("-").partition("=")
        config[key] = _option_value(key, value) if _ else True
    return config


def _option_value(key: str, value: str):
    if key in _LIST_ATTRS:
        return [v for v in value.split(",") if v]
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        return value
