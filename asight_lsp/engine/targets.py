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
    """Target JSON text, a classic ``kind -key=value ...`` string, or a bare kind/tag -> Target input
    (``require_code_generator``: only LLVM writes the host code)."""
    return require_code_generator(_target_config(text))


DEVICE_KINDS = ("cuda", "rocm", "vulkan", "metal", "opencl")
CODE_GENERATORS = ("llvm",) + DEVICE_KINDS


def require_code_generator(config):
    """Refuse a target whose code is written by a generator that prints names into source: TVM's C
    generator (``"c"``, or ``"host": {"kind": "c"}``) pastes a function's ``global_symbol`` into the
    C file, and a crafted name can become a constructor that runs when the library loads."""
    if not isinstance(config, dict):
        return config                  # a tag: TVM's own list (its host is llvm)
    kind = config.get("kind")
    if kind == "c":        # other unknown kinds are TVM's to name (jobs.check_target)
        raise TargetError(f"target kind 'c' is not supported (only {', '.join(CODE_GENERATORS)}: TVM's "
                          "C code generator prints names into C source)")
    host = config.get("host")
    host_kind = host.get("kind") if isinstance(host, dict) else str(host).split()[0] if host else "llvm"
    if host_kind != "llvm":
        raise TargetError(f"a target host of kind {host_kind!r} is not supported (the host code is LLVM's)")
    for part in (config, host if isinstance(host, dict) else {}):
        require_no_compiler_options(part)
    if isinstance(host, str):
        require_no_compiler_options(_target_config(host) if host.strip() else {})
    return config


COMPILER_OPTIONS = ("cl-opt",)


def require_no_compiler_options(attrs) -> None:
    """Refuse target attributes that pass options to LLVM itself: ``-cl-opt`` takes any LLVM
    command-line option, and some write files where they say (``-ir-dump-directory``,
    ``-info-output-file``) from the unsandboxed builders (a cloned repository's ``asight.target``
    setting could dump IR into any folder).  ``attrs``: a target config or TVM's attrs."""
    for key in COMPILER_OPTIONS:
        try:
            value = attrs.get(key) if hasattr(attrs, "get") else None
        except Exception:  # noqa: BLE001 - TVM's attrs map raises for a missing key on some versions
            value = None
        if value is not None and (not hasattr(value, "__len__") or len(value)):
            raise TargetError(f"target option {key!r} is not supported (it hands options to LLVM itself, and "
                              "some of them write files)")


def _target_config(text: str):
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


# --------------------------------------------------------------------------- --target gpu

GPU_WORD = "gpu"
NVIDIA_SMI_QUERY = ["nvidia-smi", "--query-gpu=name,compute_cap", "--format=csv,noheader"]
_NOISE = {"nvidia", "tesla", "pcie", "sxm", "sxm2", "sxm4", "sxm5", "nvl", "hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6"}


def parse_nvidia_smi(output: str) -> list[dict]:
    """``[{name, compute_cap}]`` from ``nvidia-smi --query-gpu=name,compute_cap --format=csv,noheader``."""
    gpus = []
    for line in output.splitlines():
        name, _, cap = line.rpartition(",")
        if name.strip() and cap.strip():
            gpus.append({"name": name.strip(), "compute_cap": cap.strip()})
    return gpus


def local_gpus(run=None) -> list[dict]:
    """This machine's NVIDIA GPUs (nvidia-smi); TargetError when there is none or nvidia-smi fails."""
    import subprocess
    run = run or subprocess.run
    try:
        proc = run(NVIDIA_SMI_QUERY, capture_output=True, text=True, timeout=20)
    except FileNotFoundError:
        raise TargetError("--target gpu: no NVIDIA GPU on this machine (nvidia-smi not found); name a target "
                          "(cuda, nvidia/..., Target JSON) and measure on a GPU machine with --rpc") from None
    except (OSError, subprocess.TimeoutExpired) as err:
        raise TargetError(f"--target gpu: nvidia-smi did not answer ({err})") from None
    gpus = parse_nvidia_smi(proc.stdout) if proc.returncode == 0 else []
    if not gpus:
        why = (proc.stderr or proc.stdout).strip().splitlines()[:1]
        raise TargetError("--target gpu: nvidia-smi lists no GPU" + (f" ({why[0]})" if why else ""))
    return gpus


def gpu_tag_candidates(name: str) -> list[str]:
    """TVM tag names an nvidia-smi GPU name may have, most specific first:
    ``NVIDIA H100 80GB HBM3`` -> ``nvidia/nvidia-h100-80gb-hbm3`` … ``nvidia/nvidia-h100``."""
    words = [w for w in name.lower().replace("-", " ").replace("_", " ").split() if w]
    core = [w for w in words if w not in _NOISE and not (w[:-2].isdigit() and w.endswith("gb"))]
    out = []
    for end in range(len(core), 0, -1):
        stem = "-".join(core[:end])
        out += [f"nvidia/{stem}", f"nvidia/nvidia-{stem}"]
        if core[0] not in ("geforce", "quadro", "rtx", "titan"):
            out.append(f"nvidia/tesla-{stem}")
    return list(dict.fromkeys(out))


