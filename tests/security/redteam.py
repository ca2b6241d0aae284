"""The red team's harness (tests/security/test_red_team.py runs it as root and as an ordinary user).

``python redteam.py PATH WORKDIR``: sets up the things a hostile file would attack — a decoy file
whose content must not change, a sentinel process that must stay alive and untraced, a TCP and a
UDP listener, Unix stream, datagram and abstract sockets that record every connection or datagram,
the machine's mount table — then sends hostile text to the product by PATH and prints, as one JSON
line, what the payloads reported from inside and every side effect found outside.

PATH ``worker``: straight to the sandboxed worker's parse (``WorkerClient.request("check")``: the
static gate bypassed; the sandbox alone must hold).  ``cli``: ``asight check FILE`` (the console
script, cwd = the workspace; gate on).  ``lsp``: ``asight serve --stdio`` as the VS Code extension
starts it, ``didOpen`` + symbols, lenses and hovers (gate on).  The texts are ``PAYLOAD`` (every
forbidden action, in one expression TVM evaluates), the same in the shape of issue 22's class 1 (a
unit hidden from the gate behind a form feed) and every file of ``fixtures/hostile/``.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
HOSTILE = ROOT / "fixtures" / "hostile"
MARKER = "ASIGHT_PWNED"

# runs inside TVM's parser; every action is tried, the outcome of each goes into R, and R comes back
# as the message of the exception that ends the evaluation (a parse problem of the unit)
ACTIONS = r'''
import ctypes, errno, json, os, signal, socket
R, libc = dict(), ctypes.CDLL(None, use_errno=True)
def t(name, fn):
    try:
        fn(); R[name] = "SUCCEEDED"
    except BaseException as e:
        R[name] = "refused " + errno.errorcode.get(getattr(e, "errno", None) or 0, type(e).__name__)
def raw(nr, *a):
    def call():
        args = [ctypes.c_char_p(x) if isinstance(x, bytes) else ctypes.c_long(x) for x in a]
        if libc.syscall(ctypes.c_long(nr), *args) < 0:
            raise OSError(ctypes.get_errno(), "")
    return call
D, V, P = {markdir!r}, {victim!r}, {sentinel}
t("file_create_abs", lambda: open(D + "/{marker}", "w").write("x"))
t("file_create_cwd", lambda: open("{marker}", "w").write("x"))
t("file_create_tmp", lambda: open("/tmp/{marker}_{token}", "w").write("x"))
t("file_append_victim", lambda: open(V, "a").write("x"))
t("file_rw_victim", lambda: open(V, "r+").write("x"))
t("file_truncate_victim", lambda: os.truncate(V, 0))
t("file_rename_victim", lambda: os.rename(V, V + ".moved"))
t("file_unlink_victim", lambda: os.unlink(V))
t("file_chmod_victim", lambda: os.chmod(V, 0o777))
t("file_symlink", lambda: os.symlink(V, D + "/{marker}.link"))
t("file_mkfifo", lambda: os.mkfifo(D + "/{marker}.fifo"))
t("file_proc_self_mem", lambda: open("/proc/self/mem", "r+b"))
t("file_memfd", lambda: os.memfd_create("x"))
def steal():
    fd = os.open("/proc/%d/fd/0" % P, os.O_RDONLY | os.O_NONBLOCK)
    if b"SECRET" not in os.read(fd, 100): raise OSError(errno.ENODATA, "")
t("proc_fd_of_another_process", steal)
t("proc_environ_of_another_process", lambda: open("/proc/%d/environ" % P, "rb").read())
import fcntl
t("file_lock_victim", lambda: fcntl.fcntl(os.open(V, os.O_RDONLY), fcntl.F_SETLK, b"\0" * 32))
t("file_lease_victim", lambda: fcntl.fcntl(os.open(V, os.O_RDONLY), fcntl.F_SETLEASE, fcntl.F_RDLCK))
for fam, kind, nm in [(1, 1, "unix_stream"), (1, 2, "unix_dgram"), (2, 1, "inet_tcp"), (2, 2, "inet_udp"),
                      (10, 1, "inet6_tcp"), (16, 3, "netlink"), (17, 3, "packet"), (40, 1, "vsock"), (38, 5, "alg")]:
    t("socket_" + nm, lambda: socket.socket(fam, kind))
t("net_tcp_connect", lambda: socket.create_connection(("127.0.0.1", {tcp}), timeout=2).sendall(b"pwned"))
t("net_udp_send", lambda: socket.socket(2, 2).sendto(b"pwned", ("127.0.0.1", {udp})))
t("unix_stream_connect", lambda: socket.socket(1, 1).connect({ustream!r}))
t("unix_dgram_send", lambda: socket.socket(1, 2).sendto(b"pwned", {udgram!r}))
t("unix_abstract_connect", lambda: socket.socket(1, 1).connect("\0" + {abstract!r}))
t("socketpair_bind_path", lambda: socket.socketpair(1, 2)[0].bind(D + "/{marker}.sock"))
t("socketpair_dgram_connect", lambda: socket.socketpair(1, 2)[0].connect({udgram!r}) or 0)
def socketpair_send():
    a, _ = socket.socketpair(1, 2); a.sendto(b"pwned", {udgram!r})
t("socketpair_dgram_sendto", socketpair_send)
def fork():
    if os.fork() == 0:
        open(D + "/{marker}.fork", "w").write("x"); os._exit(0)
t("proc_fork", fork)
t("proc_system", lambda: os.system("touch " + D + "/{marker}.system") and (_ for _ in ()).throw(OSError(1, "")))
t("proc_posix_spawn", lambda: os.posix_spawn("/usr/bin/touch", ["touch", D + "/{marker}.spawn"], {{}}))
t("proc_clone_raw", raw({nr[clone]}, 17, 0, 0, 0, 0))
t("sig_kill", lambda: os.kill(P, signal.SIGKILL))
t("sig_tkill", raw({nr[tkill]}, P, 9))
t("sig_tgkill", raw({nr[tgkill]}, P, P, 9))
t("sig_pidfd", lambda: signal.pidfd_send_signal(os.pidfd_open(P), signal.SIGKILL))
t("ptrace_attach", raw({nr[ptrace]}, 16, P, 0, 0))
t("ptrace_vm_readv", raw({nr[process_vm_readv]}, P, 0, 0, 0, 0, 0))
t("mount_tmpfs", raw({nr[mount]}, b"none", D.encode() + b"/mnt", b"tmpfs", 0, 0))
def bind_over_victim():
    fd = libc.syscall({nr[open_tree]}, -100, (D + "/replacement").encode(), 1 | 0x80000)
    if fd < 0: raise OSError(ctypes.get_errno(), "")
    if libc.syscall({nr[move_mount]}, fd, b"", -100, V.encode(), 4) < 0: raise OSError(ctypes.get_errno(), "")
t("mount_open_tree_move_mount", bind_over_victim)
t("mount_fsopen", raw({nr[fsopen]}, b"tmpfs", 0))
t("ns_unshare_user_mount", raw({nr[unshare]}, 0x10000000 | 0x00020000))
t("kernel_io_uring", raw({nr[io_uring_setup]}, 1, 0))
t("kernel_bpf", raw({nr[bpf]}, 0, 0, 0))
def tiocsti():
    fd = os.open("/dev/tty", os.O_RDONLY); import fcntl; fcntl.ioctl(fd, 0x5412, b"x")
t("tty_tiocsti", tiocsti)
t("proc_execv", lambda: os.execv("/usr/bin/touch", ["touch", D + "/{marker}.exec"]))
raise RuntimeError("REDTEAM" + json.dumps(R))
'''
NR = {"x86_64": {"clone": 56, "tkill": 200, "tgkill": 234, "ptrace": 101, "process_vm_readv": 310, "mount": 165,
                 "open_tree": 428, "move_mount": 429, "fsopen": 430, "unshare": 272, "io_uring_setup": 425,
                 "bpf": 321},
      "aarch64": {"clone": 220, "tkill": 130, "tgkill": 131, "ptrace": 117, "process_vm_readv": 270, "mount": 40,
                  "open_tree": 428, "move_mount": 429, "fsopen": 430, "unshare": 97, "io_uring_setup": 425,
                  "bpf": 280}}
TIR = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def evil(A: T.Buffer((8,), "float32")):
    for i in range((exec({src!r}, {{}}), 8)[1]):
        with T.sblock("b"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32(0)
'''
# issue 22, class 1: a form feed ends the comment's line for str.splitlines() but not for Python
HIDDEN = '''from tvm.script import tirx as T

# page break\x0c@T.prim_func(s_tir=True)
def evil(A: T.Buffer((8,), "float32")):
    for i in range((exec({src!r}, {{}}), 8)[1]):
        with T.sblock("b"):
            vi = T.axis.spatial(8, i)
            A[vi] = T.float32(0)
'''


class Harness:
    """The targets and the listeners; ``evidence()`` says what changed."""

    def __init__(self, work: Path):
        import platform
        self.work, self.token = work, f"{os.getpid()}_{os.urandom(4).hex()}"
        self.tmp_before = set(Path("/tmp").glob(f"{MARKER}*"))
        self.markdir = work / "ws"
        self.markdir.mkdir(parents=True, exist_ok=True)
        (self.markdir / "mnt").mkdir(exist_ok=True)
        self.victim = self.markdir / "victim.txt"
        self.victim.write_text("original content\n")
        (self.markdir / "replacement").write_text("REPLACED\n")
        self.hits: list[str] = []
        self.sentinel = subprocess.Popen(["sleep", "600"], stdin=subprocess.PIPE)
        self.sentinel.stdin.write(b"SECRET-IN-A-PIPE")        # what /proc/<pid>/fd/0 would hand out
        self.sentinel.stdin.flush()
        self.mounts = Path("/proc/self/mountinfo").read_text()
        self.nr = NR[platform.machine()]
        self._listen()

    def _listen(self) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.ustream_path, self.udgram_path = str(self.work / "listen.sock"), str(self.work / "listen.dgram")
        self.ustream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ustream.bind(self.ustream_path)
        self.ustream.listen()
        self.udgram = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.udgram.bind(self.udgram_path)
        self.abstract_name = f"asight-redteam-{self.token}"
        self.abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen()
        for name, sock in (("tcp", self.tcp), ("unix_stream", self.ustream), ("abstract", self.abstract)):
            threading.Thread(target=self._accept, args=(name, sock), daemon=True).start()
        for name, sock in (("udp", self.udp), ("unix_dgram", self.udgram)):
            threading.Thread(target=self._receive, args=(name, sock), daemon=True).start()

    def _accept(self, name: str, sock: socket.socket) -> None:
        while True:
            try:
                sock.accept()
            except OSError:
                return
            self.hits.append(f"{name} connection")

    def _receive(self, name: str, sock: socket.socket) -> None:
        while True:
            try:
                sock.recv(100)
            except OSError:
                return
            self.hits.append(f"{name} datagram")

    def payload(self) -> str:
        return ACTIONS.format(markdir=str(self.markdir), victim=str(self.victim), sentinel=self.sentinel.pid,
                              marker=MARKER, token=self.token, tcp=self.tcp.getsockname()[1],
                              udp=self.udp.getsockname()[1], ustream=self.ustream_path, udgram=self.udgram_path,
                              abstract=self.abstract_name, nr=self.nr)

    def texts(self) -> dict[str, str]:
        src = self.payload()
        texts = {"clean": (ROOT / "fixtures" / "matmul.py").read_text(), "payload": TIR.format(src=src),
                 "payload_hidden_by_form_feed": HIDDEN.format(src=src)}
        texts.update({f"hostile/{p.name}": p.read_text() for p in sorted(HOSTILE.glob("*.py"))})
        return texts

    def evidence(self, extra_dirs: list[str]) -> list[str]:
        time.sleep(0.3)    # let the listeners see a late connection
        found = list(self.hits)
        expected = {"victim.txt", "replacement", "mnt"}
        found += [f"new entry in the workspace: {p.name}" for p in self.markdir.iterdir()
                  if p.name not in expected and not p.name.endswith(".py") and p.name != ".asight"]
        found += [f"marker: {p}" for d in ["/tmp", *extra_dirs] if os.path.isdir(d)
                  for p in Path(d).glob(f"{MARKER}*") if p not in self.tmp_before]
        found += [f"marker in the workspace: {p}" for p in self.markdir.rglob(f"{MARKER}*")]
        if not self.victim.exists() or self.victim.read_text() != "original content\n":
            found.append("the victim file changed")
        elif self.victim.stat().st_mode & 0o777 == 0o777:
            found.append("the victim file's mode changed")
        if any((self.markdir / "mnt").iterdir()) or Path("/proc/self/mountinfo").read_text() != self.mounts:
            found.append("the mount table changed")
        if self.sentinel.poll() is not None:
            found.append(f"the sentinel process died ({self.sentinel.returncode})")
        else:
            status = Path(f"/proc/{self.sentinel.pid}/status").read_text()
            tracer = next(line.split()[1] for line in status.splitlines() if line.startswith("TracerPid"))
            state = next(line.split()[1] for line in status.splitlines() if line.startswith("State"))
            if tracer != "0" or state in ("T", "t"):
                found.append(f"the sentinel is stopped or traced (state {state}, tracer {tracer})")
        return found

    def close(self) -> None:
        self.sentinel.stdin.close()
        for stray in Path("/tmp").glob(f"{MARKER}_{self.token}*"):   # the control's, or a failed run's
            stray.unlink()
        self.sentinel.kill()
        for sock in (self.tcp, self.udp, self.ustream, self.udgram, self.abstract):
            sock.close()


def reports_from(messages: list[str]) -> dict:
    """The payload's own report, from the parse problem that carries it."""
    for message in messages:
        if "REDTEAM" in message:
            return json.JSONDecoder().raw_decode(message.split("REDTEAM", 1)[1])[0]
    return {}


