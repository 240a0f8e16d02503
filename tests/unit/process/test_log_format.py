"""The operator's log lines: klog's text (the default) or JSON, on every line it writes."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mpi_operator.operator.logs import JsonLogFormatter, TextLogFormatter, configure_logging
from mpi_operator.operator.options import LOG_FORMATS, Options
from mpi_operator.testing.launch import operator_command

# klog's header: severity, mmdd, time to the microsecond, pid, file:line.
KLOG_LINE = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [\w.]+:\d+\] ")


def record(message: str, level: int = logging.INFO) -> logging.LogRecord:
    made = logging.LogRecord("mpi_operator", level, "/src/main.py", 7, message, None, None)
    made.created, made.msecs = 1_700_000_000.25, 250.0
    return made


def test_a_json_line_is_stamped_to_the_millisecond_and_names_its_job() -> None:
    made = record("synced")
    made.reconcile_key = "ns/pi"
    line = json.loads(JsonLogFormatter().format(made))
    assert line["ts"].endswith(":20.250"), line["ts"]
    assert (line["level"], line["msg"], line["mpijob"]) == ("info", "synced", "ns/pi")


def test_a_text_line_has_klogs_header() -> None:
    line = TextLogFormatter().format(record("synced", logging.WARNING))
    assert KLOG_LINE.match(line), line
    assert re.match(r"^W\d{4} \d\d:\d\d:20\.250000 ", line), line
    assert line.endswith(" main.py:7] synced")


def test_a_text_line_names_its_job_and_keeps_a_quoted_newline_on_the_line() -> None:
    made = record("create failed: bad\nE0101 00:00:00.000000 1 forged.go:1] owned")
    made.reconcile_key = "ns/pi"
    [line] = TextLogFormatter().format(made).splitlines()
    assert line.endswith(
        r'create failed: bad\nE0101 00:00:00.000000 1 forged.go:1] owned mpijob="ns/pi"'
    )


def test_a_traceback_follows_on_indented_lines() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        made = record("sync failed", logging.ERROR)
        made.exc_info = sys.exc_info()
    first, *trace = TextLogFormatter().format(made).splitlines()
    assert first.startswith("E") and first.endswith("] sync failed")
    assert trace and all(part.startswith("\t") for part in trace)
    assert trace[-1] == "\tValueError: boom"


@pytest.fixture
def root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.parametrize("log_format", LOG_FORMATS)
def test_every_logger_of_the_process_writes_in_the_format(
    capsys: pytest.CaptureFixture[str], root_logging: None, log_format: str
) -> None:
    configure_logging(0, log_format)
    logging.getLogger("mpi_operator.runtime.client").warning("slow answer")
    logging.getLogger("kubernetes.client.rest").error("refused")
    logging.getLogger("mpi_operator.controller").info("synced")
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 3
    if log_format == "json":
        assert [json.loads(line)["msg"] for line in lines] == ["slow answer", "refused", "synced"]
    else:
        assert all(KLOG_LINE.match(line) for line in lines), lines
        assert [line[0] for line in lines] == ["W", "E", "I"]
        assert lines[2].endswith("] synced")


@pytest.mark.parametrize("log_format", LOG_FORMATS)
def test_the_operator_process_writes_every_line_in_the_format(
    tmp_path: Path, log_format: str
) -> None:
    """Start-up, the klog flags it ignores and the error that stops it, from the real command."""
    argv = operator_command(
        Options(kubeconfig=str(tmp_path / "missing"), log_format=log_format), ["-logtostderr"]
    )
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path
    )
    lines = result.stderr.splitlines()
    assert result.returncode == 1 and len(lines) == 3, result.stderr
    if log_format == "json":
        levels = [json.loads(line)["level"] for line in lines]
        assert levels == ["info", "info", "error"]
    else:
        assert all(KLOG_LINE.match(line) for line in lines), lines
        assert [line[0] for line in lines] == ["I", "I", "E"]
    assert "cannot load the cluster configuration" in lines[2]


def test_the_default_is_klogs_text_as_upstreams() -> None:
    assert Options().log_format == "text"
