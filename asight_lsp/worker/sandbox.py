"""The OS sandbox of the long-lived TVM worker: a seccomp-bpf filter (docs/sandbox.md).

TVM's parser evaluates expressions of the text it parses; the static gate (``tvmscript/safety.py``)
decides what may reach it.  This filter is the second line: once applied (after ``import tvm``,
before the first request), no thread of the worker can start a program or a process, open a
socket, or create, change or delete a file, whatever Python code runs.  Reading files, writing to
the pipes the worker already holds, anonymous and executable memory (LLVM compiles kernels in
memory) and threads (TVM's pool, OpenBLAS) keep working.

Mechanism: libseccomp through ``pyseccomp`` (ctypes, no compiled code), default action ALLOW plus
the rules of ``RULES``; a denied call fails with ``EPERM`` (``clone3`` and ``openat2`` with
``ENOSYS``, so that glibc falls back to the calls whose arguments the filter can read).  A filter
cannot be removed once loaded, and it holds for every thread (``TSYNC``) and every child.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass

# open(2) flags (x86-64 / generic Linux values) and clone(2)'s thread flag
O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND = 0o1, 0o2, 0o100, 0o1000, 0o2000
WRITE_FLAGS = (O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND)
CLONE_THREAD = 0x00010000

# syscalls denied outright, by what they would let a parsed expression do
EXEC = ("execve", "execveat")
PROCESSES = ("fork", "vfork", "ptrace", "process_vm_writev", "process_vm_readv", "unshare", "setns",
             "pidfd_open", "pidfd_getfd", "pidfd_send_signal")
NETWORK = ("socket",)
FILES = ("creat", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir", "mkdirat", "rmdir",
         "link", "linkat", "symlink", "symlinkat", "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown",
         "fchownat", "truncate", "mknod", "mknodat", "utime", "utimes", "utimensat", "futimesat",
         "setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
         "mount", "umount2", "pivot_root", "chroot", "name_to_handle_at", "open_by_handle_at")
# io_uring performs open/socket/... in the kernel, out of the filter's sight; bpf, keys, userfaultfd
# and perf are kernel attack surface a parser never needs
KERNEL = ("io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "add_key", "request_key", "keyctl",
          "userfaultfd", "perf_event_open", "kexec_load", "kexec_file_load", "init_module", "finit_module",
          "delete_module", "swapon", "swapoff", "reboot", "acct", "quotactl")
SIMULATE_ENV = "ASIGHT_SANDBOX_UNAVAILABLE"   # tests: "reason" = behave as where the sandbox cannot be set up
NOT_IMPLEMENTED = ("clone3", "openat2")   # arguments behind a pointer: ENOSYS makes glibc fall back


@dataclass
class SandboxStatus:
    """What the worker reports about its sandbox (``ping``, the hello frame, ``asight/status``)."""
    active: bool
    mechanism: str = "seccomp-bpf (libseccomp via pyseccomp)"
    reason: str | None = None      # why it is not active
    requested: bool = True         # False: started unsandboxed on purpose (``--unsandboxed``)

    def to_dict(self) -> dict:
        return {"active": self.active, "mechanism": self.mechanism, "reason": self.reason,
                "requested": self.requested}


STATUS = SandboxStatus(active=False, reason="not applied yet")


def build_filter(seccomp, pid: int | None = None):
    """The filter: ALLOW by default, the rules of this module denied (``seccomp``: the pyseccomp module)."""
    eperm = seccomp.ERRNO(errno.EPERM)
    flt = seccomp.SyscallFilter(seccomp.ALLOW)
    flt.set_attr(seccomp.Attr.CTL_TSYNC, 1)                       # every thread, not just the caller
    flt.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)   # 32-bit / x32 entry points
    for name in EXEC + PROCESSES + NETWORK + FILES + KERNEL:
        _deny(flt, seccomp, eperm, name)
    for name in NOT_IMPLEMENTED:
        _deny(flt, seccomp, seccomp.ERRNO(errno.ENOSYS), name)
    # a new process is a clone without CLONE_THREAD; threads stay allowed
    flt.add_rule(eperm, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, CLONE_THREAD, 0))
    for name, flags_arg in (("open", 1), ("openat", 2)):
        for flag in WRITE_FLAGS:
            flt.add_rule(eperm, name, seccomp.Arg(flags_arg, seccomp.MASKED_EQ, flag, flag))
    pid = os.getpid() if pid is None else pid
    for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):   # signals to other processes
        flt.add_rule(eperm, name, seccomp.Arg(0, seccomp.NE, pid))
    return flt


def _deny(flt, seccomp, action: int, name: str) -> None:
    try:
        flt.add_rule(action, name)
    except (OSError, ValueError):   # a syscall this architecture does not have (e.g. fork on aarch64)
        pass


def apply() -> SandboxStatus:
    """Load the filter into this process (all threads); the status says whether it holds and why not."""
    global STATUS
    simulated = os.environ.get(SIMULATE_ENV)
    if simulated:   # tests: the machine without seccomp (it can only make the worker more careful)
        STATUS = SandboxStatus(active=False, reason=simulated)
        return STATUS
    try:
        import pyseccomp as seccomp
    except (ImportError, RuntimeError, OSError) as err:   # pyseccomp missing, or no libseccomp
        STATUS = SandboxStatus(active=False, reason=f"cannot load libseccomp ({_first_line(err)})")
        return STATUS
    try:
        build_filter(seccomp).load()
    except (OSError, ValueError, AttributeError) as err:
        STATUS = SandboxStatus(active=False, reason=f"the seccomp filter could not be loaded ({_first_line(err)})")
        return STATUS
    STATUS = SandboxStatus(active=True)
    return STATUS


def skip(reason: str) -> SandboxStatus:
    """Record that this worker runs unsandboxed on purpose (a trusted request such as cachegrind)."""
    global STATUS
    STATUS = SandboxStatus(active=False, reason=reason, requested=False)
    return STATUS


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