def via_worker(texts: dict[str, str]) -> tuple[dict, list[str], dict]:
    """The gate bypassed: each text straight to the sandboxed worker's parse (what TVM would evaluate)."""
    from asight_lsp.engine import wire
    from asight_lsp.engine.client import WorkerClient
    from asight_lsp.tvmscript.outline import build_outline
    reports, cwds = {}, []
    with WorkerClient() as client:
        for name, text in texts.items():
            outline = build_outline(text, "evil.py")
            units = outline.units or []
            reply = client.request(wire.CHECK, wire.check_params(text, outline, units), timeout=300) if units else {}
            reports[name] = reports_from([p.get("message", "") for p in reply.get("problems", [])])
        sandbox = client.sandbox or {}
        cwds.append((sandbox.get("layers") or {}).get("cwd") or "")
        pid = client.pid
        leaked = sorted(os.listdir(cwds[0])) if cwds[0] and os.path.isdir(cwds[0]) else []
        alive = client.request("ping")["pid"] == pid
    return reports, [c for c in cwds if c], {"sandbox": sandbox, "private_cwd_entries": leaked,
                                               "same_worker_after_all": alive}


CONSOLE_SCRIPT = ("import re, sys\nfrom asight_lsp.cli import main\nif __name__ == '__main__':\n"
                  "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n    sys.exit(main())\n")


