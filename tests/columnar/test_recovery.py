"""Columnar windows keep their open windows' rows through the recovery layer: a crash mid-window and a resume, on
the same or another number of workers, give the crash-free windows (each window sent with its crash-free value;
those sent before the snapshot resumed from are not sent again)."""

from __future__ import annotations

import pytest

pl = pytest.importorskip("polars")

import aiotimely as at  # noqa: E402
from tests.recovery.common import numbers_source, run  # noqa: E402

SPECS = {"tumbling": at.Tumbling(8), "sliding": at.Sliding(9, 4), "sessions": at.Sessions(2)}
SCHEMA = {"k": pl.Int64, "ts": pl.Int64, "x": pl.Int64}


def event(n: int) -> tuple[int, int, int]:
    """Number ``n`` (at dataflow time ``n // 10``) as a row: a key, an event time up to 3 before or 1 after its
    dataflow time (some rows late with lateness 1), and ``n``."""
    return (n % 7, n // 10 + n % 5 - 3, n)


def factory(spec_name: str, crash_at: int | None, outputs: list, keyed: bool = True, pace: float = 0.0):
    def build(worker: at.Worker) -> None:
        def make(scope):
            rows = (at.source(scope, "Numbers", numbers_source(worker, pace=pace, crash_at=crash_at))
                    .map(event).columnar(SCHEMA))
            results, late = rows.window(SPECS[spec_name], at.Agg.count(), pl.col("x").sum().alias("total"),
                                        key="k" if keyed else None, time="ts", lateness=1, late="stream")
            results.records().inspect(lambda r: outputs.append(("window", r)))
            late.records().inspect(lambda r: outputs.append(("late", r)))

        worker.dataflow(make, name="columnar-windows")

    return build


def windows(outputs: list) -> dict:
    """Window -> its values as sent (each window once in a crash-free run)."""
    seen: dict = {}
    for kind, row in outputs:
        if kind == "window":
            seen.setdefault(row[:-2], set()).add(row[-2:])
    return seen


@pytest.mark.parametrize("spec_name", list(SPECS))
@pytest.mark.parametrize("keyed, workers", [(True, 1), (True, 3), (False, 2)])
def test_a_crash_and_a_resume_give_the_crash_free_windows(tmp_path, spec_name, keyed, workers):
    truth: list = []
    at.execute(factory(spec_name, None, truth, keyed), loop="asyncio")
    expected = windows(truth)
    assert all(len(values) == 1 for values in expected.values())
    assert any(kind == "late" for kind, _ in truth)
    seen: list = []
    with pytest.raises(at.DataflowError, match="crashed at 350"):
        run(factory(spec_name, 350, seen, keyed, pace=0.002), tmp_path, every=4)
    before = windows(seen)
    assert len(before) < len(expected)
    assert before or (spec_name == "sessions" and not keyed)   # (one key's rows, dense: one session till the end)
    run(factory(spec_name, None, seen, keyed, pace=0.002), tmp_path, workers=workers, every=4)
    assert windows(seen) == expected                 # every window, each with its crash-free value
