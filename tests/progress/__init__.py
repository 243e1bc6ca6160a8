"""Tests of the progress core, run against the pure-Python modules and (in CI) the mypyc-compiled ones."""

import pytest

from aiotimely.progress import COMPILED

pure_only = pytest.mark.skipif(
    COMPILED, reason="replaces a function of the progress core (to plant a bug or count its steps), which "
    "compiled code does not see: it calls its own functions directly; the pure-Python run covers this test")
