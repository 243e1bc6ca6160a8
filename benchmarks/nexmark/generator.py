"""A deterministic NEXMark event generator: persons, auctions and bids with event times in milliseconds.

It follows Beam's NEXMark generator (``org.apache.beam.sdk.nexmark.sources.generator``) in what shapes the
queries' results:

* event ``n`` (from 0) is, by ``n % 50``: a person (0), an auction (1..3) or a bid (4..49): 1 : 3 : 46;
* its time is ``first_ms + (n * 1_000_000 // rate) // 1000`` (``rate`` events a second; Beam's default 10,000),
  so times never decrease;
* ids: person ``1000 + n // 50``; auction ``1000 + `` the number of auctions before it; categories ``10..14``;
* an auction's seller is, 3 times in 4, the *hot seller* (the first person of the last block of 100), else one
  of the last 1,000 people (or 10 not yet born); it expires after ``1 + uniform(2 * horizon)`` ms, where the
  horizon is the time 100 auctions take to come (Beam's ``nextAuctionLengthMs``: ~167 ms at 10,000 events/s);
  its reserve is its initial bid plus a price;
* a bid's auction is, 1 time in 2, the *hot auction* (the first of the last block of 100 auctions), else one of
  the last 100 auctions (or 10 not yet created); its bidder, 3 times in 4, the hot bidder (the second person of
  the last block of 100), else as for sellers; prices are ``round(10 ** (6 * u) * 100)`` cents;
* persons' states and cities and names are Beam's lists.

What differs from Beam, and why: one ``random.Random(seed)`` drawn in event order (Beam seeds a ``Random`` per
event, so that sources can split the stream; one stream is enough here and much faster in Python); no
``extra`` padding field and shorter random strings (they only add bytes no query reads); channels and URLs from
small pools. The columns and the records come from the same lists, so both APIs see identical data.

The stream is cut into batches of ``batch`` events; a batch's dataflow time is its first event's time, so no
event is earlier than its batch (nothing is ever late) and batch times strictly increase (checked).
"""

from __future__ import annotations

import random
from typing import Any

PERSON_FIELDS = ("id", "name", "email", "credit_card", "city", "state", "date_time")
AUCTION_FIELDS = ("id", "item_name", "description", "initial_bid", "reserve", "date_time", "expires", "seller",
                  "category")
BID_FIELDS = ("auction", "bidder", "price", "channel", "url", "date_time")

# field positions in the records (plain tuples in the orders above)
P_ID, P_NAME, P_EMAIL, P_CARD, P_CITY, P_STATE, P_TIME = range(7)
A_ID, A_ITEM, A_DESC, A_INITIAL, A_RESERVE, A_TIME, A_EXPIRES, A_SELLER, A_CATEGORY = range(9)
B_AUCTION, B_BIDDER, B_PRICE, B_CHANNEL, B_URL, B_TIME = range(6)

PERSON_PROPORTION, AUCTION_PROPORTION, BID_PROPORTION = 1, 3, 46
TOTAL_PROPORTION = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION
FIRST_PERSON_ID = FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID, NUM_CATEGORIES = 10, 5
NUM_ACTIVE_PEOPLE, PERSON_ID_LEAD = 1000, 10
NUM_IN_FLIGHT_AUCTIONS, AUCTION_ID_LEAD = 100, 10
HOT_AUCTION_RATIO, HOT_SELLERS_RATIO, HOT_BIDDERS_RATIO = 2, 4, 4      # Beam's defaults: 1 - 1/ratio are hot
HOT_BLOCK = 100                                                          # Beam's HOT_{AUCTION,SELLER,BIDDER}_RATIO

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
             "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")


def last_person(n: int) -> int:
    """The base-0 id of the last person at or before event ``n``."""
    return n // TOTAL_PROPORTION


def last_auction(n: int) -> int:
    """The base-0 id of the last auction at or before event ``n`` (-1 before the first)."""
    epoch, offset = divmod(n, TOTAL_PROPORTION)
    if offset < PERSON_PROPORTION:
        epoch, offset = epoch - 1, AUCTION_PROPORTION - 1
    elif offset >= PERSON_PROPORTION + AUCTION_PROPORTION:
        offset = AUCTION_PROPORTION - 1
    else:
        offset -= PERSON_PROPORTION
    return epoch * AUCTION_PROPORTION + offset


