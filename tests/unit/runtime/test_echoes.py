"""Telling our own writes' watch events from changes."""

from __future__ import annotations

from mpi_operator.runtime.echoes import OwnWrites
from mpi_operator.runtime.objects import Object


def pod(version: str, name: str = "pi-worker-0") -> Object:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}}


def test_the_event_of_our_write_is_an_echo_once() -> None:
    own = OwnWrites()
    own.wrote("ns/pi", "pods", "ns", "pi-worker-0", "5")
    assert not own.is_echo("configmaps", pod("5"))  # another kind of the same name
    assert own.is_echo("pods", pod("5"))
    assert not own.is_echo("pods", pod("5"))
    assert len(own) == 0


def test_a_later_version_is_a_change_and_forgets_our_write() -> None:
    own = OwnWrites()
    own.wrote("ns/pi", "pods", "ns", "pi-worker-0", "5")
    assert not own.is_echo("pods", pod("6"))
    assert len(own) == 0


def test_while_a_sync_waits_for_the_caches_every_event_counts() -> None:
    own = OwnWrites()
    own.wrote("ns/pi", "pods", "ns", "pi-worker-0", "5")
    own.waiting("ns/pi", True)
    assert not own.is_echo("pods", pod("5"))
    own.waiting("ns/pi", False)
    own.wrote("ns/pi", "pods", "ns", "pi-worker-0", "7")
    assert own.is_echo("pods", pod("7"))


def test_a_gone_job_takes_its_writes_along_and_only_its_own() -> None:
    own = OwnWrites()
    own.wrote("ns/pi", "pods", "ns", "pi-worker-0", "5")
    own.wrote("ns/pi", "mpijobs", "ns", "pi", "6")
    own.wrote("ns/other", "pods", "ns", "other-worker-0", "7")
    own.forget("ns/pi")
    assert len(own) == 1
    assert own.is_echo("pods", pod("7", "other-worker-0"))
