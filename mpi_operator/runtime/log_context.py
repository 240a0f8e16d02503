"""The reconcile a log line was written in: while a worker reconciles a key, :func:`current_key`
returns it, and :class:`ReconcileContextFilter` or :func:`install_log_record_context` put it on
every record as ``reconcile_key``/``controller``/``reconcile_context``.

Apart from the controller so that logging is configured at start without loading the workers
and their metrics, which only the leader runs.
"""

from __future__ import annotations

import contextvars
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_current_key: contextvars.ContextVar[str] = contextvars.ContextVar("reconcile_key", default="")
_current_controller: contextvars.ContextVar[str] = contextvars.ContextVar(
    "reconcile_controller", default=""
)


@contextmanager
def reconciling(controller: str, key: str) -> Iterator[None]:
    """The log context of one reconcile of ``key`` by ``controller``, on this thread."""
    key_token = _current_key.set(key)
    controller_token = _current_controller.set(controller)
    try:
        yield
    finally:
        _current_controller.reset(controller_token)
        _current_key.reset(key_token)


def current_key() -> str:
    """The key being reconciled on this thread, ``""`` outside a reconcile."""
    return _current_key.get()


def _annotate(record: logging.LogRecord) -> None:
    key = _current_key.get()
    controller = _current_controller.get()
    record.reconcile_key = key
    record.controller = controller
    record.reconcile_context = f"[{controller} {key}] " if key else ""


class ReconcileContextFilter(logging.Filter):
    """Adds ``reconcile_key``, ``controller`` and ``reconcile_context`` (``"[name ns/key] "`` or
    ``""``) to records. Attach it to handlers, e.g. with the format
    ``"%(levelname)s %(name)s: %(reconcile_context)s%(message)s"``."""

    def filter(self, record: logging.LogRecord) -> bool:
        _annotate(record)
        return True


_factory_installed = False
_factory_lock = threading.Lock()


def install_log_record_context() -> None:
    """Like :class:`ReconcileContextFilter` but for every record of the process, whatever
    handler and formatter end up printing it (wraps the log record factory once)."""
    global _factory_installed
    with _factory_lock:
        if _factory_installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: object, **kwargs: object) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _annotate(record)
            return record

        logging.setLogRecordFactory(factory)
        _factory_installed = True
