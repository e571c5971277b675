"""Fixtures shared by the source tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An empty folder to list, with `tmp_path` around it as "outside"."""
    folder = tmp_path / "root"
    folder.mkdir()
    return folder
