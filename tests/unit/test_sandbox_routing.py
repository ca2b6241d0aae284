"""Which worker a request goes to (docs/sandbox.md): everything to the sandboxed one, a cachegrind
or GPU profile to an unsandboxed one started for it; and what the user is told when the sandbox is missing."""
from __future__ import annotations

import contextlib

from asight_lsp.engine import wire
from asight_lsp.engine.client import WorkerClient, sandbox_warning
from asight_lsp.services import profiling
from asight_lsp.services.profiling import ProfileOptions


class FakeWorker:
    def __init__(self, name: str, sandboxed: bool = True):
        self.name, self.sandboxed, self.python, self.default_timeout = name, sandboxed, "py", 7.0
        self.calls = []

    def request(self, method, params=None, timeout=None, on_event=None):
        self.calls.append(method)
        return {"from": self.name}


def test_only_cachegrind_goes_to_an_unsandboxed_worker(monkeypatch):
    started = []

    @contextlib.contextmanager
    def trusted(python=None, default_timeout=120.0):
        worker = FakeWorker("trusted", sandboxed=False)
        started.append((python, default_timeout, worker))
        yield worker

    monkeypatch.setattr(profiling, "trusted", trusted)
    sandboxed = FakeWorker("sandboxed")
    assert profiling._measure(sandboxed, {}, ProfileOptions()) == {"from": "sandboxed"}
    assert started == []
    assert profiling._measure(sandboxed, {}, ProfileOptions(cachegrind=True)) == {"from": "trusted"}
    assert sandboxed.calls == [wire.PROFILE]          # the first call only
    (python, timeout, worker), = started
    assert (python, timeout, worker.calls) == ("py", 7.0, [wire.PROFILE])


def test_a_gpu_profile_goes_to_an_unsandboxed_worker(monkeypatch):
    """The GPU driver's device files (opened read-write) and ioctls are refused in the sandbox."""
    started = []

    @contextlib.contextmanager
    def trusted(python=None, default_timeout=120.0):
        started.append(python)
        yield FakeWorker("trusted", sandboxed=False)

    monkeypatch.setattr(profiling, "trusted", trusted)
    sandboxed = FakeWorker("sandboxed")
    for target in ({"kind": "cuda", "arch": "sm_90"}, "nvidia/nvidia-h100", "gpu", "cuda"):
        assert profiling._measure(sandboxed, {"target": target}, ProfileOptions()) == {"from": "trusted"}
    for target in ({"kind": "llvm"}, "llvm -mcpu=znver3", None):
        assert profiling._measure(sandboxed, {"target": target}, ProfileOptions()) == {"from": "sandboxed"}
    assert len(started) == 4 and sandboxed.calls == [wire.PROFILE] * 3


def test_the_unsandboxed_worker_is_asked_for_on_its_command_line(monkeypatch):
    from asight_lsp.engine import client as client_module
    argvs = []

    def popen(argv, **kwargs):
        argvs.append(argv[1:])
        raise OSError("not started in a unit test")

    monkeypatch.setattr(client_module.subprocess, "Popen", popen)
    for sandbox in (True, False):
        with contextlib.suppress(OSError):
            WorkerClient(sandbox=sandbox).request(wire.PING)
    assert [argv[0] for argv in argvs] == ["-I", "-I"]                   # isolated: no cwd, no PYTHON* variables
    assert [argv[4:] for argv in argvs] == [["asight_lsp.worker"], ["asight_lsp.worker", "--unsandboxed"]]


def test_a_missing_sandbox_is_a_warning_unless_it_was_asked_for():
    assert sandbox_warning(None) is None
    assert sandbox_warning({"active": True, "requested": True}) is None
    assert sandbox_warning({"active": False, "requested": False, "reason": "--unsandboxed"}) is None
    line = sandbox_warning({"active": False, "requested": True, "reason": "cannot load libseccomp (x)"})
    assert "without its OS sandbox: cannot load libseccomp (x)" in line and "checked statically only" in line
    assert "\n" not in line


def test_an_exported_library_is_loaded_in_the_sandbox_on_the_cpu_only(monkeypatch):
    """services/export.library_worker: the output check and the timing of a written library run in a
    sandboxed worker, except on a GPU (the driver needs what the sandbox refuses)."""
    from asight_lsp.services import export
    started = []
    monkeypatch.setattr(export, "trusted", lambda python, timeout: started.append("trusted") or "unsandboxed")
    monkeypatch.setattr(export, "WorkerClient", lambda python, timeout: started.append("sandboxed") or "sandboxed")
    for target in ({"kind": "llvm"}, "llvm -mcpu=znver4", None):
        assert export.library_worker(target, "py") == "sandboxed"
    for target in ({"kind": "cuda", "arch": "sm_90"}, "nvidia/nvidia-h100", "cuda"):
        assert export.library_worker(target, "py") == "unsandboxed"
    assert started == ["sandboxed"] * 3 + ["trusted"] * 3
