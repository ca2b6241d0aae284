"""``asight serve [--stdio | --tcp PORT | --ws PORT]``: the language server (no TVM in this process)."""
from __future__ import annotations

import logging
import sys

from .. import protocol as P
from ..errors import AsightError


def add_parser(sub):
    p = sub.add_parser("serve", help="the language server (LSP over stdio, TCP or websockets)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (default)")
    how.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT")
    how.add_argument("--ws", type=int, metavar="PORT", help="listen for websockets on 127.0.0.1:PORT")
    p.add_argument("--host", default="127.0.0.1", help="address for --tcp/--ws (default 127.0.0.1)")
    p.add_argument("--token-file", metavar="PATH",
                   help="--tcp/--ws: write the session token here (0600) instead of $XDG_RUNTIME_DIR/asight/lsp-PORT.token")
    p.add_argument("--store", help="run store (.asight directory); default <workspace>/.asight")
    p.add_argument("--worker-python", help="interpreter for the TVM worker")
    trust = p.add_mutually_exclusive_group()
    trust.add_argument("--trusted", action="store_true",
                       help="trust the workspace (tune, profile, export) for an editor that does not say; by "
                            "default only a client's initializationOptions.trusted = true does (VS Code sends it)")
    trust.add_argument("--untrusted", action="store_true", help="refuse tune/profile/export whatever the client says")
    p.add_argument("--disable", action="append", default=[], choices=P.FEATURES, metavar="FEATURE",
                   help=f"switch a feature off (repeatable): {', '.join(P.FEATURES)}")
    p.add_argument("--log-level", default="WARNING", help="log level on stderr (default WARNING)")
    return p


def run(args) -> int:
    for port in (args.tcp, args.ws):
        if port is not None and not 0 < port < 65536:
            raise AsightError(f"port must be between 1 and 65535 (got {port})")
    if args.ws is not None:
        try:
            import websockets  # noqa: F401
        except ImportError:
            raise AsightError("--ws needs the 'websockets' package: pip install 'pygls[ws]'") from None
    from ..server.app import create_server
    from ..server.options import ServerOptions

    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING), stream=sys.stderr,
                        format="asight-lsp %(levelname)s %(name)s: %(message)s")
    options = ServerOptions(trusted=args.trusted, trust_locked=args.untrusted, store_root=args.store, worker_python=args.worker_python,
                            cli_worker_python=args.worker_python, network=args.tcp is not None or args.ws is not None,
                            disabled_features=list(args.disable))
    server = create_server(options)
    server.state.idle_gc.take_over_full_collections()
    port = args.tcp if args.tcp is not None else args.ws
    if port is not None:
        from ..server.transports import announce, session_token
        try:
            token, path = session_token(port, args.token_file)
        except OSError as err:
            raise AsightError(f"cannot write the session token: {err}") from None
        except ValueError as err:
            raise AsightError(str(err)) from None
        announce(args.host, port, path)
        try:
            (server.start_tcp if args.tcp is not None else server.start_ws)(args.host, port, token)
        finally:
            if path is not None:        # the session is over: its token with it
                path.unlink(missing_ok=True)
    else:
        server.start_io()
    return 0
