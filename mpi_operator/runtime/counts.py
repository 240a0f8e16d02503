"""Metrics counted from the process's first request on, kept without prometheus-client.

The client, leader election and the event recorder count before the Lease is held, and
importing prometheus-client (with the ``http.server`` its exposition loads) was a third of the
start's import time. The metrics server exposes every metric made here
(``health.start_metrics_server``), under the names and types dashboards already query; the
leader's own metrics are prometheus-client's.
"""

from __future__ import annotations

import threading


class Count:
    """A counter by label values: a label value per name in ``labelnames``, in that order."""

    def __init__(self, name: str, documentation: str, labelnames: tuple[str, ...] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = labelnames
        self._lock = threading.Lock()
        # A counter without labels is exposed at 0 before it counts, as prometheus-client's is.
        self._values: dict[tuple[str, ...], float] = {} if labelnames else {(): 0.0}
        EXPOSED.append(self)

    def inc(self, *labels: str) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name}: labels {self.labelnames}, given {labels}")
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + 1.0

    def value(self, *labels: str) -> float:
        with self._lock:
            return self._values.get(labels, 0.0)

    def samples(self) -> list[tuple[tuple[str, ...], float]]:
        with self._lock:
            return list(self._values.items())


class Level:
    """A gauge without labels."""

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0
        EXPOSED.append(self)

    def set(self, value: float) -> None:
        self.value = float(value)


EXPOSED: list[Count | Level] = []
"""Every metric made here, in the order made."""
