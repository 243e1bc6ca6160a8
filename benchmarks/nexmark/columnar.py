"""The NEXMark queries on the columnar API: Arrow batches and Polars expressions, once per batch.

Each ``qN(sources, params)`` takes the three input streams (:class:`Sources`: persons, auctions and bids as
columnar streams, one Arrow batch per kind and generator batch, at the batch's dataflow time) and returns a
columnar stream of result rows with the columns of :data:`~.reference.RESULTS` (Q0: a list of three streams).
Where the columnar API has no operator for a step (joins on columns; per-key state closed at a per-key time),
the step is written with ``map_batches`` or with :func:`.ordered.time_ordered` over the batches: the table in
docs/nexmark.md says which query does what.
"""

from __future__ import annotations

from typing import Any, Callable

import polars as pl

import aiotimely as at
from aiotimely.columnar import ArrowBatch, ColumnarStream

from .generator import Events, schemas
from .ordered import time_ordered
from .params import Params
from .reference import Q2_SKIP, Q3_CATEGORY, Q3_STATES

I64 = pl.Int64


class Sources:
    """The columnar input streams a query asks for, each made once (``at.from_arrow``), from this worker's share."""

    def __init__(self, scope: Any, events: Events) -> None:
        self.scope = scope
        self.events = events
        self._made: dict[str, ColumnarStream] = {}

    def _get(self, kind: str) -> ColumnarStream:
        stream = self._made.get(kind)
        if stream is None:
            worker = self.scope.worker
            times, frames = self.events.frame_batches(kind, worker.index, worker.peers)
            stream = self._made[kind] = at.from_arrow(self.scope, frames, times=times, schema=schemas()[kind],
                                                      name=kind.title())
        return stream

    @property
    def persons(self) -> ColumnarStream:
        return self._get("persons")

    @property
    def auctions(self) -> ColumnarStream:
        return self._get("auctions")

    @property
    def bids(self) -> ColumnarStream:
        return self._get("bids")


def concat(first: ColumnarStream, second: ColumnarStream) -> ColumnarStream:
    """Both streams' batches as one columnar stream (their schemas must be equal): there is no
    ``ColumnarStream.concat`` yet, so the underlying record-API streams are concatenated."""
    assert first.schema == second.schema, (first.schema, second.schema)
    return ColumnarStream(first.stream.concat(second.stream), first.schema)


def q0(src: Sources, params: Params) -> list[ColumnarStream]:
    """Passthrough: the three streams, unchanged."""
    return [src.persons, src.auctions, src.bids]


