"""Transformers' own `ModelTesterMixin` battery over the option matrix: every variant passes wherever vanilla
(this package's class with every option off) passes. Slow: about 40 s a variant and family; the first run
downloads the installed Transformers version's sdist from PyPI (skipped when that is not possible)."""

from __future__ import annotations

import io
import unittest

import pytest
from model_matrix import FAMILIES, OPTION_MATRIX

pytestmark = pytest.mark.slow

_OUTCOMES: dict[tuple[str, str], tuple[set[str], int]] = {}


def _failures(family: str, name: str) -> tuple[set[str], int]:
    """Names of the battery's tests that fail or error for one variant, and how many ran."""
    if (family, name) not in _OUTCOMES:
        pytest.importorskip("parameterized", reason="Transformers' test_modeling_common needs `parameterized`")
        from transformers_battery import battery_case

        try:
            case = battery_case(family, name, OPTION_MATRIX[name])
        except Exception as error:  # no network to PyPI, or an sdist without the common tests
            pytest.skip(f"Transformers' common tests are not available: {error}")
        result = unittest.TextTestRunner(stream=io.StringIO(), verbosity=0).run(
            unittest.defaultTestLoader.loadTestsFromTestCase(case)
        )
        failed = {test.id().rsplit(".", 1)[-1] for test, _ in result.failures + result.errors}
        _OUTCOMES[(family, name)] = failed, result.testsRun
    return _OUTCOMES[(family, name)]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("options", [name for name in OPTION_MATRIX if name != "vanilla"])
def test_every_variant_passes_the_transformers_battery_where_vanilla_does(family, options):
    """(The option sets a family does not define are left out, as everywhere: tests/conftest.py.)"""
    vanilla_failures, ran = _failures(family, "vanilla")
    failures, variant_ran = _failures(family, options)
    assert variant_ran == ran > 100
    assert failures <= vanilla_failures, sorted(failures - vanilla_failures)