class Events:
    """The generated events: each kind's columns (lists, in event order), and the batches: ``times[k]`` is batch
    ``k``'s dataflow time, ``bounds[kind][k]`` its rows of that kind (``(lo, hi)``)."""

    def __init__(self, persons: dict[str, list[Any]], auctions: dict[str, list[Any]], bids: dict[str, list[Any]],
                 times: list[int], bounds: dict[str, list[tuple[int, int]]], config: dict[str, int]) -> None:
        self.columns = {"persons": persons, "auctions": auctions, "bids": bids}
        self.times = times
        self.bounds = bounds
        self.config = config
        self._records: dict[str, list[tuple[Any, ...]]] = {}
        self._frames: dict[str, Any] = {}

    @property
    def events(self) -> int:
        return self.config["events"]

    def records(self, kind: str) -> list[tuple[Any, ...]]:
        """Every record of ``kind`` (``"persons"``, ``"auctions"``, ``"bids"``) as a tuple, in event order."""
        rows = self._records.get(kind)
        if rows is None:
            rows = self._records[kind] = list(zip(*self.columns[kind].values(), strict=True))
        return rows

    def frame(self, kind: str) -> Any:
        """Every record of ``kind`` as one Polars frame (the schema of :func:`schemas`)."""
        frame = self._frames.get(kind)
        if frame is None:
            import polars as pl

            frame = self._frames[kind] = pl.DataFrame(self.columns[kind], schema=schemas()[kind])
        return frame

    def record_batches(self, worker: int = 0, workers: int = 1) -> list[tuple[int, dict[str, list[Any]]]]:
        """``(time, {kind: records})`` for every ``workers``-th batch from ``worker`` (its share)."""
        out = []
        for k in range(worker, len(self.times), workers):
            out.append((self.times[k], {kind: self.records(kind)[lo:hi]
                                        for kind, (lo, hi) in ((kd, self.bounds[kd][k]) for kd in KINDS)}))
        return out

    def frame_batches(self, kind: str, worker: int = 0, workers: int = 1) -> tuple[list[int], list[Any]]:
        """``(times, frames)`` of kind ``kind`` for every ``workers``-th batch from ``worker`` (zero-copy slices;
        a batch with no rows of that kind is left out)."""
        frame, times, frames = self.frame(kind), [], []
        for k in range(worker, len(self.times), workers):
            lo, hi = self.bounds[kind][k]
            if hi > lo:
                times.append(self.times[k])
                frames.append(frame.slice(lo, hi - lo))
        return times, frames


KINDS = ("persons", "auctions", "bids")


def schemas() -> dict[str, Any]:
    """The Polars schema of each kind (columns as :data:`PERSON_FIELDS` ..., times and ids ``Int64``)."""
    import polars as pl

    i64, s = pl.Int64, pl.String
    return {
        "persons": pl.Schema({"id": i64, "name": s, "email": s, "credit_card": s, "city": s, "state": s,
                              "date_time": i64}),
        "auctions": pl.Schema({"id": i64, "item_name": s, "description": s, "initial_bid": i64, "reserve": i64,
                               "date_time": i64, "expires": i64, "seller": i64, "category": i64}),
        "bids": pl.Schema({"auction": i64, "bidder": i64, "price": i64, "channel": s, "url": s, "date_time": i64}),
    }


