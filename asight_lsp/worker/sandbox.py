"""The OS sandbox of the long-lived TVM worker (docs/sandbox.md), set up once per worker start.

TVM's parser evaluates expressions of the text it parses; the static gate (``tvmscript/safety.py``)
decides what may reach it.  The sandbox is what holds when the gate is wrong.  ``apply()``, called
after ``import tvm`` and before the first request, in this order:

1. an empty private working directory (``mkdtemp``), so that a relative path lands nowhere useful;
2. resource limits: no file may grow (``RLIMIT_FSIZE`` 0), no core dump, a modest number of open
   files, address space bounded (ASIGHT_WORKER_MEM_GB), CPU time bounded per request (ASIGHT_WORKER_CPU_S);
3. ``no_new_privs``, and as root every capability dropped (bounding, ambient, effective, permitted,
   inheritable);
4. Landlock, where the kernel has it: the filesystem read-only, TCP bind/connect and, from ABI 6,
   abstract Unix sockets and signals outside the process refused (``worker/landlock.py``);
5. the seccomp ALLOW-list (``worker/sandbox_rules.py``): every other call answers EPERM;
6. the self-test (``worker/selftest.py``): the process tries forbidden actions; the sandbox is
   reported ``active`` only if every one was refused.

When it cannot be set up, or a probe succeeds, the worker says why and parses nothing
(``worker/__main__.py``): files are then outlined statically only.
"""
from __future__ import annotations

import ctypes
import os
import resource
import signal
import tempfile
from dataclasses import dataclass, field

SIMULATE_ENV = "ASIGHT_SANDBOX_UNAVAILABLE"   # tests: "reason" = behave as where the sandbox cannot be set up
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
NOFILE = 512


@dataclass
class SandboxStatus:
    """What the worker reports about its sandbox (``ping``, the hello frame, ``asight/status``)."""
    active: bool
    mechanism: str = "seccomp-bpf allow-list + Landlock + no_new_privs, verified by a self-test"
    reason: str | None = None      # why it is not active
    requested: bool = True         # False: started unsandboxed on purpose (``--unsandboxed``)
    layers: dict = field(default_factory=dict)     # what each step did (limits, cwd, capabilities, landlock, seccomp)
    selftest: dict = field(default_factory=dict)   # probe -> "refused (EPERM)" / "SUCCEEDED" / "failed (...)"

    def to_dict(self) -> dict:
        return {"active": self.active, "mechanism": self.mechanism, "reason": self.reason,
                "requested": self.requested, "layers": self.layers, "selftest": self.selftest}


STATUS = SandboxStatus(active=False, reason="not applied yet")


def apply() -> SandboxStatus:
    """Set the sandbox up in this process (all threads), then test it from inside; never raises.
    (The tuning runner is a sandboxed worker too: ``candidate_runner``.)"""
    global STATUS
    simulated = os.environ.get(SIMULATE_ENV)
    if simulated:   # tests: the machine without seccomp (it can only make the worker more careful)
        STATUS = SandboxStatus(active=False, reason=simulated)
        return STATUS
    layers: dict = {}
    try:
        import pyseccomp as seccomp   # first: finding libseccomp runs ldconfig and writes temp files
        from . import landlock, selftest   # noqa: F401  (imported before the filesystem turns read-only)
        layers["cwd"] = private_cwd()
        layers["limits"] = set_limits()
        layers["capabilities"] = drop_privileges()
        layers["landlock"] = landlock_layer()
        layers["seccomp"] = load_allow_list(seccomp)
    except (OSError, ValueError, AttributeError, RuntimeError, ImportError) as err:
        STATUS = SandboxStatus(active=False, reason=f"the sandbox could not be set up ({_first_line(err)})",
                               layers=layers)
        return STATUS
    STATUS = verify(layers)
    return STATUS


def verify(layers: dict) -> SandboxStatus:
    """The self-test's verdict: active only when every forbidden action was refused."""
    from . import selftest
    report = selftest.run(layers["cwd"])
    if selftest.contained(report):
        return SandboxStatus(active=True, layers=layers, selftest=report)
    leaks = ", ".join(f"{name}: {result}" for name, result in report.items() if not result.startswith("refused"))
    return SandboxStatus(active=False, reason=f"the sandbox's self-test saw forbidden actions not refused ({leaks})",
                         layers=layers, selftest=report)


def set_limits() -> dict:
    """No file may grow, no core dump, few open files, memory bounded (soft = hard: cannot be raised);
    CPU time bounded per request (``cpu_budget``)."""
    limits = {"RLIMIT_FSIZE": 0, "RLIMIT_CORE": 0, "RLIMIT_NOFILE": NOFILE, "RLIMIT_AS": vm_size() + memory_allowance()}
    for name, value in limits.items():
        which = getattr(resource, name)
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
        limits[name] = value
    limits["RLIMIT_CPU"] = cpu_budget()
    return limits


MEMORY_ENV = "ASIGHT_WORKER_MEM_GB"
DEFAULT_MEMORY_GB = 4.0
THREAD_RESERVE = 72 << 20    # per TVM pool thread: an 8 MiB stack + a 64 MiB glibc malloc arena (virtual)


