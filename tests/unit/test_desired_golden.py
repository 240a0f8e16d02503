"""The golden-file helper the desired-state tests rely on: it must fail loudly."""

from __future__ import annotations

from pathlib import Path

import golden
import pytest


@pytest.fixture
def golden_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(golden, "GOLDEN_ROOT", tmp_path)
    monkeypatch.delenv(golden.UPDATE_ENV, raising=False)
    return tmp_path


def test_missing_golden_file_fails_and_says_how_to_create_it(golden_root: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="missing: run the test with UPDATE_GOLDEN=1"):
        golden.assert_matches_golden("desired/absent.yaml", "a: 1\n")


def test_different_text_fails_with_a_diff(golden_root: Path) -> None:
    (golden_root / "x.yaml").write_text("a: 1\n")
    with pytest.raises(pytest.fail.Exception, match=r"(?s)differs.*-a: 1.*\+a: 2"):
        golden.assert_matches_golden("x.yaml", "a: 2\n")


def test_equal_text_passes(golden_root: Path) -> None:
    (golden_root / "x.yaml").write_text("a: 1\n")
    golden.assert_matches_golden("x.yaml", "a: 1\n")


def test_update_mode_writes_the_file_and_its_directories(
    golden_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(golden.UPDATE_ENV, "1")
    golden.assert_matches_golden("new/dir/x.yaml", "a: 2\n")
    assert (golden_root / "new" / "dir" / "x.yaml").read_text() == "a: 2\n"
