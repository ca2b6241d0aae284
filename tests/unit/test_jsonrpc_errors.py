"""A bug of ours in a request handler is answered in one line; its traceback goes to the server's log,
never to the client (pygls sent the client the traceback as the error's data)."""
from __future__ import annotations

import concurrent.futures
import logging
from types import SimpleNamespace

from asight_lsp.server.jsonrpc import AsightProtocol


def test_an_unexpected_exception_is_one_line_to_the_client_and_a_traceback_in_the_log(caplog):
    protocol = object.__new__(AsightProtocol)      # the answering path alone (no transport)
    sent, reported = [], []
    protocol._request_futures = {7: None}
    protocol._send_response = lambda msg_id, result=None, error=None: sent.append((msg_id, error))
    protocol._server = SimpleNamespace(_report_server_error=lambda error, source: reported.append(error))
    future = concurrent.futures.Future()
    try:
        {}["missing"]
    except KeyError as err:
        future.set_exception(err)
    with caplog.at_level(logging.ERROR, logger="asight_lsp.server.jsonrpc"):
        protocol._send_handler_result(future, msg_id=7)
    [(msg_id, error)] = sent
    assert msg_id == 7 and error.code == -32603 and error.data is None
    assert error.message == "internal error: KeyError: 'missing' (the traceback is in the server's log)"
    assert "Traceback" in caplog.text and 7 not in protocol._request_futures and len(reported) == 1
