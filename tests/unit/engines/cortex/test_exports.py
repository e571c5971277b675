"""The packages' public surfaces: `__all__` complete and in ruff's order (constants, classes, functions)."""

from __future__ import annotations

import types

import pytest

import engines.cortex
import tinymemory_ingest.cortex_double


def _ruff_order(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2), name


@pytest.mark.parametrize("package", [engines.cortex, tinymemory_ingest.cortex_double])
def test_all_is_sorted_and_complete(package: types.ModuleType) -> None:
    exported = {k for k, v in vars(package).items() if not k.startswith("_") and not isinstance(v, types.ModuleType)}
    assert package.__all__ == sorted(package.__all__, key=_ruff_order)
    assert exported == set(package.__all__)
