"""The language server: a pygls ``LanguageServer`` with ASight's state, document sync and the
feature modules (each registers its own handlers; features in ``disabledFeatures`` are not
registered, so they are not advertised either)."""
from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.io_ import StdoutWriter, run_async
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from .. import __version__
from .. import protocol as P
from . import actions, commands, custom, diagnostics, hover, inlay, lens, symbols
from .convert import RawJSON
from .jsonrpc import AsightProtocol, NotJsonFilter
from .options import ServerOptions
from .stdio import PipeReader, pipe_usable
from ..views.runs import run_summary
from .state import DocState, ServerState, Status, UnknownDocument

FEATURE_MODULES = {"documentSymbol": symbols, "hover": hover, "codeLens": lens, "inlayHint": inlay,
                   "codeAction": actions}


class AsightServer(LanguageServer):
    def __init__(self, options: ServerOptions | None = None):
        super().__init__(P.SERVER_NAME, __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=AsightProtocol)
        self.state = ServerState(options)
        self.protocol.on_message = self.state.idle_gc.schedule
        read_loop_log = logging.getLogger("pygls.server")
        if not any(isinstance(f, NotJsonFilter) for f in read_loop_log.filters):
            read_loop_log.addFilter(NotJsonFilter())

    def start_io(self, stdin=None, stdout=None) -> None:
        """pygls' stdio server, with stdin read on the event loop where it can be (``stdio.py``)."""
        stdin, stdout = stdin or sys.stdin.buffer, stdout or sys.stdout.buffer
        if not pipe_usable(stdin, stdout):
            return super().start_io(stdin, stdout)
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout))
        try:
            asyncio.run(run_async(stop_event=self._stop_event, reader=PipeReader(stdin), protocol=self.protocol,
                                  logger=logging.getLogger("pygls.server"), error_handler=self.report_server_error))
        except BrokenPipeError:
            logging.getLogger(__name__).error("the client is gone (broken pipe): shutting down")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int, token: str | None = None) -> None:
        """TCP for the one client that sends ``token`` (``transports.py``)."""
        from .transports import serve_tcp
        serve_tcp(self, host, port, token or _no_token())

    def start_ws(self, host: str, port: int, token: str | None = None) -> None:
        """Websockets for the one client that sends ``token``, never a browser (``transports.py``)."""
        from .transports import serve_ws
        serve_ws(self, host, port, token or _no_token())

    def report_server_error(self, error: Exception, source) -> None:
        """A body that is not JSON gets a ParseError answer; other errors as pygls reports them."""
        if isinstance(error, (json.JSONDecodeError, UnicodeDecodeError)):
            self.protocol.answer_parse_error(error)
            return
        super().report_server_error(error, source)

    def raw_json(self, value) -> RawJSON:
        """``value`` (lsprotocol objects) serialized once, to be returned again and again."""
        return RawJSON(json.dumps(self.protocol._converter.unstructure(value)))

    def doc(self, uri: str) -> DocState:
        """The document behind ``uri``; an InvalidParams error for an unknown one."""
        if not isinstance(uri, str):
            raise JsonRpcInvalidParams("'uri' must be a string")
        try:
            return self.state.document(uri)
        except UnknownDocument as err:
            raise JsonRpcInvalidParams(str(err)) from None

    @staticmethod
    def check_position(doc: DocState, position: types.Position) -> None:
        if position.line < 0 or position.character < 0 or position.line > len(doc.lines):
            raise JsonRpcInvalidParams(f"position {position.line}:{position.character} is outside the document "
                                       f"({len(doc.lines)} lines)")

    def status(self) -> dict:
        state = self.state
        worker = state._worker
        return {"status": state.status.value, "trusted": state.options.trusted, "storeRoot": state.store_root,
                "workerPid": worker.pid if worker else None, "workerRestarts": worker.restarts if worker else 0,
                "jobs": [run_summary(j.handle.run.load()) for j in state.jobs.values()],
                "features": [f for f in P.FEATURES if state.options.enabled(f)],
                "tvmImported": "tvm" in sys.modules, "workerSandbox": worker.sandbox if worker else None}


def _no_token() -> str:
    raise ValueError("a network transport needs a session token")


def _root(params: types.InitializeParams) -> str | None:
    if params.workspace_folders:
        return to_fs_path(params.workspace_folders[0].uri)
    if params.root_uri:
        return to_fs_path(params.root_uri)
    return params.root_path


def create_server(options: ServerOptions | None = None) -> AsightServer:
    server = AsightServer(options)

    @server.feature(types.INITIALIZE)
    def initialize(ls: AsightServer, params: types.InitializeParams):
        init = params.initialization_options if isinstance(params.initialization_options, dict) else {}
        ls.state.configure(_root(params), init.get("asight", init))
        for name, module in FEATURE_MODULES.items():
            if ls.state.options.enabled(name):
                module.register(ls)

    @server.feature(types.INITIALIZED)
    def initialized(ls: AsightServer, params):
        ls.state.status = Status.RUNNING

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AsightServer, params: types.DidOpenTextDocumentParams):
        item = params.text_document
        doc = ls.state.open(item.uri, item.text, item.version)
        diagnostics.schedule(ls, doc, immediate=True)
        asyncio.ensure_future(ls.state.fresh_store(0.0))   # start reading the run store now, wait for nothing

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AsightServer, params: types.DidChangeTextDocumentParams):
        source = ls.workspace.get_text_document(params.text_document.uri).source
        doc = ls.state.update(params.text_document.uri, source, params.text_document.version)
        diagnostics.schedule(ls, doc)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AsightServer, params: types.DidCloseTextDocumentParams):
        ls.state.close_document(params.text_document.uri)
        diagnostics.clear(ls, params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(ls: AsightServer, params: types.DidChangeConfigurationParams):
        settings = params.settings if isinstance(params.settings, dict) else {}
        ls.state.configure(None, settings.get("asight", settings), trust=False)
        ls.state.index.invalidate()

    @server.feature(P.NOTIFY_WORKSPACE_TRUSTED)
    def workspace_trusted(ls: AsightServer, params=None):
        ls.state.grant_trust()

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: AsightServer, params):
        for job in list(ls.state.jobs.values()):  # jobs this server started stop with it
            job.handle.cancel()
        ls.state.close()

    @server.feature(P.REQ_STATUS)
    def status(ls: AsightServer, params):
        return ls.status()

    custom.register(server)
    commands.register(server)
    return server
