"""The seccomp ALLOW-list of the sandboxed TVM worker (docs/sandbox.md): every other call fails with EPERM.

The set was measured: the worker's test files (check, code view, extract, TIR and Relax profiles,
graphs, features, lineage) ran with the worker under ``strace -f``, and every call made after the
filter was loaded is here, plus the few that glibc and CPython make on paths those tests do not
take (``rt_sigreturn``, ``restart_syscall``, ``nanosleep``, ``gettid`` ...).  Calls that could
leave the process are absent (sockets of every family, ``clone`` without ``CLONE_THREAD``,
``execve``, ``mount`` and the new mount API, ``unshare``/``setns``, ``ptrace``,
``process_vm_*``, ``io_uring_*``, ``bpf`` ...) or argument-filtered (``openat`` read-only,
signals to this process only, ``ioctl`` with terminal queries only, ``fcntl`` without locks or
leases, ``prlimit64`` reads and the CPU limit only, calls naming a pid on this process only).
"""
from __future__ import annotations

import errno
import os

# open(2) flags (x86-64 / generic Linux values): a write, a create, a truncation or an anonymous temp file
O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND, O_TMPFILE_BIT = 0o1, 0o2, 0o100, 0o1000, 0o2000, 0o20000000
WRITE_FLAGS = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_TMPFILE_BIT
CLONE_THREAD = 0x00010000
# ioctl requests CPython and numpy make on their own fds: isatty, buffering, close-on-exec
IOCTLS = {"TCGETS": 0x5401, "TIOCGWINSZ": 0x5413, "FIONREAD": 0x541B, "FIONBIO": 0x5421, "FIONCLEX": 0x5450,
          "FIOCLEX": 0x5451}
PR_SET_NAME, PR_GET_NAME = 15, 16
# fcntl on the worker's own fds; no locks or leases (they would block other processes' writers), no F_SETOWN/F_NOTIFY
FCNTLS = {"F_DUPFD": 0, "F_GETFD": 1, "F_SETFD": 2, "F_GETFL": 3, "F_SETFL": 4, "F_DUPFD_CLOEXEC": 1030,
          "F_GETPIPE_SZ": 1032}

MEMORY = ("brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mbind", "get_mempolicy", "membarrier",
          "msync", "mincore")
THREADS = ("futex", "futex_waitv", "set_robust_list", "rseq", "set_tid_address", "exit",
           "exit_group", "sched_yield", "sched_get_priority_max", "sched_get_priority_min", "gettid", "getpid",
           "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getpgrp")
# calls whose first argument names a process or thread: allowed on this process only (0 or its own pid), so
# that nothing can re-pin, read or probe another process (sched_setaffinity could re-pin the editor's
# CPUs).  TVM's thread pool pins its threads by tid; the worker sets TVM_BIND_THREADS=0.
OWN_PID_ONLY = ("sched_setaffinity", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
                "get_robust_list", "getsid")
RLIMIT_CPU = 0
TIME = ("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time", "times",
        "getrusage")
SIGNALS = ("rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "rt_sigpending", "rt_sigtimedwait",
           "rt_sigsuspend", "restart_syscall")
# on fds the worker already holds (stdio pipes, files opened read-only): no call here creates or changes a file
FDS = ("read", "pread64", "readv", "preadv", "preadv2", "write", "writev", "close", "dup", "dup2", "dup3",
       "lseek", "fstat", "fstatfs", "fadvise64", "getdents64", "getdents", "poll", "ppoll", "select",
       "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait")
PATHS = ("newfstatat", "statx", "stat", "lstat", "statfs", "readlink", "readlinkat", "access", "faccessat",
         "faccessat2", "getcwd")
SYSTEM = ("uname", "sysinfo", "getrandom", "getcpu")
PLAIN = MEMORY + THREADS + TIME + SIGNALS + FDS + PATHS + SYSTEM
NOT_IMPLEMENTED = ("clone3", "openat2")   # arguments behind a pointer: ENOSYS makes glibc fall back to clone/openat


def build_filter(seccomp, pid: int | None = None):
    """The filter (``seccomp``: the pyseccomp module): EPERM by default, ``allowed(...)`` allowed."""
    flt = seccomp.SyscallFilter(seccomp.ERRNO(errno.EPERM))
    flt.set_attr(seccomp.Attr.CTL_TSYNC, 1)                       # every thread, not just the caller
    flt.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.KILL_PROCESS)   # 32-bit / x32 entry points
    for name, args in allowed(seccomp, os.getpid() if pid is None else pid):
        _add(flt, seccomp.ALLOW, name, args)
    for name in NOT_IMPLEMENTED:
        _add(flt, seccomp.ERRNO(errno.ENOSYS), name, ())
    return flt


def allowed(seccomp, pid: int) -> list[tuple[str, tuple]]:
    """(syscall, argument conditions) pairs; several pairs for one call are alternatives."""
    arg = seccomp.Arg
    rules = [(name, ()) for name in PLAIN]
    rules.append(("clone", (arg(0, seccomp.MASKED_EQ, CLONE_THREAD, CLONE_THREAD),)))   # threads only
    rules += [("openat", (arg(2, seccomp.MASKED_EQ, WRITE_FLAGS, 0),)), ("open", (arg(1, seccomp.MASKED_EQ, WRITE_FLAGS, 0),))]
    rules += [(name, (arg(0, seccomp.EQ, pid),)) for name in ("kill", "tgkill", "rt_tgsigqueueinfo")]
    rules += [(name, (arg(0, seccomp.EQ, target),)) for name in OWN_PID_ONLY for target in (0, pid)]
    rules += [("ioctl", (arg(1, seccomp.EQ, request),)) for request in IOCTLS.values()]
    rules += [("fcntl", (arg(1, seccomp.EQ, command),)) for command in FCNTLS.values()]
    rules += [("prctl", (arg(0, seccomp.EQ, option),)) for option in (PR_SET_NAME, PR_GET_NAME)]
    rules.append(("prlimit64", (arg(0, seccomp.EQ, 0), arg(2, seccomp.EQ, 0))))   # read this process's limits
    # set this process's CPU limit (the per-request budget, sandbox.cpu_budget); never its other limits
    rules.append(("prlimit64", (arg(0, seccomp.EQ, 0), arg(1, seccomp.EQ, RLIMIT_CPU), arg(3, seccomp.EQ, 0))))
    return rules


def allowed_names() -> list[str]:
    """The calls the filter allows at all (some only with the arguments above), for the report."""
    names = list(PLAIN) + list(OWN_PID_ONLY) + ["clone", "openat", "open", "kill", "tgkill", "rt_tgsigqueueinfo", "ioctl", "fcntl",
                           "prctl", "prlimit64"]
    return sorted(set(names))


def _add(flt, action: int, name: str, args: tuple) -> None:
    try:
        flt.add_rule(action, name, *args)
    except (OSError, ValueError):   # a call this architecture does not have (e.g. open on aarch64)
        pass
