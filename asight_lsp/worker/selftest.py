"""The sandbox's self-test: the sandboxed worker tries forbidden actions and reports what happened.

Run inside the worker right after the sandbox is set up, before any user text is read.  Each probe
is harmless if it succeeds (``kill(parent, 0)`` delivers nothing, a forked child exits at once, a
created file is removed, ``execve``/``mount`` aim at paths that do not exist), so the self-test can
run where the sandbox is missing and say so.  The worker reports the sandbox as active only when
every probe was refused by a policy (EPERM, EACCES or ENOSYS) and none succeeded
(``sandbox.apply``); the server and ``asight check`` show this report, never an import's success.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import socket

# raw syscall numbers of the probes that have no Python wrapper
NUMBERS = {
    "x86_64": {"execve": 59, "ptrace": 101, "mount": 165, "tkill": 200, "tgkill": 234, "unshare": 272,
               "setns": 308, "process_vm_readv": 310, "bpf": 321, "io_uring_setup": 425, "open_tree": 428,
               "move_mount": 429, "fsopen": 430, "pidfd_open": 434},
    "aarch64": {"execve": 221, "ptrace": 117, "mount": 40, "tkill": 130, "tgkill": 131, "unshare": 97,
                "setns": 268, "process_vm_readv": 270, "bpf": 280, "io_uring_setup": 425, "open_tree": 428,
                "move_mount": 429, "fsopen": 430, "pidfd_open": 434},
}
REFUSED = {errno.EPERM, errno.EACCES, errno.ENOSYS}
PTRACE_PEEKDATA, AT_FDCWD = 2, -100
SOCKETS = {"unix_stream": (socket.AF_UNIX, socket.SOCK_STREAM), "unix_dgram": (socket.AF_UNIX, socket.SOCK_DGRAM),
           "inet_tcp": (socket.AF_INET, socket.SOCK_STREAM), "inet_udp": (socket.AF_INET, socket.SOCK_DGRAM),
           "inet6_tcp": (socket.AF_INET6, socket.SOCK_STREAM), "netlink": (socket.AF_NETLINK, socket.SOCK_RAW),
           "packet": (getattr(socket, "AF_PACKET", 17), socket.SOCK_RAW), "vsock": (40, socket.SOCK_STREAM),
           "alg": (38, socket.SOCK_SEQPACKET)}


def run(workdir: str) -> dict[str, str]:
    """Probe name -> "refused (EPERM)" | "SUCCEEDED" | "failed (ENOENT)" (an error that is no refusal)."""
    table = NUMBERS.get(platform.machine())
    if table is None:
        return {"architecture": f"SUCCEEDED (no probe table for {platform.machine()}: nothing verified)"}
    libc = ctypes.CDLL(None, use_errno=True)
    probes = file_probes(workdir) | socket_probes() | process_probes(libc, table) | kernel_probes(libc, table) \
        | scheduling_probes(os.getppid())
    return {name: outcome(probe) for name, probe in probes.items()}


def contained(report: dict[str, str]) -> bool:
    """Every probe refused by a policy: nothing succeeded, nothing failed for an incidental reason."""
    return bool(report) and all(result.startswith("refused") for result in report.values())


def outcome(probe) -> str:
    try:
        probe()
    except OSError as err:
        name = errno.errorcode.get(err.errno, str(err.errno))
        return f"refused ({name})" if err.errno in REFUSED else f"failed ({name})"
    return "SUCCEEDED"


def file_probes(workdir: str) -> dict:
    target = os.path.join(workdir, "asight-selftest")

    def create():
        os.close(os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        os.unlink(target)

    def write_open():
        os.close(os.open(os.devnull, os.O_WRONLY))

    def mkdir():
        os.mkdir(target)
        os.rmdir(target)

    def unix_bind():
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(target)
        os.unlink(target)

    def memfd():
        os.close(os.memfd_create("asight-selftest"))

    return {"create_file": create, "open_for_write": write_open, "mkdir": mkdir, "unix_bind_path": unix_bind,
            "memfd_create": memfd}


def socket_probes() -> dict:
    def opener(family: int, kind: int):
        return lambda: socket.socket(family, kind).close()

    def pair(kind: int):
        def make():
            for end in socket.socketpair(socket.AF_UNIX, kind):
                end.close()
        return make
    probes = {f"socket_{name}": opener(*spec) for name, spec in SOCKETS.items()}
    probes["socketpair_stream"], probes["socketpair_dgram"] = pair(socket.SOCK_STREAM), pair(socket.SOCK_DGRAM)
    return probes


def process_probes(libc, table: dict) -> dict:
    parent = os.getppid()

    def fork():
        child = os.fork()
        if child == 0:
            os._exit(0)
        os.waitpid(child, 0)

    return {"fork": fork, "execve": _raw(libc, table["execve"], b"/nonexistent/asight-selftest", 0, 0),
            "kill_parent": lambda: os.kill(parent, 0), "tkill_parent": _raw(libc, table["tkill"], parent, 0),
            "tgkill_parent": _raw(libc, table["tgkill"], parent, parent, 0),
            "ptrace_parent": _raw(libc, table["ptrace"], PTRACE_PEEKDATA, parent, 0, 0),
            "process_vm_readv_parent": _raw(libc, table["process_vm_readv"], parent, 0, 0, 0, 0, 0),
            "pidfd_open_parent": _raw(libc, table["pidfd_open"], parent, 0)}


def scheduling_probes(sentinel: int) -> dict:
    """Change another process's CPU affinity or priority (``sandbox_rules.OWN_PID_ONLY``).  Harmless if it
    succeeds: the sentinel (the parent) gets the mask and nice value it already has, read from /proc."""
    def affinity():
        os.sched_setaffinity(sentinel, _proc_affinity(sentinel))

    def priority():
        os.setpriority(os.PRIO_PROCESS, sentinel, _proc_nice(sentinel))

    def read_affinity():
        os.sched_getaffinity(sentinel)

    return {"sched_setaffinity_other": affinity, "setpriority_other": priority,
            "sched_getaffinity_other": read_affinity}


def _proc_affinity(pid: int) -> set[int]:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("Cpus_allowed_list:"))
    cpus: set[int] = set()
    for part in line.split(":", 1)[1].strip().split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def _proc_nice(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        return int(stat.read().rsplit(")", 1)[1].split()[16])


def kernel_probes(libc, table: dict) -> dict:
    return {"mount": _raw(libc, table["mount"], b"none", b"/nonexistent/asight-selftest", b"tmpfs", 0, 0),
            "open_tree": _raw(libc, table["open_tree"], AT_FDCWD, b"/nonexistent/asight-selftest", 0),
            "move_mount": _raw(libc, table["move_mount"], -1, b"", AT_FDCWD, b"/nonexistent/asight-selftest", 0),
            "fsopen": _raw(libc, table["fsopen"], b"asight-no-such-fs", 0),
            "unshare": _raw(libc, table["unshare"], 0), "setns": _raw(libc, table["setns"], -1, 0),
            "io_uring_setup": _raw(libc, table["io_uring_setup"], 1, 0), "bpf": _raw(libc, table["bpf"], 0, 0, 0)}


def _raw(libc, number: int, *args):
    """A probe making one raw syscall; an error return becomes OSError, a success closes nothing."""
    def call():
        converted = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
        if libc.syscall(ctypes.c_long(number), *converted) < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
    return call
