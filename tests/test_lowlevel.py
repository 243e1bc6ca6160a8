"""``aiotimely.lowlevel``: the engine's own names (the ``"timely"`` log, operators' ports, progress bookkeeping)
live there, as ``trio.lowlevel`` does; the top-level names they had still work, with a warning naming the new place,
and ``aiotimely.__all__`` keeps to what programs are written with."""

from __future__ import annotations

import ast
import importlib
import re
import warnings
from pathlib import Path

import pytest

import aiotimely as at
from aiotimely import lowlevel

ROOT = Path(__file__).resolve().parent.parent

MOVED = ["LogRegistry", "Logger", "TimelyEvent", "StartStop", "OperatesEvent", "ChannelsEvent", "ScheduleEvent",
         "MessagesEvent", "ProgressEvent", "PushProgressEvent", "CapabilityEvent", "ShutdownEvent", "ParkEvent",
         "InputPort", "OperatorOutput", "TimeOrder", "TimedOrder"]
"""The names that were at the top level before (``aiotimely.X``), now ``aiotimely.lowlevel.X``."""
BOTH = ["ChangeBatch", "MutableAntichain"]
"""Low-level names the API contract (design/API.md, "Time") keeps at the top level too, without a warning."""
HOMES = {"aiotimely.worker.logging": ["TIMELY", "LogRegistry", "Logger", "TimelyEvent", "StartStop", "OperatesEvent",
                                      "ChannelsEvent", "ScheduleEvent", "MessagesEvent", "ProgressEvent",
                                      "PushProgressEvent", "CapabilityEvent", "ShutdownEvent", "ParkEvent"],
         "aiotimely.progress": ["ChangeBatch", "MutableAntichain"],
         "aiotimely.dataflow.builder": ["OperatorBuilder"],
         "aiotimely.dataflow.ports": ["InputPort", "OperatorOutput", "Session", "TimeOrder", "TimedOrder"]}


def test_lowlevel_offers_the_engines_names_as_the_objects_of_their_own_modules():
    assert sorted(lowlevel.__all__) == sorted(n for names in HOMES.values() for n in names)
    for module, names in HOMES.items():
        home = importlib.import_module(module)
        for name in names:
            assert getattr(lowlevel, name) is getattr(home, name), name
    assert at.lowlevel is lowlevel                      # `import aiotimely as at` is enough for at.lowlevel.X


@pytest.mark.parametrize("name", MOVED)
def test_a_moved_top_level_name_warns_naming_its_new_place_and_is_the_same_object(name):
    with pytest.warns(DeprecationWarning, match=rf"aiotimely\.{name} is deprecated: use aiotimely\.lowlevel\.{name}$"
                      ) as caught:
        value = getattr(at, name)
    assert value is getattr(lowlevel, name)
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]   # the warning points at the caller


def test_from_import_of_a_moved_name_warns_too():
    with pytest.warns(DeprecationWarning, match=r"aiotimely\.lowlevel\.OperatesEvent"):
        from aiotimely import OperatesEvent
    assert OperatesEvent is lowlevel.OperatesEvent


def test_all_holds_only_the_user_facing_names_and_they_do_not_warn():
    assert not set(at.__all__) & set(MOVED)
    assert set(at.__all__) & set(lowlevel.__all__) == set(BOTH)
    assert not set(MOVED) & set(dir(at))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in at.__all__:
            getattr(at, name)
        for name in BOTH:
            assert getattr(at, name) is getattr(lowlevel, name)


def test_a_name_that_never_was_is_still_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'Operates'"):
        at.Operates  # noqa: B018
    with pytest.raises(AttributeError):
        at.TIMELY  # noqa: B018 - only ever in aiotimely.lowlevel


def _moved_uses(source: str) -> list[int]:
    """The lines of ``source`` (Python) that reach a moved name at the top level: ``at.X``, ``aiotimely.X``,
    ``from aiotimely import X``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and node.attr in MOVED and isinstance(node.value, ast.Name)
                and node.value.id in ("at", "aiotimely")):
            lines.append(node.lineno)
        elif (isinstance(node, ast.ImportFrom) and node.module == "aiotimely" and not node.level
              and any(alias.name in MOVED for alias in node.names)):
            lines.append(node.lineno)
    return lines


def test_the_repository_uses_the_new_place():
    """No program, test, example, benchmark or page's snippet reaches a moved name at the top level (it would
    warn)."""
    found = []
    for folder in ("aiotimely", "tests", "examples", "benchmarks", "docs"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path == Path(__file__).resolve():
                continue
            if path.suffix == ".py":
                sources = [path.read_text()]
            elif path.suffix == ".md":
                sources = re.findall(r"```python[^\n]*\n(.*?)```", path.read_text(), flags=re.S)
            else:
                continue
            found += [f"{path.relative_to(ROOT)}:{line}" for source in sources for line in _moved_uses(source)]
    assert found == []