def generate(events: int, *, rate: int = 10_000, seed: int = 0, batch: int = 10_000, first_ms: int = 0) -> Events:
    """``events`` NEXMark events at ``rate`` events a second, from ``seed``, cut into batches of ``batch``."""
    if batch * 1000 < rate:
        raise ValueError(f"a batch of {batch} events at {rate} events/s spans less than 1 ms: batch times would "
                         f"repeat; use batches of at least {-(-rate // 1000)} events")
    rnd = random.Random(seed)
    rand, randrange, choice = rnd.random, rnd.randrange, rnd.choice
    delay_us = 1_000_000 / rate

    def ms(n: int) -> int:
        return first_ms + int(n * delay_us) // 1000

    persons: dict[str, list[Any]] = {f: [] for f in PERSON_FIELDS}
    auctions: dict[str, list[Any]] = {f: [] for f in AUCTION_FIELDS}
    bids: dict[str, list[Any]] = {f: [] for f in BID_FIELDS}
    b_auction, b_bidder, b_price = bids["auction"], bids["bidder"], bids["price"]
    b_channel, b_url, b_time = bids["channel"], bids["url"], bids["date_time"]
    cold_channels = [f"channel-{i}" for i in range(100)]
    hot_urls = [f"https://www.nexmark.com/{c.lower()}/item.htm?query=1" for c in HOT_CHANNELS]
    cold_urls = [f"https://www.nexmark.com/channel/{i}/item.htm?query=1&channel_id={i}" for i in range(100)]
    words = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "su", "ti") for b in ("x", "yz", "qw", "er")]
    events_for_auctions = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION // AUCTION_PROPORTION

    def next_person(n: int) -> int:
        people = last_person(n) + 1
        active = min(people, NUM_ACTIVE_PEOPLE)
        return people - active + randrange(active + PERSON_ID_LEAD)

    def price() -> int:
        return round(10.0 ** (rand() * 6.0) * 100.0)

    for n in range(events):
        offset = n % TOTAL_PROPORTION
        t = ms(n)
        if offset >= PERSON_PROPORTION + AUCTION_PROPORTION:       # a bid
            if randrange(HOT_AUCTION_RATIO) > 0:
                auction = (last_auction(n) // HOT_BLOCK) * HOT_BLOCK
            else:
                high = last_auction(n)
                low = max(high - NUM_IN_FLIGHT_AUCTIONS, 0)
                auction = low + randrange(high - low + 1 + AUCTION_ID_LEAD)
            if randrange(HOT_BIDDERS_RATIO) > 0:
                bidder = (last_person(n) // HOT_BLOCK) * HOT_BLOCK + 1
            else:
                bidder = next_person(n)
            b_auction.append(auction + FIRST_AUCTION_ID)
            b_bidder.append(bidder + FIRST_PERSON_ID)
            b_price.append(price())
            if randrange(2):
                c = randrange(len(HOT_CHANNELS))
                b_channel.append(HOT_CHANNELS[c])
                b_url.append(hot_urls[c])
            else:
                c = randrange(100)
                b_channel.append(cold_channels[c])
                b_url.append(cold_urls[c])
            b_time.append(t)
        elif offset >= PERSON_PROPORTION:                           # an auction
            if randrange(HOT_SELLERS_RATIO) > 0:
                seller = (last_person(n) // HOT_BLOCK) * HOT_BLOCK
            else:
                seller = next_person(n)
            initial = price()
            horizon = ms(n + events_for_auctions) - t
            auctions["id"].append(last_auction(n) + FIRST_AUCTION_ID)
            auctions["item_name"].append(f"{choice(words)} {choice(words)}")
            auctions["description"].append(" ".join(choice(words) for _ in range(5)))
            auctions["initial_bid"].append(initial)
            auctions["reserve"].append(initial + price())
            auctions["date_time"].append(t)
            auctions["expires"].append(t + 1 + randrange(max(horizon * 2, 1)))
            auctions["seller"].append(seller + FIRST_PERSON_ID)
            auctions["category"].append(FIRST_CATEGORY_ID + randrange(NUM_CATEGORIES))
        else:                                                       # a person
            first, last = choice(FIRST_NAMES), choice(LAST_NAMES)
            persons["id"].append(last_person(n) + FIRST_PERSON_ID)
            persons["name"].append(f"{first} {last}")
            persons["email"].append(f"{first.lower()}@{choice(words)}.com")
            persons["credit_card"].append(" ".join(f"{randrange(10_000):04d}" for _ in range(4)))
            persons["city"].append(choice(US_CITIES))
            persons["state"].append(choice(US_STATES))
            persons["date_time"].append(t)

    times, bounds = _batches(events, batch, ms)
    return Events(persons, auctions, bids, times, bounds,
                  {"events": events, "rate": rate, "seed": seed, "batch": batch, "first_ms": first_ms})


def _count(kind: str, n: int) -> int:
    """How many events of ``kind`` come before event ``n``."""
    epoch, offset = divmod(n, TOTAL_PROPORTION)
    if kind == "persons":
        return epoch * PERSON_PROPORTION + min(offset, PERSON_PROPORTION)
    if kind == "auctions":
        return epoch * AUCTION_PROPORTION + min(max(offset - PERSON_PROPORTION, 0), AUCTION_PROPORTION)
    return epoch * BID_PROPORTION + max(offset - PERSON_PROPORTION - AUCTION_PROPORTION, 0)


def _batches(events: int, batch: int, ms: Any) -> tuple[list[int], dict[str, list[tuple[int, int]]]]:
    times: list[int] = []
    bounds: dict[str, list[tuple[int, int]]] = {kind: [] for kind in KINDS}
    for lo in range(0, events, batch):
        hi = min(lo + batch, events)
        time = ms(lo)
        if times and time <= times[-1]:
            raise ValueError(f"batch times must increase: {time} after {times[-1]}")
        times.append(time)
        for kind in KINDS:
            bounds[kind].append((_count(kind, lo), _count(kind, hi)))
    return times, bounds

