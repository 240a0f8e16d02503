"""Golden files: rendered objects compared as YAML text with files under tests/unit/golden/.

After an intended change, ``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit`` rewrites the
files; review their diff like code. A missing file fails until it is created that way.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

import pytest

GOLDEN_ROOT = Path(__file__).parent / "golden"
UPDATE_ENV = "UPDATE_GOLDEN"


def assert_matches_golden(relative_path: str, text: str) -> None:
    """``text`` must equal the golden file; ``UPDATE_GOLDEN=1`` writes it instead."""
    path = GOLDEN_ROOT / relative_path
    if os.environ.get(UPDATE_ENV) == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    if not path.exists():
        pytest.fail(
            f"golden file {path} is missing: run the test with {UPDATE_ENV}=1 to create it, "
            "then review it",
            pytrace=False,
        )
    expected = path.read_text()
    if text != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                text.splitlines(keepends=True),
                fromfile=f"{relative_path} (golden)",
                tofile=f"{relative_path} (rendered)",
            )
        )
        pytest.fail(
            f"rendered output differs from {path}; if the change is intended, rerun with "
            f"{UPDATE_ENV}=1 and review the diff:\n{diff}",
            pytrace=False,
        )
