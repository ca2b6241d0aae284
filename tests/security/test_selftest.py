"""The sandbox's self-test can tell a sandbox from none (asight_lsp/worker/selftest.py, docs/sandbox.md).

Without the sandbox, the same probes succeed (the forbidden actions are possible here, so a report of
"all refused" means something); with it, every probe is refused and the worker calls it active.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(r'''
    import json, sys, tempfile
    from asight_lsp.worker import sandbox, selftest
    if sys.argv[1] == "sandbox":
        status = sandbox.apply()
        print(json.dumps({"active": status.active, "report": status.selftest, "layers": status.layers}))
    else:
        report = selftest.run(tempfile.mkdtemp())
        print(json.dumps({"active": selftest.contained(report), "report": report}))
''')


def probe(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120,
                          cwd=tempfile.gettempdir(), env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_the_sandbox_the_probes_succeed():
    result = probe("none")
    succeeded = {name for name, outcome in result["report"].items() if outcome == "SUCCEEDED"}
    assert result["active"] is False
    # possible for any user on Linux, so the self-test's "refused" is not a default
    assert {"create_file", "open_for_write", "mkdir", "unix_bind_path", "memfd_create", "socket_unix_stream",
            "socket_inet_tcp", "socketpair_stream", "socketpair_dgram", "fork", "kill_parent", "unshare"} <= succeeded


def test_with_the_sandbox_every_probe_is_refused_and_it_is_active():
    result = probe("sandbox")
    assert result["active"] is True, result
    assert len(result["report"]) >= 30
    assert [name for name, outcome in result["report"].items() if not outcome.startswith("refused")] == []
    assert result["layers"]["limits"]["RLIMIT_FSIZE"] == 0 and result["layers"]["seccomp"].startswith("allow-list")
    assert os.listdir(result["layers"]["cwd"]) == []
    os.rmdir(result["layers"]["cwd"])
