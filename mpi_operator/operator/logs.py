"""The operator's log lines on stderr, in the format ``--log-format`` names.

``text`` (the default) is klog's header, as kubeflow/mpi-operator writes it and as
training-operator's console logs read: ``I1128 01:08:20.123456   12345 main.py:312] msg``, so
that ``grep '^E'`` and klog-aware collectors keep working after a switch. ``json`` is one object
a line, for collectors that index fields. Either way a reconcile line names its job
(``mpijob``), and nothing a message quotes can start a line of its own.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Final

from mpi_operator.field_errors import one_line
from mpi_operator.runtime.log_context import install_log_record_context

# klog's severity letters; its verbose lines are Info lines.
_SEVERITY: Final = {"DEBUG": "I", "INFO": "I", "WARNING": "W", "ERROR": "E", "CRITICAL": "F"}


class TextLogFormatter(logging.Formatter):
    """klog's header, the message, then ``mpijob="ns/name"`` on a reconcile line; a traceback
    follows on lines indented by a tab."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = self.formatTime(record, "%m%d %H:%M:%S")
        severity = _SEVERITY.get(record.levelname, "I")
        line = (
            f"{severity}{stamp}.{int(record.created % 1 * 1e6):06d} {record.process:7d} "
            f"{record.filename}:{record.lineno}] {one_line(record.getMessage())}"
        )
        key = getattr(record, "reconcile_key", None)
        if key:
            line += f' mpijob="{one_line(key)}"'
        if record.exc_info:
            trace = self.formatException(record.exc_info).splitlines()
            line += "".join(f"\n\t{one_line(part)}" for part in trace)
        return line


class JsonLogFormatter(logging.Formatter):
    """One JSON object a line; ``mpijob`` names the job a reconcile line is about."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": f"{self.formatTime(record, '%Y-%m-%dT%H:%M:%S')}.{int(record.msecs):03d}",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        key = getattr(record, "reconcile_key", None)
        if key:
            line["mpijob"] = key
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line)


FORMATTERS: Final[dict[str, type[logging.Formatter]]] = {
    "text": TextLogFormatter,
    "json": JsonLogFormatter,
}


def configure_logging(verbosity: int, log_format: str) -> None:
    """Every record of the process, whichever logger writes it, goes to stderr in
    ``log_format``."""
    install_log_record_context()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(FORMATTERS[log_format]())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbosity >= 4 else logging.INFO)
    # urllib3 logs every retried connection at WARNING; the client reports failures itself.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
