"""The JSON-RPC side of the language server: pygls' LSP protocol, with every request answered.

pygls turns a message into its lsprotocol type while ``json.loads`` decodes it (as the decoder's
``object_hook``); when the params do not fit the method's schema (a negative or > 2**31-1
position, a wrong type, a missing field) it logs the failure and never answers.  Here the decoder
leaves every object a dict and ``handle_message`` structures the whole message once:

* a request whose params do not fit gets InvalidParams, naming the fields at fault (never the body);
* anything that is not a JSON-RPC 2.0 request, notification or response gets InvalidRequest (id
  null when the message has no usable id), as does a request after ``shutdown``, a second
  ``initialize``, and (ServerNotInitialized) a request before ``initialize``;
* a notification that does not fit is dropped with one log line; a body that is not JSON gets a
  ParseError answer (``AsightServer.report_server_error``).

Errors a client caused (InvalidParams, RequestFailed, ...) are logged in one line, not as
tracebacks; a bug of ours is answered "internal error: ..." in one line, its traceback in the log.  Results a feature serialized already
(``RawJSON``) are sent as they are.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import json
import logging
import re
import threading
from urllib.parse import unquote

import cattrs
from lsprotocol import types
from pygls.exceptions import FeatureRequestError, JsonRpcException, JsonRpcInternalError
from pygls.io_ import StdoutWriter
from pygls.protocol import (JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage, LanguageServerProtocol,
                            lsp_method)

from .. import protocol as P
from ..tvmscript.pysource import line_text, source_lines
from .convert import RawJSON

logger = logging.getLogger(__name__)

PARSE_ERROR, INVALID_REQUEST, SERVER_NOT_INITIALIZED = -32700, -32600, -32002
BEFORE_INITIALIZE = {types.INITIALIZE, types.EXIT}


def spliced(source: str, change: types.TextDocumentContentChangePartial, codec) -> str:
    """``source`` with one range change applied, in the editor's line model (``source_lines``: only
    ``\\n``, ``\\r\\n``, ``\\r`` end a line; pygls' ``splitlines`` would also end one at ``\\x0c`` ...).
    As LSP says, a character past the end of its line is the end of the line, a line past the end
    of the text is the end of the text; a reversed range replaces nothing.  (pygls' own edit puts a
    character past the end of the last line one short of it.)"""
    lines = source_lines(source, keepends=True)

    def offset(pos: types.Position) -> int:
        if pos.line >= len(lines):
            return len(source)
        content = line_text(lines[pos.line])
        if pos.character >= codec.client_num_units(content):
            column = len(content)
        else:
            column = codec.position_from_client_units(lines, types.Position(pos.line, pos.character)).character
        return sum(map(len, lines[:pos.line])) + column
    start = offset(change.range.start)
    return source[:start] + change.text + source[max(offset(change.range.end), start):]


class OrderedWriter:
    """pygls' stdout writer, with big messages written by a thread (issue 14).

    pygls writes each message to stdout on the event loop, and ``write`` + ``flush`` block until
    the client has read it all: the 17 MB symbols of a 100,000-line file held every other request
    for as long as the client took to read them.  A message of more than ``BIG`` bytes, and every
    message after it until the thread has written them all, goes to one writer thread (first in,
    first out: messages never overtake each other); small messages otherwise go straight out.
    """
    BIG = 1 << 20

    def __init__(self, inner):
        self.inner = inner
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="asight-write")
        self._queued = 0
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            direct = self._queued == 0 and len(data) <= self.BIG
            if not direct:
                self._queued += 1
        if direct:
            self.inner.write(data)
        else:
            self._executor.submit(self._write_queued, data)

    def _write_queued(self, data: bytes) -> None:
        try:
            self.inner.write(data)
        except (OSError, ValueError) as err:   # the client went away: as pygls, log it
            logger.error("Error sending data: %s", err)
        finally:
            with self._lock:
                self._queued -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=True)   # what was queued is written first
        self.inner.close()


def _with_plain_params(obj: dict, cls):
    """A generic message with its params as they came (pygls makes a namedtuple class per object,
    ~0.1 ms and a garbage cycle each, and fails on a key named ``type_name`` that is no identifier)."""
    return cls(**obj)


def valid_id(value) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def describe(err: Exception, limit: int = 3) -> str:
    """What did not fit, as JSON paths (``params.position.line: ...``), at most ``limit`` of them."""
    def fmt(exc, type_):
        if type(exc) is ValueError:   # lsprotocol's validators say which range was expected
            return str(exc)[:120]
        return cattrs.v.format_exception(exc, type_)
    try:
        found = cattrs.transform_error(err, format_exception=fmt) if isinstance(err, cattrs.BaseValidationError) \
            else [f"{type(err).__name__}: {str(err)[:120]}"]
    except Exception:  # pragma: no cover - describing must never fail
        found = [type(err).__name__]
    out = []
    for item in found[:limit]:
        text, _, path = item.rpartition(" @ $.")
        path = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), path)
        out.append(f"{path}: {text}" if text else item)
    return "; ".join(out) + (f" (+{len(found) - limit} more)" if len(found) > limit else "")


class AsightProtocol(LanguageServerProtocol):
    """pygls' protocol with every request answered (module docstring) and ``RawJSON`` results."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_seen = False
        self.on_message = None   # called on each message (the server restarts its idle wait)
        for generic in (JsonRPCRequestMessage, JsonRPCNotification):   # params of methods lsprotocol
            self._converter.register_structure_hook(generic, _with_plain_params)   # does not know stay dicts

    def _execute_handler(self, msg_id, handler, callback, args=None, kwargs=None) -> None:
        """pygls keeps the future of every generator or async handler by ``msg_id``, and forgets it
        only for a client's request: a notification's (a uuid) and the inner handlers of pygls'
        builtins (``executeCommand``: the command's task and its result) stayed forever."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda done, key=msg_id: self._forget_future(key, done))

    def _forget_future(self, msg_id, future) -> None:
        if self._request_futures.get(msg_id) is future:
            del self._request_futures[msg_id]

    def structure_message(self, data):
        """The decoder's hook: objects stay dicts (``handle_message`` structures the whole message)."""
        return data

    def handle_message(self, message) -> None:
        if self.on_message is not None:
            self.on_message()
        refusal = self._refusal(message)
        if refusal is not None:
            self._answer_error(message, *refusal)
            return
        if "method" in message and "params" not in message:
            message["params"] = None            # JSON-RPC lets a request leave its params out
        try:
            structured = self._converter.structure(message, self._message_type(message))
        except Exception as err:
            self._unfit(message, err)
            return
        if message.get("method") == types.INITIALIZE:
            self._initialize_seen = True
        super().handle_message(structured)

    def _refusal(self, message) -> tuple[int, str] | None:
        """``(code, text)`` when ``message`` is not something to structure and handle."""
        if not isinstance(message, dict) or message.get("jsonrpc") != self.VERSION:
            return INVALID_REQUEST, "not a JSON-RPC 2.0 message"
        has_id, method = "id" in message, message.get("method")
        if has_id and not valid_id(message["id"]) and not (message["id"] is None and "error" in message):
            return INVALID_REQUEST, "'id' must be a string or an integer"
        if "method" in message and not isinstance(method, str):
            return INVALID_REQUEST, "'method' must be a string"
        if method is None and not has_id:
            return INVALID_REQUEST, "neither a request, a notification nor a response"
        if method is None or method == types.EXIT:
            return None
        if not self._initialize_seen and method not in BEFORE_INITIALIZE:
            return SERVER_NOT_INITIALIZED, f"{method} before initialize"
        if self._shutdown:
            return INVALID_REQUEST, f"{method} after shutdown"
        if method == types.INITIALIZE and self._initialize_seen:
            return INVALID_REQUEST, "initialize was sent already"
        return None

    def _message_type(self, message: dict):
        if "method" not in message:
            if "error" in message:
                return types.ResponseErrorMessage
            return self._result_types.pop(message["id"], None) or JsonRPCResponseMessage
        fallback = JsonRPCRequestMessage if "id" in message else JsonRPCNotification
        return self.get_message_type(message["method"]) or fallback

    def _answer_error(self, message, code: int, text: str) -> None:
        """An error answer to a request (id null when it has none); notifications are only logged."""
        is_request = isinstance(message, dict) and "method" in message and valid_id(message.get("id"))
        is_notification = isinstance(message, dict) and isinstance(message.get("method"), str) and "id" not in message
        if is_notification:
            logger.warning("ignored notification %s: %s", message["method"][:80], text)
            return
        logger.warning("refused a message: %s", text)
        self._send_data({"jsonrpc": self.VERSION, "id": message["id"] if is_request else None,
                         "error": {"code": code, "message": text}})

    def _unfit(self, message: dict, err: Exception) -> None:
        """A message whose params or result do not fit its schema."""
        method, text = message.get("method"), describe(err)
        if method is None:                      # a response of the client to one of our requests
            logger.warning("a response to %r does not fit its schema: %s", message["id"], text)
            self._handle_response(message["id"], None, types.ResponseError(
                code=P.ERROR_INVALID_PARAMS, message=f"invalid response: {text}"))
        else:
            self._answer_error(message, P.ERROR_INVALID_PARAMS, f"invalid params for {method[:80]}: {text}")

    def answer_parse_error(self, err: Exception) -> None:
        """A body that is not JSON (or not UTF-8): ParseError, id null."""
        logger.warning("a message is not JSON: %s", str(err)[:120])
        self._send_data({"jsonrpc": self.VERSION, "id": None,
                         "error": {"code": PARSE_ERROR, "message": f"parse error: {str(err)[:120]}"}})

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        """pygls' document sync, for open documents only (a change of another one is dropped), each
        range change applied as one splice of the text (``spliced``) rather than pygls' rewrite of
        every line (~1 ms a keystroke in a 3,000-line file, ~30 ms in a 100,000-line one)."""
        uri = params.text_document.uri
        document = self.workspace.text_documents.get(unquote(uri))
        if document is None:
            logger.warning("ignored didChange of a document that is not open: %s", uri[:200])
            return None
        for change in params.content_changes:
            text = spliced(document.source, change, document.position_codec) \
                if isinstance(change, types.TextDocumentContentChangePartial) else change.text
            document.apply_change(types.TextDocumentContentChangeWholeDocument(text=text))
        document.version = params.text_document.version
        return (yield from super().lsp_text_document__did_change(
            types.DidChangeTextDocumentParams(params.text_document, [])))

    def _send_handler_result(self, future, *, msg_id) -> None:
        """Errors a client caused are answered with one log line; a bug of ours is answered with one
        line too (pygls sent the client its traceback) and its traceback goes to the server's log."""
        error = None if future.cancelled() else future.exception()
        if isinstance(error, JsonRpcException) and not isinstance(error, JsonRpcInternalError):
            self._request_futures.pop(msg_id, None)
            logger.info("request %s: %s", msg_id, error.message)
            self._send_response(msg_id, error=error.to_response_error())
            return
        if error is not None and not isinstance(error, JsonRpcException):
            self._request_futures.pop(msg_id, None)
            logger.error("request %s: internal error", msg_id, exc_info=error)
            internal = JsonRpcInternalError(f"internal error: {type(error).__name__}: {str(error)[:300]} "
                                            "(the traceback is in the server's log)")
            self._send_response(msg_id, error=internal.to_response_error())
            self._server._report_server_error(internal, FeatureRequestError)
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def set_writer(self, writer, include_headers: bool = True):
        """Stdout gets an ``OrderedWriter`` (TCP and websocket writers do not block)."""
        if isinstance(writer, StdoutWriter):
            writer = OrderedWriter(writer)
        super().set_writer(writer, include_headers)

    def _send_data(self, data):
        """``RawJSON`` results are sent as they are (a 3,000-line file has ~500 code lenses;
        serializing them with cattrs + json is most of a codeLens request)."""
        result = getattr(data, "result", None)
        if not isinstance(result, RawJSON) or self.writer is None:
            return super()._send_data(data)
        head = json.dumps({"jsonrpc": self.VERSION, "id": data.id})
        body = f'{head[:-1]}, "result": {result}}}'
        if self._include_headers:
            body = (f"Content-Length: {len(body)}\r\n"
                    f"Content-Type: {self.CONTENT_TYPE}; charset={self.CHARSET}\r\n\r\n" + body)
        res = self.writer.write(body.encode(self.CHARSET))
        if inspect.isawaitable(res):
            asyncio.ensure_future(res)


class NotJsonFilter(logging.Filter):
    """pygls' read loop logs a body that is not JSON as a traceback; one warning line says it all."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if record.msg == "Unable to handle message" and isinstance(error, (json.JSONDecodeError, UnicodeDecodeError)):
            return False    # answered (and logged in one line) by AsightProtocol.answer_parse_error
        return True
