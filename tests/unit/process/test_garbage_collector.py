"""The collector's settings the operator runs with."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from mpi_operator.operator.leading import YOUNG_COLLECTION_THRESHOLD, tune_garbage_collector


@pytest.fixture
def restored_collector() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


@pytest.mark.usefixtures("restored_collector")
def test_what_lives_at_start_is_frozen_and_young_collections_are_rarer() -> None:
    survivor = [object()]
    assert any(tracked is survivor for tracked in gc.get_objects())
    tune_garbage_collector()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold()[0] == YOUNG_COLLECTION_THRESHOLD > 700
    # Only the young threshold moves: the older generations keep CPython's defaults.
    assert gc.get_threshold()[1:] == (10, 10)
    # What lived before is out of the collector's walks.
    assert not any(tracked is survivor for tracked in gc.get_objects())