def via_cli(harness: Harness, texts: dict[str, str]) -> dict:
    script = harness.work / "bin" / "asight"
    script.parent.mkdir(exist_ok=True)
    script.write_text(CONSOLE_SCRIPT)
    paths = []
    for i, text in enumerate(texts.values()):
        paths.append(harness.markdir / f"h{i}.py")
        paths[-1].write_text(text)

    def check(path: Path) -> int:
        return subprocess.run([sys.executable, str(script), "check", path.name], cwd=harness.markdir,
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "ASIGHT_HOME": str(harness.work / "store")}).returncode

    # a process each, four at a time (as tests/worker/test_gate.py does): one by one took ~40 s per user
    with ThreadPoolExecutor(max_workers=4) as pool:
        return {"exit_codes": dict(zip((p.name for p in paths), pool.map(check, paths)))}


def via_lsp(harness: Harness, texts: dict[str, str]) -> dict:
    from tests.security.lsp_wire import StdioClient
    with StdioClient([sys.executable, "-I", "-m", "asight_lsp", "serve", "--stdio"], cwd=harness.markdir,
                     env={**os.environ, "ASIGHT_HOME": str(harness.work / "store")}) as client:
        seen = {}
        client.initialize(harness.markdir)
        for i, (name, text) in enumerate(texts.items()):
            path = harness.markdir / f"l{i}.py"
            path.write_text(text)
            diagnostics = client.open_and_query(path, text)
            seen[name] = [d.get("message", "")[:200] for d in diagnostics]
        status = client.request("asight/status", {})
        deadline = time.monotonic() + 240
        while not (status or {}).get("workerSandbox") and time.monotonic() < deadline:   # TVM's pass comes later
            time.sleep(0.5)
            status = client.request("asight/status", {})
        time.sleep(2.0)
    return {"workerSandbox": (status or {}).get("workerSandbox"), "diagnostics": seen}


