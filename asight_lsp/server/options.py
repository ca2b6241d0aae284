"""Server options: a defaulted dataclass filled from the command line, ``initializationOptions``
and ``workspace/didChangeConfiguration`` (section ``asight``), in that order of precedence."""
from __future__ import annotations

import json

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .. import protocol as P
from ..errors import AsightError

_KEYS = {  # protocol key -> dataclass field
    P.OPT_TRUSTED: "trusted", P.OPT_STORE_ROOT: "store_root", P.OPT_WORKER_PYTHON: "worker_python",
    P.OPT_TARGET: "target", P.OPT_TRIALS: "trials", P.OPT_DISABLED_FEATURES: "disabled_features",
    P.OPT_DIAGNOSTICS_DELAY_MS: "diagnostics_delay_ms", P.OPT_COUNTERS_BUDGET: "counters_budget_s",
    P.OPT_TUNE_MINUTES: "tune_minutes",
}


@dataclass
class ServerOptions:
    trusted: bool = False                # tune/profile/export only once the client says the workspace is
    #                                      trusted (initializationOptions.trusted) or `asight serve --trusted`
    trust_locked: bool = False           # `asight serve --untrusted`: no client can turn trust on
    cli_worker_python: str | None = None  # `asight serve --worker-python`: the user's own choice, always used
    network: bool = False                # --tcp / --ws: any local program (a web page) may be the client, so
    #                                      neither trust nor workerPython is taken from it (--trusted only)
    store_root: str | None = None        # .asight directory; None = <workspace root>/.asight
    worker_python: str | None = None     # interpreter of the TVM worker and the tuning jobs
    target: str | None = None            # default tuning target; None = host CPU
    trials: int = 64                     # default trial budget of asight.tune
    disabled_features: list[str] = field(default_factory=list)  # names from protocol.FEATURES
    diagnostics_delay_ms: int = 300      # TVM diagnostics wait this long after the last keystroke
    poll_interval_s: float = 0.25        # how often a running job's events are read
    counters_budget_s: float | None = None  # GPU: Nsight Compute counters after tuning (None: not collected)
    tune_minutes: float | None = None    # time budget of asight.tune; it replaces the trial setting (None: off)

    def worker_interpreter(self) -> str | None:
        """The interpreter the server starts workers with: the command line's, else the client's
        ``workerPython`` only in a trusted workspace (it is an executable the server runs: a workspace
        setting must not pick it, as VS Code's restrictedConfigurations also say), else ours."""
        return self.cli_worker_python or (self.worker_python if self.trusted and not self.network else None)

    def enabled(self, feature: str) -> bool:
        return feature not in self.disabled_features

    def updated(self, values: dict | None, trust: bool = True) -> "ServerOptions":
        """A copy with the protocol keys of ``values`` applied; unknown keys and bad types ignored;
        ``trusted`` only when ``trust`` (initializationOptions; not workspace/didChangeConfiguration,
        whose settings a client may forward from the project itself)."""
        if not isinstance(values, dict):
            return self
        changes: dict[str, Any] = {}
        for key, value in values.items():
            name = _KEYS.get(key)
            if name is None or value is None and name in ("trusted", "trials", "diagnostics_delay_ms"):
                continue
            if name == "trusted" and (self.trust_locked or not trust or self.network):
                continue
            changes[name] = _coerce(name, value, getattr(self, name))
        return dataclasses.replace(self, **{k: v for k, v in changes.items() if v is not _BAD})


_BAD = object()


def _budget(value: Any) -> Any:
    """Seconds for counters: a positive number, or None (0, null: off); anything else (checked as
    ``services/counters.budget_seconds`` checks the command's ``countersBudget``) ignored."""
    from ..services.counters import budget_seconds
    if value is None:
        return None
    try:
        return budget_seconds(value, "countersBudgetSeconds") or None
    except AsightError:
        return _BAD


def _minutes(value: Any) -> Any:
    """A time budget in minutes, or None (0, null: off); anything ``--minutes`` refuses is ignored."""
    from ..analysis.budget import minutes_problem
    if value is None or value == 0:
        return None
    return _BAD if minutes_problem(value) else float(value)


def _coerce(name: str, value: Any, current: Any) -> Any:
    if name == "trusted":
        return value if isinstance(value, bool) else _BAD
    if name in ("trials", "diagnostics_delay_ms"):
        return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else _BAD
    if name == "disabled_features":
        return [str(v) for v in value] if isinstance(value, list) else _BAD
    if name == "counters_budget_s":
        return _budget(value)
    if name == "tune_minutes":
        return _minutes(value)
    if name == "target":
        return target_text(value, _BAD)
    return str(value) if value is not None else None


def target_text(value: Any, bad: Any) -> Any:
    """A target as the tuning service reads it: text as given, a Target JSON object as JSON text (the
    settings may hold an object: passed on as is, it would be "not valid JSON" to the settings check
    and an internal error in the Tune command); ``bad`` for anything else."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value) if isinstance(value, dict) else bad
