"""The TVM worker: the only package of asight_lsp that imports TVM.

Run as ``python -m asight_lsp.worker`` (long-lived, msgpack frames on stdin/stdout) or imported by
the tuning job process.  Every TVM import and version shim lives in ``compat``.
"""
