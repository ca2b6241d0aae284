"""The TVM worker's OS sandbox (asight_lsp/worker/sandbox.py, docs/sandbox.md): what the seccomp
filter denies and allows, syscall by syscall, and that the sandboxed worker still serves parsing,
features, graphs and the code view; an unloadable filter is reported, and refused on request."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

PROBE = textwrap.dedent(r'''
    import ctypes, errno, json, mmap, os, socket, subprocess, sys, threading
    early_go, early = threading.Event(), {}
    def before_the_filter():          # a thread that exists before the filter is loaded (TSYNC)
        early_go.wait()
        try:
            socket.socket(); early["socket"] = "allowed"
        except OSError as err:
            early["socket"] = errno.errorcode[err.errno]
    thread = threading.Thread(target=before_the_filter); thread.start()
    here = os.getcwd()
    victim, m = os.path.join(here, "victim"), lambda name: os.path.join(here, name)
    from asight_lsp.worker import sandbox
    status = sandbox.apply().to_dict()
    early_go.set(); thread.join()
    libc = ctypes.CDLL(None, use_errno=True)
    def raw(nr, *args):               # a raw syscall: its errno, or "ok"
        ret = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
        return "ok" if ret >= 0 else errno.errorcode[ctypes.get_errno()]
    out = {}
    def attempt(name, fn):
        try:
            fn(); out[name] = "allowed"
        except OSError as err:
            out[name] = errno.errorcode.get(err.errno, str(err.errno))
    attempt("open_w", lambda: open(m("m_open_w"), "w"))
    attempt("open_a", lambda: open(victim, "a"))
    attempt("open_rplus", lambda: open(victim, "r+"))
    attempt("open_x", lambda: open(m("m_open_x"), "x"))
    attempt("os_open_creat", lambda: os.open(m("m_creat"), os.O_CREAT | os.O_RDONLY))
    attempt("os_open_trunc", lambda: os.open(victim, os.O_TRUNC | os.O_RDONLY))
    attempt("mkdir", lambda: os.mkdir(m("m_dir")))
    attempt("rename", lambda: os.rename(victim, m("m_renamed")))
    attempt("unlink", lambda: os.unlink(victim))
    attempt("symlink", lambda: os.symlink(victim, m("m_link")))
    attempt("link", lambda: os.link(victim, m("m_hardlink")))
    attempt("chmod", lambda: os.chmod(victim, 0o777))
    attempt("truncate", lambda: os.truncate(victim, 0))
    attempt("utime", lambda: os.utime(victim, (0, 0)))
    attempt("socket", lambda: socket.socket())
    attempt("fork", lambda: os.fork())
    attempt("subprocess", lambda: subprocess.run(["true"]))
    attempt("posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
    attempt("kill_parent", lambda: os.kill(os.getppid(), 0))
    out["system"] = os.system("touch " + m("m_system"))          # glibc answers 127<<8 when it cannot spawn
    out["clone3"] = raw(435, 0, 0)
    out["openat2"] = raw(437, -100, 0, 0, 0)
    out["io_uring_setup"] = raw(425, 1, 0)
    out["execve"] = raw(59, 0, 0, 0)
    # what must keep working
    attempt("read", lambda: open(victim).read())
    attempt("kill_self", lambda: os.kill(os.getpid(), 0))
    attempt("thread", lambda: [t.start() or t.join() for t in [threading.Thread(target=lambda: None)]])
    attempt("mmap_exec", lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC))
    attempt("pipe_write", lambda: os.write(2, b"stderr still works\n"))
    print(json.dumps({"status": status, "early": early, "out": out}))
''')

DENIED = ["open_w", "open_a", "open_rplus", "open_x", "os_open_creat", "os_open_trunc", "mkdir", "rename", "unlink",
          "symlink", "link", "chmod", "truncate", "utime", "socket", "fork", "subprocess", "posix_spawn",
          "kill_parent"]
ALLOWED = ["read", "kill_self", "thread", "mmap_exec", "pipe_write"]


def snapshot(folder: Path) -> dict:
    """Every entry of a folder with its size, mode and content (what a payload could have changed)."""
    return {p.name: (p.lstat().st_mode, p.read_bytes() if p.is_file() and not p.is_symlink() else None)
            for p in sorted(folder.iterdir())}


def test_the_filter_denies_processes_sockets_and_file_changes_and_keeps_the_rest(tmp_path):
    (tmp_path / "victim").write_text("keep me")
    before = snapshot(tmp_path)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["status"]["active"] is True, report["status"]
    out = report["out"]
    assert {name: out[name] for name in DENIED} == {name: "EPERM" for name in DENIED}
    assert out["system"] == 127 << 8
    assert (out["clone3"], out["openat2"]) == ("ENOSYS", "ENOSYS")    # glibc falls back to clone / openat
    assert (out["io_uring_setup"], out["execve"]) == ("EPERM", "EPERM")
    assert report["early"] == {"socket": "EPERM"}                     # threads started before the filter too
    assert {name: out[name] for name in ALLOWED} == {name: "allowed" for name in ALLOWED}
    assert "stderr still works" in proc.stderr
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- the worker


@pytest.mark.tvm
def test_the_worker_reports_its_sandbox_and_an_unsandboxed_one_is_explicit():
    from asight_lsp.engine.client import WorkerClient, sandbox_warning
    with WorkerClient() as client:
        ping = client.request("ping")
        assert ping["sandbox"]["active"] is True and client.sandbox == ping["sandbox"]
        assert sandbox_warning(client.sandbox) is None
    with WorkerClient(sandbox=False) as client:
        ping = client.request("ping")
        assert ping["sandbox"] == client.sandbox
        assert client.sandbox["active"] is False and client.sandbox["requested"] is False
        assert sandbox_warning(client.sandbox) is None    # asked for: no warning


@pytest.fixture()
def no_libseccomp(tmp_path, monkeypatch):
    """Workers started in this test behave as on a machine without libseccomp (``sandbox.SIMULATE_ENV``;
    a stub pyseccomp on PYTHONPATH no longer reaches the worker, which runs isolated)."""
    monkeypatch.setenv("ASIGHT_SANDBOX_UNAVAILABLE", "cannot load libseccomp (Unable to find libseccomp)")


@pytest.mark.tvm
def test_without_a_sandbox_the_worker_parses_nothing_and_check_says_why(no_libseccomp):
    """Where the sandbox cannot be set up, TVM evaluates nothing: every request but ``ping`` is refused,
    ``asight check`` reports the static result, one warning on stderr and one warning diagnostic."""
    from asight_lsp.engine import wire
    from asight_lsp.engine.client import WorkerClient, sandbox_warning
    from asight_lsp.errors import WorkerError
    from asight_lsp.tvmscript.outline import build_outline
    text = (FIXTURES / "matmul.py").read_text()
    outline = build_outline(text, "matmul.py")
    with WorkerClient() as client:
        with pytest.raises(WorkerError, match="sandbox is not active") as refused:
            client.request(wire.CHECK, wire.check_params(text, outline, outline.units))
        assert refused.value.error_type == "SandboxUnavailable"
        ping = client.request("ping")["sandbox"]                       # it still answers
        assert ping["active"] is False and "Unable to find libseccomp" in ping["reason"]
        assert "without its OS sandbox" in sandbox_warning(client.sandbox)
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "check", str(FIXTURES / "matmul.py")],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "OS sandbox" in line]
    assert len(warnings) == 1 and "Unable to find libseccomp" in warnings[0]
    assert "warning: TVM does not evaluate this file: the worker's OS sandbox is not active" in proc.stdout


@pytest.mark.tvm
def test_the_sandboxed_worker_serves_graphs_and_features(worker, tmp_path):
    from asight_lsp.engine import wire
    from asight_lsp.tvmscript.outline import build_outline
    assert worker.request("ping")["sandbox"]["active"] is True
    text = (FIXTURES / "matmul_bias_relu.py").read_text()
    outline = build_outline(text, "matmul_bias_relu.py")
    unit = outline.units[0]
    params = wire.source_params(text, outline, unit)
    graph = worker.request(wire.BLOCK_GRAPH, {**params, "run_dir": str(FIXTURES / "runs" / "mbr128")}, timeout=300)
    assert graph["source"]["nodes"] and graph["transformed"] and "error" not in graph["transformed"][0]
    features = worker.request(wire.FEATURES, {**params, "run_dir": str(FIXTURES / "runs" / "mbr128"), "trials": [0, 1, 2, 3]},
                              timeout=300)
    assert sorted(features["records"]) == [0, 1, 2, 3]
    assert all(entry.get("error") is None and entry["n_rows"] > 0 for entry in features["records"].values())
    relax_text = (FIXTURES / "relax_cnn.py").read_text()
    relax_outline = build_outline(relax_text, "relax_cnn.py")
    relax_params = wire.source_params(relax_text, relax_outline, relax_outline.units[0])
    relax = worker.request(wire.RELAX_GRAPH, relax_params, timeout=300)
    assert relax["source"]["nodes"] and relax["transformed"]["nodes"]


@pytest.mark.tvm
def test_cachegrind_in_the_sandboxed_worker_says_where_it_runs(worker):
    """The sandboxed worker does not try valgrind (a process, files); ``services/profiling`` sends
    ``--cachegrind`` to an unsandboxed worker (tests/worker/test_profile_tir.py runs that path)."""
    from asight_lsp.engine import wire
    from asight_lsp.services.profiling import ProfileOptions
    from asight_lsp.tvmscript.outline import build_outline
    text = (FIXTURES / "matmul64.py").read_text()
    outline = build_outline(text, "matmul64.py")
    options = ProfileOptions(budget_s=0.1, budget_ms=20.0, stages=False, features=False, cachegrind=True, check=False)
    raw = worker.request(wire.PROFILE, {**wire.source_params(text, outline, outline.units[0]), **options.worker_params(),
                                        "run_dir": None, "target": None, "timing": False, "chosen": None,
                                        "choose": False}, timeout=300)
    skipped = raw["kernels"][0]["cachegrind"]["baseline"]["skipped"]
    assert "without the OS sandbox" in skipped


@pytest.mark.tvm
def test_a_sandboxed_workers_private_folder_goes_with_it(tmp_path, monkeypatch):
    """The sandboxed worker cannot remove its own folder: its client does, when it closes, when it
    restarts a dead worker, and when the process that started it exits (the tuning job's parse worker
    left one folder in /tmp per run)."""
    import signal
    import tempfile
    from asight_lsp.engine.client import WorkerClient
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    script = "from asight_lsp.worker import parse; print(parse.sandboxed_worker().request('ping')['sandbox']['active'])"
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "True", done.stderr[-2000:]
    assert not list(tmp_path.glob("asight-worker-*"))           # the exiting process closed its worker
    with WorkerClient() as client:
        client.request("ping")
        first = client.sandbox["layers"]["cwd"]
        assert os.path.dirname(first) == str(tmp_path)
        os.kill(client.pid, signal.SIGKILL)
        client._proc.wait(timeout=10)
        client.request("ping")                                  # restarted: the dead one's folder is gone
        assert not os.path.exists(first) and os.path.exists(client.sandbox["layers"]["cwd"])
    assert not list(tmp_path.glob("asight-worker-*"))
