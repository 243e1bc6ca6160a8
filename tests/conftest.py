"""Shared fixtures: every execute-based test runs on asyncio and on uvloop."""

from __future__ import annotations

import pytest

import aiotimely as at


@pytest.fixture(params=["asyncio", "uvloop"])
def loop(request):
    return request.param


@pytest.fixture
def run(loop):
    """``run(build, workers=1)``: execute on this test's event loop."""

    def run(build, workers=1):
        return at.execute(build, workers=workers, loop=loop)

    return run
