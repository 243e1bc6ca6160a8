"""Build aiotimely: the package is pure Python; a wheel also gets its progress core compiled with mypyc.

``pip install aiotimely`` (or ``pip install .``) compiles the modules in :data:`COMPILED_MODULES` with mypyc, the
same source turned into C extensions, which run the progress core 10-40% faster. Without a C compiler (or if
mypyc fails) the build says so and installs the pure-Python package, which is complete on its own. An
editable install (``pip install -e .``) stays pure, so that an edit to a module takes effect at once.

Environment: ``AIOTIMELY_PURE=1`` never compiles; ``AIOTIMELY_COMPILE=1`` makes a failure to compile an error
instead of a fallback (CI uses it to check the compiled build).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

COMPILED_MODULES = [
    "aiotimely/progress/batch.py",
    "aiotimely/progress/frontier.py",
    "aiotimely/progress/location.py",
    "aiotimely/progress/operate.py",
    "aiotimely/progress/reachability.py",
    "aiotimely/progress/subgraph.py",
]

REQUIRED = os.environ.get("AIOTIMELY_COMPILE") == "1"


def _fallback(what: str, exc: BaseException) -> None:
    if REQUIRED:
        raise RuntimeError(f"aiotimely: {what} failed and AIOTIMELY_COMPILE=1 asks for the compiled build") from exc
    print(f"aiotimely: {what} failed ({type(exc).__name__}: {exc}); installing the pure-Python package",
          file=sys.stderr)


def compiled_extensions() -> list[Any]:
    """The mypyc extensions to build, or none (pure Python): see the module's docstring for when."""
    if os.environ.get("AIOTIMELY_PURE") == "1" or "editable_wheel" in sys.argv or "develop" in sys.argv:
        return []
    try:
        from mypyc.build import mypycify

        # The progress core imports only the standard library, msgpack and aiotimely.errors; the rest of the
        # package (connectors and their optional libraries) is only read for types, not compiled.
        return list(mypycify([*COMPILED_MODULES, "--ignore-missing-imports", "--follow-imports=silent"],
                             opt_level="3", group_name="aiotimely_progress"))
    except (Exception, SystemExit) as exc:  # mypyc reports type errors by exiting
        _fallback("compiling the progress core with mypyc", exc)
        return []


class OptionalBuildExt(build_ext):
    """Build the compiled modules all or none: a compiler missing or failing leaves the pure package."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            for path in self.get_outputs():  # a half-built set would not import: remove what was built
                if os.path.exists(path):
                    os.remove(path)
            _fallback("building the compiled progress core (a C compiler is needed)", exc)


setup(ext_modules=compiled_extensions(), cmdclass={"build_ext": OptionalBuildExt})