RAW = r"""
import importlib.util, json, sys
sandbox_file = sys.argv[1]
texts = json.loads(sys.stdin.read())
import tvm
from tvm.script import tirx  # noqa: F401  (imports done before the sandbox, as in the worker)
if sandbox_file == "package":
    from asight_lsp.worker import sandbox
elif sandbox_file != "none":
    spec = importlib.util.spec_from_file_location("old_sandbox", sandbox_file)
    sandbox = sys.modules["old_sandbox"] = importlib.util.module_from_spec(spec); spec.loader.exec_module(sandbox)
status = sandbox.apply().to_dict() if sandbox_file != "none" else {"active": False}
out = {}
for name, text in texts.items():
    try:
        lines = ["" if line.startswith(("from ", "import ")) else line for line in text.splitlines()]
        tvm.script.from_source("\n".join(lines))
        out[name] = ""
    except BaseException as err:
        out[name] = str(err)
print(json.dumps({"status": status, "messages": out}))
"""


def via_raw(texts: dict[str, str], sandbox_file: str) -> dict:
    """TVM's own parser, no gate, after applying a sandbox module (``none``: no sandbox; ``package``: ours;
    a file: e.g. the deny-list of an earlier version) -- the "before" of the report."""
    with tempfile.TemporaryDirectory(prefix="asight-raw-") as cwd:     # where a payload's files land
        done = subprocess.run([sys.executable, "-c", RAW, sandbox_file], input=json.dumps(texts), capture_output=True,
                              text=True, timeout=600, cwd=cwd)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    data = json.loads(last) if last.startswith("{") else {"error": done.stderr[-2000:]}
    messages = data.pop("messages", {})
    data["reports"] = {name: reports_from([msg]) for name, msg in messages.items()}
    data["unreported"] = {name: msg[-600:] for name, msg in messages.items() if not data["reports"][name]}
    return data


def main() -> int:
    path, work = sys.argv[1], Path(sys.argv[2])
    harness = Harness(work)
    try:
        texts = harness.texts()
        result: dict = {"path": path, "uid": os.getuid(), "sentinel": harness.sentinel.pid}
        if path == "worker":
            result["reports"], cwds, result["worker"] = via_worker(texts)
        elif path == "cli":
            result["cli"], cwds = via_cli(harness, texts), []
        elif path == "lsp":
            result["lsp"], cwds = via_lsp(harness, texts), []
        else:      # raw:<sandbox file | package | none>
            result["raw"], cwds = via_raw({k: v for k, v in texts.items() if k.startswith("payload")},
                                          path.split(":", 1)[1]), []
        result["evidence"] = harness.evidence(cwds)
    finally:
        harness.close()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