def gpu_target(gpu: dict, known_tags) -> str | dict:
    """The TVM target of one local GPU: its tag when TVM has one, else ``cuda`` with its ``sm_XY``."""
    for tag in gpu_tag_candidates(gpu["name"]):
        if tag in known_tags:
            return tag
    major, _, minor = gpu["compute_cap"].partition(".")
    return {"kind": "cuda", "arch": f"sm_{major}{minor or '0'}"}


def gpu_label(gpu: dict) -> str:
    """The resume key of ``--target gpu`` on this machine."""
    return f"gpu:{gpu['name']}:sm_{gpu['compute_cap'].replace('.', '')}"


def runs_on_device(target) -> bool:
    """Does a target (a run's target JSON, or target text as users write it) run on a GPU?  Such a
    program's process needs the driver (device files opened read-write, its ioctls), which the OS
    sandbox refuses (docs/sandbox.md)."""
    if isinstance(target, dict):
        return target.get("kind") in DEVICE_KINDS
    if not isinstance(target, str) or not target.strip():
        return False
    text = target.strip()
    if text == GPU_WORD or text.split("/")[0] in ("nvidia", "amd", "apple") or text.startswith("{"):
        try:
            config = target_config(text) if text.startswith("{") else {"kind": "cuda"}
        except TargetError:
            return False
        return isinstance(config, dict) and config.get("kind") in DEVICE_KINDS
    return text.split()[0] in DEVICE_KINDS


# --------------------------------------------------------------------------- runs here?

_ARCH = {"amd64": "x86_64", "x64": "x86_64", "x86-64": "x86_64", "arm64": "aarch64", "aarch64_be": "aarch64",
         "i386": "x86", "i486": "x86", "i586": "x86", "i686": "x86"}


def architecture(name: str) -> str:
    """The CPU architecture an LLVM triple (``aarch64-linux-gnu``) or ``platform.machine()`` names."""
    arch = (name or "").strip().lower().split("-")[0]
    return _ARCH.get(arch, arch)


# The OS an LLVM triple's parts name (``x86_64-pc-windows-msvc``: Windows), as ``platform.system()`` says it.
_SYSTEMS = (("linux", "Linux"), ("windows", "Windows"), ("win32", "Windows"), ("mingw", "Windows"),
            ("cygwin", "Windows"), ("darwin", "Darwin"), ("macos", "Darwin"), ("ios", "Darwin"),
            ("apple", "Darwin"), ("freebsd", "FreeBSD"), ("netbsd", "NetBSD"), ("openbsd", "OpenBSD"))


def triple_system(mtriple: str | None) -> str | None:
    """The OS an LLVM triple names (``Linux``, ``Windows``, ``Darwin``, ...), else None (none named)."""
    for part in (mtriple or "").strip().lower().split("-")[1:]:
        for prefix, system in _SYSTEMS:
            if part.startswith(prefix):
                return system
    return None


def foreign_arch(mtriple: str | None, machine: str | None = None, system: str | None = None) -> str | None:
    """What makes an LLVM triple's code unable to run here, else None: its architecture where it is not
    this machine's (``aarch64`` for ``aarch64-linux-gnu`` on x86_64), or the whole triple where it names
    another OS than this machine's ``platform.system()`` or the msvc environment off Windows
    (``x86_64-pc-windows-msvc`` on Linux: loading its library would kill the worker).
    Such code builds here (LLVM emits for it) but cannot run here.  No OS named: runs here."""
    if not mtriple:
        return None
    import platform
    arch, here = architecture(mtriple), architecture(machine or platform.machine())
    if arch and here and arch != here:
        return arch
    here_system = system or platform.system()
    named = triple_system(mtriple)
    msvc = any(part.startswith("msvc") for part in mtriple.strip().lower().split("-")[1:])
    if (named and here_system and named != here_system) or (msvc and here_system != "Windows"):
        return mtriple.strip()[:80]
    return None


def foreign_words(foreign: str) -> str:
    """``foreign_arch``'s answer as the refusals say it: ``tuned on aarch64 and its programs are aarch64
    code`` or ``tuned for x86_64-pc-windows-msvc and its programs are that system's code``."""
    if "-" in foreign:
        return f"tuned for {foreign} and its programs are that system's code"
    return f"tuned on {foreign} and its programs are {foreign} code"


def foreign_cpu(target, machine: str | None = None, system: str | None = None) -> str | None:
    """A run's LLVM target (its target JSON, host included) whose code cannot run here (another CPU
    architecture, or another OS): ``foreign_arch``'s answer, else None (a GPU run's device code is
    ``runs_on_device``'s)."""
    if not isinstance(target, dict):
        return None
    host = target.get("host")
    for part in (target, host if isinstance(host, dict) else None):
        if part is not None and part.get("kind") == "llvm":
            arch = foreign_arch(str(part.get("mtriple") or ""), machine, system)
            if arch:
                return arch
    return None


