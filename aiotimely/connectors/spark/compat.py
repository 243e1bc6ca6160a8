"""The old flat modules (``aiotimely.connectors.spark_datasource``, ``spark_reader``, ``spark_cluster``), kept
as names for this package's modules: each offers every name of the modules it stands for."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

__all__ = ["forward"]


def forward(name: str, *modules: ModuleType) -> Callable[[str], Any]:
    """The ``__getattr__`` of the old module ``name``: any name it does not import itself comes from the first of
    ``modules`` that has it (the Spark-side classes, made on first access, among them), the very object."""

    def __getattr__(attribute: str) -> Any:
        for module in modules:
            try:
                return getattr(module, attribute)
            except AttributeError:
                pass
        raise AttributeError(f"module {name!r} has no attribute {attribute!r}")

    return __getattr__
