"""The columnar package's shape, as tests/test_architecture.py checks the others': ``__all__`` lists exactly its
public names, and everything a user can call is typed."""

from __future__ import annotations

import pytest

pytest.importorskip("polars")

from tests import test_architecture as architecture  # noqa: E402


def test_all_lists_exactly_the_public_names():
    architecture.test_all_lists_exactly_the_public_names("aiotimely.columnar")


def test_every_public_function_and_method_is_typed():
    architecture.test_every_public_function_and_method_is_typed("aiotimely.columnar")


def test_from_arrow_is_a_name_of_aiotimely_without_importing_polars_until_asked_for():
    import aiotimely as at
    from aiotimely.columnar import from_arrow

    assert at.from_arrow is from_arrow