def runs_here(target, machine: str | None = None, system: str | None = None) -> bool:
    """Can a run's programs be timed on this machine's CPU (a profile, hotspots)?  Not a GPU run's,
    nor those of a CPU run tuned for another architecture (an adopted aarch64 folder on x86_64) or
    another OS (an adopted ``x86_64-pc-windows-msvc`` folder on Linux)."""
    return not runs_on_device(target) and foreign_cpu(target, machine, system) is None


def machine_arch() -> str:
    """This machine's CPU architecture, as ``architecture`` names it."""
    import platform
    return architecture(platform.machine())


def require_runs_here(mtriple: str | None, machine: str | None = None) -> None:
    """Tuning, profiling and export time every program on this machine's CPU: a target whose code is
    for another architecture (``-mtriple=aarch64-linux-gnu`` on an x86_64 machine) cannot run here.
    Said before anything is built (TVM's own failure named an unregistered NEON intrinsic)."""
    arch = foreign_arch(mtriple, machine)
    if arch and "-" in arch:
        import platform
        raise TargetError(f"the target's mtriple {mtriple!r} makes code for another system, which this "
                          f"{platform.system()} machine cannot run: tuning and profiling time every program here "
                          "(tune on that system and bring its work folder here with `asight adopt`)")
    if arch:
        here = architecture(machine) if machine else machine_arch()
        raise TargetError(f"the target's mtriple {mtriple!r} makes {arch} code, which this {here} machine cannot "
                          f"run: tuning and profiling time every program here (tune on {arch} hardware and "
                          "bring its work folder here with `asight adopt`)")


# --------------------------------------------------------------------------- a device here?

_VULKAN_ICD_DIRS = ("/etc/vulkan/icd.d", "/usr/share/vulkan/icd.d", "/usr/local/share/vulkan/icd.d",
                    "/usr/local/etc/vulkan/icd.d", "~/.local/share/vulkan/icd.d")
_OPENCL_ICD_DIR = "/etc/OpenCL/vendors"


def device_missing(kind: str, environ=None, platform: str | None = None) -> str | None:
    """Why this machine has no ``kind`` device to measure on, as its files and environment show it
    without TVM (cheap), or None where one may be there (the tuning job then asks TVM's
    ``device.exist``).  Only sure answers: Linux device files and driver (ICD) files, macOS for Metal,
    a browser for WebGPU; so a refused tune is refused before its run is made."""
    import glob
    import os
    import sys
    env = os.environ if environ is None else environ
    linux = (platform or sys.platform).startswith("linux")
    if kind == "cuda":
        visible = env.get("CUDA_VISIBLE_DEVICES")
        if visible is not None and visible.split(",")[0].strip() in ("", "-1"):
            return f"no NVIDIA GPU visible to CUDA here (CUDA_VISIBLE_DEVICES={visible!r})"
        if linux and not glob.glob("/dev/nvidia[0-9]*") and not os.path.exists("/dev/dxg"):
            return "no NVIDIA GPU on this machine (no /dev/nvidia0 device file, whatever nvidia-smi says)"
    elif kind == "rocm" and linux and not os.path.exists("/dev/kfd"):
        return "no AMD GPU on this machine (/dev/kfd is missing)"
    elif kind == "metal" and (platform or sys.platform) != "darwin":
        return "no Metal device on this machine (Metal is macOS's)"
    elif kind == "webgpu":
        return "no WebGPU device on this machine (WebGPU programs run in a browser)"
    elif kind == "vulkan" and linux and not _drivers(env, ("VK_ICD_FILENAMES", "VK_DRIVER_FILES", "VK_ADD_DRIVER_FILES"),
                                                   [f"{d}/*.json" for d in _xdg_vulkan_dirs(env)]):
        return "no Vulkan driver on this machine (no ICD file in /usr/share/vulkan/icd.d or /etc/vulkan/icd.d)"
    elif kind == "opencl" and linux and not _drivers(env, ("OCL_ICD_VENDORS", "OPENCL_VENDOR_PATH"),
                                                   [f"{_OPENCL_ICD_DIR}/*.icd"]):
        return f"no OpenCL driver on this machine (no ICD file in {_OPENCL_ICD_DIR})"
    return None


def _drivers(env, variables: tuple, patterns: list) -> bool:
    """A driver may be there: a variable names one, or a pattern matches an ICD file."""
    import glob
    import os
    return any(env.get(v) for v in variables) or any(glob.glob(os.path.expanduser(p)) for p in patterns)


def _xdg_vulkan_dirs(env) -> list:
    dirs = list(_VULKAN_ICD_DIRS)
    for var in ("XDG_DATA_DIRS", "XDG_CONFIG_DIRS"):
        dirs += [f"{d}/vulkan/icd.d" for d in (env.get(var) or "").split(":") if d]
    return dirs
