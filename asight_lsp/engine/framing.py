"""Length-prefixed msgpack frames: how the core and the TVM worker talk over pipes.

A frame is a 4-byte big-endian length followed by one msgpack map.  Requests are
``{"id": int, "method": str, "params": map}``; replies are ``{"id": int, "result": ...}`` or
``{"id": int, "error": {"type": str, "message": str}}``.  Events a long request streams before its
reply (progress) are ``{"id": int, "event": map}``.
"""
from __future__ import annotations

import struct
from typing import BinaryIO

import msgpack

HEADER = struct.Struct(">I")
MAX_FRAME = 256 * 1024 * 1024


class FrameError(EOFError):
    """The peer closed the pipe or sent something that is not a frame."""


def write_frame(stream: BinaryIO, message: dict) -> None:
    data = msgpack.packb(message, use_bin_type=True, default=_fallback)
    stream.write(HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: BinaryIO) -> dict:
    header = _read_exactly(stream, HEADER.size)
    (length,) = HEADER.unpack(header)
    if length > MAX_FRAME:
        raise FrameError(f"frame of {length} bytes is larger than the {MAX_FRAME} byte limit")
    message = msgpack.unpackb(_read_exactly(stream, length), raw=False, strict_map_key=False)
    if not isinstance(message, dict):
        raise FrameError("frame does not hold a map")
    return message


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise FrameError("the peer closed the pipe")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def _fallback(value):
    """msgpack has no tuples/sets/numpy scalars: turn them into plain values."""
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