def memory_allowance() -> int:
    """Address space the worker may add to its size after ``import tvm``: a file that allocates
    without end fails there, not the machine.

    ``ASIGHT_WORKER_MEM_GB`` GiB (default 4: parsing every fixture adds < 10 MiB, docs/sandbox.md)
    plus what TVM's thread pool reserves, never more than the machine's memory."""
    gib = float(os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_GB)
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return min(int(gib * (1 << 30)) + threads * THREAD_RESERVE, pages)


def memory_message(err: BaseException) -> str | None:
    """The one-line error for ``err`` when it is running out of the address space ``memory_allowance``
    gives (a MemoryError or a C++ bad_alloc anywhere in its chain, TVM's DiagnosticError wraps them)."""
    if not STATUS.active or not _out_of_memory(err):
        return None
    gib = float(os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_GB)
    return (f"the file needs more than {gib:g} GiB to evaluate (the worker's memory limit; "
            f"set {MEMORY_ENV} to change it)")


def over_allowance(err: BaseException, scale: float = 1.0) -> str | None:
    """Words for ``err`` when it is running out of the memory ``limit_memory(scale)`` allowed, else None."""
    if not _out_of_memory(err):
        return None
    gib = scale * float(os.environ.get(MEMORY_ENV) or DEFAULT_MEMORY_GB)
    return f"out of memory: it needs more than the {gib:g} GiB allowed (set {MEMORY_ENV} to change it)"


def _out_of_memory(err: BaseException | None) -> bool:
    seen = 0
    while err is not None and seen < 20:
        if isinstance(err, MemoryError) or "std::bad_alloc" in str(err):
            return True
        err, seen = err.__cause__ or err.__context__, seen + 1
    return False


def cpu_budget(method: str = "") -> int:
    """Give the next request its CPU-seconds (``wire.cpu_budget_s``: 600 by default, 120 to read a file;
    all threads together): the soft ``RLIMIT_CPU`` becomes the time used so far + the budget; past it
    the kernel ends the worker (SIGXCPU) and the client says why.  Returns the soft limit set (seconds)."""
    from ..engine.wire import cpu_budget_s
    budget = cpu_budget_s(method)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(usage.ru_utime + usage.ru_stime) + budget
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        soft = min(soft, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    return soft


def vm_size() -> int:
    """This process's virtual size now (TVM and LLVM loaded), in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def private_cwd() -> str:
    """An empty folder of our own (mode 0700) as the working directory; the client removes it."""
    path = tempfile.mkdtemp(prefix="asight-worker-")
    os.chdir(path)
    return path


def limit_memory(scale: float = 1.0) -> int:
    """``RLIMIT_AS`` = this process's size + ``scale`` x ``memory_allowance`` (a builder, the tuning job:
    LLVM on a huge unrolled loop otherwise grows until the machine kills something).  Returns the limit."""
    value = vm_size() + int(scale * memory_allowance())
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(resource.RLIMIT_AS, (value, hard))
    return value


def drop_privileges() -> str:
    """``no_new_privs``; as root, every capability (bounding set, ambient, and the process's own sets)."""
    libc = ctypes.CDLL(None, use_errno=True)
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    if not _has_capabilities(("CapEff", "CapPrm", "CapAmb")):
        return "none held (not root)"     # the bounding set only matters to a process that holds some
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"PR_CAPBSET_DROP {cap}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()      # effective, permitted, inheritable for both 32-bit halves: all 0
    _check(libc.capset(header, data), "capset")
    if _has_capabilities():
        raise OSError("capabilities are still held after capset")
    return f"dropped (0..{last}, bounding set included)"


def _has_capabilities(sets=("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")) -> bool:
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status if ":" in line)
    return any(int(fields.get(key, "0").strip(), 16) for key in sets)


def landlock_layer() -> str:
    from .landlock import restrict_read_only
    result = restrict_read_only()
    if "handled" in result:
        return f"ABI {result['abi']}: " + ", ".join(result["handled"])
    return f"unsupported ({result['reason']})" if result["abi"] is None else f"not applied: {result['reason']}"


def load_allow_list(seccomp) -> str:
    """The seccomp allow-list (``seccomp``: the pyseccomp module); raises when it cannot be loaded."""
    from .sandbox_rules import allowed_names, build_filter
    build_filter(seccomp).load()
    return f"allow-list of {len(allowed_names())} calls, default EPERM"


def skip(reason: str) -> SandboxStatus:
    """Record that this worker runs unsandboxed on purpose (a trusted request such as cachegrind)."""
    global STATUS
    STATUS = SandboxStatus(active=False, reason=reason, requested=False)
    return STATUS


def _check(ret: int, what: str) -> None:
    if ret != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def kill_own_group() -> None:
    """SIGKILL the job's workers, remove the folders they and the job left in /tmp, then SIGKILL the group."""
    try:
        import psutil
        for child in psutil.Process().children(recursive=True):
            try:
                child.kill()
            except psutil.Error:
                pass
    except ImportError:
        pass
    finally:
        from ..engine.client import remove_private_cwd, remove_worker_folders
        from .builder import remove_build_roots
        remove_build_roots()
        remove_worker_folders()
        remove_private_cwd({"layers": {"cwd": os.getcwd()}})   # the job's own (main), when it is still empty
        if os.getpgrp() == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os._exit(130)