def q1(src: Sources, params: Params) -> ColumnarStream:
    return src.bids.select("auction", "bidder", pl.col("price") * 89 // 100, "date_time", name="Euros")


def q2(src: Sources, params: Params) -> ColumnarStream:
    return src.bids.filter(pl.col("auction") % Q2_SKIP == 0).select("auction", "price")


Q3_SCHEMA = pl.Schema({"key": I64, "name": pl.String, "city": pl.String, "state": pl.String, "auction": I64})
Q3_OUT = pl.Schema({"name": pl.String, "city": pl.String, "state": pl.String, "auction": I64})


class Q3Join:
    """The unbounded person-auction join, per worker, on frames: each pair is emitted once, when the later of
    its two rows comes, so the rows it gives do not depend on the order batches arrive in (which is why a
    ``map_batches`` with state of its own is exact here; its state is not snapshotted)."""

    def __init__(self) -> None:
        self.people = pl.DataFrame(schema={"key": I64, "name": pl.String, "city": pl.String, "state": pl.String})
        self.sold = pl.DataFrame(schema={"key": I64, "auction": I64})

    def __call__(self, frame: pl.DataFrame) -> pl.DataFrame:
        is_person = pl.col("auction").is_null()
        people = frame.filter(is_person).select("key", "name", "city", "state")
        sold = frame.filter(~is_person).select("key", "auction")
        before = self.sold
        out = []
        if sold.height:       # new auctions: with every person so far, and the new ones
            self.sold = pl.concat([before, sold])
            out.append(sold.join(pl.concat([self.people, people]), on="key"))
        if people.height:     # new people: with the auctions of earlier batches
            self.people = pl.concat([self.people, people])
            out.append(before.join(people, on="key"))
        if not out:
            return pl.DataFrame(schema=Q3_OUT)
        return pl.concat([f.select("name", "city", "state", "auction") for f in out])


def q3(src: Sources, params: Params) -> ColumnarStream:
    """Local item suggestion: people (OR, ID, CA) and auctions (category 10) as one frame keyed by person id /
    seller, exchanged by it, joined by :class:`Q3Join` in ``map_batches``."""
    # (a column called "name" is made with alias: select's name= is the operator's)
    people = src.persons.filter(pl.col("state").is_in(list(Q3_STATES))).select(
        pl.col("id").alias("key"), "name", "city", "state", auction=pl.lit(None, I64))
    sold = src.auctions.filter(pl.col("category") == Q3_CATEGORY).select(
        pl.col("seller").alias("key"), pl.lit(None, pl.String).alias("name"), city=pl.lit(None, pl.String),
        state=pl.lit(None, pl.String), auction="id")
    return concat(people, sold).exchange("key").map_batches(Q3Join(), schema=Q3_OUT, name="Q3Join")


WINNERS = pl.Schema({"auction": I64, "category": I64, "seller": I64, "price": I64, "expires": I64})


class WinningBids:
    """Beam's WinningBids on frames (as :class:`.records.WinningBids`, for :func:`.ordered.time_ordered`): the
    open auctions are a frame with their best valid price so far; each time's bids are joined to it, the valid
    ones' maximum per auction merged in; once the frontier reaches an auction's ``expires`` it closes. Output
    batches have the columns of :data:`WINNERS`, sent at the least ``expires`` of what closes."""

    def __init__(self) -> None:
        self.open = pl.DataFrame(schema={"id": I64, "category": I64, "seller": I64, "date_time": I64,
                                         "expires": I64, "reserve": I64, "best": I64})
        self.first: int | None = None

    def apply(self, time: int, inputs: list[list[Any]]) -> list[tuple[int, Any]]:
        auctions, bids = inputs
        if auctions:
            new = pl.concat([b.frame for b in auctions]).select(
                "id", "category", "seller", "date_time", "expires", "reserve", best=pl.lit(None, I64))
            self.open = pl.concat([self.open, new])
        if bids and self.open.height:
            frame = bids[0].frame if len(bids) == 1 else pl.concat([b.frame for b in bids])
            best = (frame.lazy().select("auction", "price", bid_time="date_time")
                    .join(self.open.lazy().select("id", "date_time", "expires", "reserve"), left_on="auction",
                          right_on="id")
                    .filter((pl.col("bid_time") >= pl.col("date_time")) & (pl.col("bid_time") < pl.col("expires"))
                            & (pl.col("price") >= pl.col("reserve")))
                    .group_by("auction").agg(pl.col("price").max().alias("new"))).collect()
            if best.height:
                self.open = (self.open.join(best, left_on="id", right_on="auction", how="left")
                             .with_columns(best=pl.max_horizontal("best", "new")).drop("new"))
        self.first = self.open["expires"].min() if self.open.height else None   # type: ignore[assignment]
        return []

    def close(self, reached: int | None) -> list[tuple[int, Any]]:
        if self.first is None or (reached is not None and self.first > reached):
            return []
        first = self.first
        if reached is None:
            due, self.open = self.open, self.open.head(0)
        else:
            is_due = pl.col("expires") <= reached
            due, self.open = self.open.filter(is_due), self.open.filter(~is_due)
        self.first = self.open["expires"].min() if self.open.height else None   # type: ignore[assignment]
        winners = due.filter(pl.col("best").is_not_null()).select(
            auction="id", category="category", seller="seller", price="best", expires="expires")
        return [(first, ArrowBatch(winners))] if winners.height else []

    def hold(self) -> int | None:
        return self.first


def winning_bids(src: Sources) -> ColumnarStream:
    """The winning bids: auctions and bids exchanged by auction id, then :class:`WinningBids`."""
    stream = time_ordered([src.auctions.exchange("id").stream, src.bids.exchange("auction").stream], WinningBids(),
                          name="WinningBids")
    return ColumnarStream(stream, WINNERS)


def q4(src: Sources, params: Params) -> ColumnarStream:
    return (winning_bids(src)
            .window(at.Sliding(params.size, params.period), pl.len().cast(I64).alias("n"),
                    pl.col("price").sum().alias("total"), key="category", time="expires", name="AveragePerCategory")
            .with_columns(mean=pl.col("total") / pl.col("n")))


def q5(src: Sources, params: Params) -> ColumnarStream:
    """Hot items. Each batch's bids are first counted per auction and pane of ``period`` ms (a combiner before
    the exchange, which the columnar window has no option for yet): a sliding window's count is then the sum of
    its panes' counts, and the window keeps a row per auction and pane instead of one per bid. Then the most
    per window, by a ``reduce`` per window at the time its counts come out."""
    period = params.period
    assert params.size % period == 0, "panes need the window size to be a multiple of the period"
    panes = src.bids.map_batches(
        lambda df: df.group_by("auction", pane=pl.col("date_time") - pl.col("date_time") % period).agg(
            count=pl.len().cast(I64)),
        schema={"auction": I64, "pane": I64, "count": I64}, name="CountPerPane")
    counts = panes.window(at.Sliding(params.size, period), pl.col("count").sum(), key="auction", time="pane",
                          name="BidsPerAuction")
    return (counts
            .reduce(pl.col("auction").filter(pl.col("count") == pl.col("count").max()),
                    pl.col("count").max(), key=["window_start", "window_end"], name="Hottest")
            .explode("auction")
            .select("window_start", "window_end", "auction", "count"))


Q6_STATE = {"seller": I64, "expires": I64, "auction": I64, "price": I64}


class LastTen:
    """Q6 on frames, for :func:`.ordered.time_ordered`: winning bids wait until the frontier passes their
    ``expires`` (they come at that time or earlier, so by then every one before them is in), then, in order of
    ``(expires, auction)``, each gets the count, sum and mean of its seller's last 10 prices (a cumulative sum
    over each seller's rows: the 10 kept from before, then the new ones)."""

    def __init__(self) -> None:
        self.waiting: list[pl.DataFrame] = []
        self.first: int | None = None
        self.kept = pl.DataFrame(schema=Q6_STATE)

    def apply(self, time: int, inputs: list[list[Any]]) -> list[tuple[int, Any]]:
        frames = [b.frame.select(*Q6_STATE) for b in inputs[0]]
        self.waiting.extend(frames)
        low = min(f["expires"].min() for f in frames)      # type: ignore[type-var]
        self.first = low if self.first is None else min(self.first, low)   # type: ignore[type-var]
        return []

    def close(self, reached: int | None) -> list[tuple[int, Any]]:
        if self.first is None or (reached is not None and self.first >= reached):
            return []
        rows = pl.concat(self.waiting)
        if reached is None:
            due, rest = rows, rows.head(0)
        else:
            is_due = pl.col("expires") < reached
            due, rest = rows.filter(is_due), rows.filter(~is_due)
        self.waiting = [rest] if rest.height else []
        self.first = rest["expires"].min() if rest.height else None     # type: ignore[assignment]
        first = due["expires"].min()
        both = (pl.concat([self.kept.with_columns(new=pl.lit(False)), due.with_columns(new=pl.lit(True))])
                .sort("seller", "expires", "auction"))
        sums = pl.col("price").cum_sum().over("seller")
        position = pl.int_range(pl.len()).over("seller")
        both = both.with_columns(
            total=sums - sums.shift(10).over("seller").fill_null(0),
            n=pl.min_horizontal(position + 1, 10).cast(I64))
        self.kept = both.select(*Q6_STATE).group_by("seller", maintain_order=True).tail(10)
        out = both.filter("new").select("seller", "auction", "expires", "n", "total",
                                         mean=pl.col("total") / pl.col("n"))
        return [(first, ArrowBatch(out))]    # type: ignore[list-item]

    def hold(self) -> int | None:
        return self.first


def q6(src: Sources, params: Params) -> ColumnarStream:
    stream = time_ordered([winning_bids(src).exchange("seller").stream], LastTen(), name="LastTen")
    return ColumnarStream(stream, pl.Schema({"seller": I64, "auction": I64, "expires": I64, "n": I64, "total": I64,
                                             "mean": pl.Float64}))


BID_OUT = ("auction", "bidder", "price", "date_time")


def q7(src: Sources, params: Params) -> ColumnarStream:
    """Highest bid. Each batch keeps only its bids at the highest price of their window (a combiner before the
    window, with ``map_batches``), then one unkeyed tumbling window (on one worker) keeps those at its highest."""
    size = params.size
    tops = src.bids.select(*BID_OUT).map_batches(
        lambda df: df.filter(pl.col("price") == pl.col("price").max().over(pl.col("date_time") // size)),
        schema={c: I64 for c in BID_OUT}, name="TopPerBatch")
    highest = pl.struct(*BID_OUT).filter(pl.col("price") == pl.col("price").max()).alias("top")
    return (tops.window(at.Tumbling(size), highest, time="date_time", name="Highest")
            .explode("top")
            .select("window_start", "window_end", pl.col("top").struct.unnest()))


def q8(src: Sources, params: Params) -> ColumnarStream:
    """Monitor new users: people and auctions as one frame keyed by person id / seller, a tumbling window per key
    gathering the names and the reserves, then every pair (two explodes)."""
    people = src.persons.select(pl.col("id").alias("key"), "name", reserve=pl.lit(None, I64), date_time="date_time")
    sold = src.auctions.select(pl.col("seller").alias("key"), pl.lit(None, pl.String).alias("name"), "reserve",
                               "date_time")
    return (concat(people, sold)
            .window(at.Tumbling(params.size), pl.col("name").drop_nulls(), pl.col("reserve").drop_nulls(), key="key",
                    time="date_time", name="NewUsers")
            .filter((pl.col("name").list.len() > 0) & (pl.col("reserve").list.len() > 0))
            .explode("name").explode("reserve")
            .select("window_start", "window_end", pl.col("key").alias("id"), "name", "reserve"))


QUERIES: dict[int, Callable[[Sources, Params], Any]] = {0: q0, 1: q1, 2: q2, 3: q3, 4: q4, 5: q5, 6: q6, 7: q7, 8: q8}
