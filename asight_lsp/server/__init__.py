"""The ASight language server (pygls): one feature per module, state in ``state``, options in
``options``; ``app.create_server`` builds it.  Nothing here imports TVM."""
