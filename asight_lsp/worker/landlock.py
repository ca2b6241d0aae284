"""Landlock (Linux >= 5.13) through ctypes: make the whole filesystem read-only for this process.

The ruleset handles every right that changes the filesystem (write, truncate, create any kind of
node, remove, rename across folders, device ioctls) and grants none of them anywhere; reading and
executing are not handled, so they stay as they were.  From ABI 4 it also handles TCP bind and
connect (granted nowhere), from ABI 6 it scopes abstract Unix sockets and signals to this process.
The restriction holds for every thread created after it and cannot be lifted.  The seccomp
allow-list is loaded after this (it refuses the landlock calls themselves).
"""
from __future__ import annotations

import ctypes
import os
import platform

SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}   # create_ruleset, add_rule, restrict_self
CREATE_RULESET_VERSION = 1

WRITE_FILE, REMOVE_DIR, REMOVE_FILE = 1 << 1, 1 << 4, 1 << 5
MAKE_CHAR, MAKE_DIR, MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = (1 << n for n in range(6, 13))
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FS_BY_ABI = {1: WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR | MAKE_REG | MAKE_SOCK | MAKE_FIFO
             | MAKE_BLOCK | MAKE_SYM, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def abi(libc=None) -> int | str:
    """The kernel's Landlock ABI version, or why there is none."""
    numbers = SYSCALLS.get(platform.machine())
    if numbers is None:
        return f"unsupported (no Landlock syscall numbers for {platform.machine()})"
    libc = libc or ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(ctypes.c_long(numbers[0]), None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if version < 0:
        return f"unsupported ({os.strerror(ctypes.get_errno())})"
    return int(version)


def restrict_read_only() -> dict:
    """Apply the read-only ruleset; ``{"abi": n, "handled": [...]}`` or ``{"abi": None, "reason": ...}``."""
    libc = ctypes.CDLL(None, use_errno=True)
    version = abi(libc)
    if isinstance(version, str):
        return {"abi": None, "reason": version}
    attr, handled = ruleset_for(version)
    size = ctypes.sizeof(RulesetAttr) if version >= 6 else (16 if version >= 4 else 8)
    create, _, restrict = SYSCALLS[platform.machine()]
    fd = libc.syscall(ctypes.c_long(create), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        return {"abi": version, "reason": f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}"}
    try:
        if libc.syscall(ctypes.c_long(restrict), ctypes.c_int(fd), ctypes.c_uint32(0)) < 0:
            return {"abi": version, "reason": f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}"}
    finally:
        os.close(fd)
    return {"abi": version, "handled": handled}


def ruleset_for(version: int) -> tuple[RulesetAttr, list[str]]:
    fs = 0
    for since, rights in FS_BY_ABI.items():
        if version >= since:
            fs |= rights
    handled = ["filesystem writes"]
    net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0
    if net:
        handled.append("TCP bind/connect")
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    if scoped:
        handled.append("abstract unix sockets and signals outside the process")
    return RulesetAttr(fs, net, scoped), handled
