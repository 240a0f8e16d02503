"""The operator's JSON log lines."""

from __future__ import annotations

import json
import logging

from mpi_operator.operator.main import JsonLogFormatter


def test_a_line_is_stamped_to_the_millisecond() -> None:
    record = logging.LogRecord("mpi_operator", logging.INFO, __file__, 1, "synced", None, None)
    record.created = 1_700_000_000.25
    record.msecs = 250.0
    line = json.loads(JsonLogFormatter().format(record))
    assert line["ts"].endswith(":20.250"), line["ts"]
    assert (line["level"], line["msg"]) == ("info", "synced")
