"""The main job, on embedded defaults: a stream of shop events through windows and a join, on 2 workers.

Two generated streams of events, page views ``(user, page)`` and purchases
``(user, amount)``, arrive second by second of event time (the dataflow's time).
Every 10 seconds of event time, two one-line windows close exactly when the
frontier passes their end: views per user and revenue per user. A join pairs
them, by user and window, into one line per user who bought something, printed
by the worker that owns that user the moment the window closes. No watermark, no
timeout: a window is complete when the input can no longer send into it.

While it runs, the live dataflow page (``pip install 'aiotimely[ui]'``) shows the
graph, each operator's frontier moving, and what holds time back: open the
address printed on stderr.

Run:  python examples/shop.py                 # 2 workers, 60 s of events at 5 per second of event time
      python examples/shop.py --pace 0        # as fast as it goes
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
from typing import Any

import aiotimely as at

WINDOW = 10
USERS = ["ana", "bo", "cy", "dee", "eli", "fay"]
PAGES = ["home", "shoes", "hats", "cart"]

View = tuple[str, str]
Purchase = tuple[str, float]
Summary = tuple[str, tuple[int, int], int, float]
"""(user, (window start, window end), pages viewed, amount spent)"""


def shop(views: at.Stream[View], purchases: at.Stream[Purchase]) -> at.Stream[Summary]:
    """Per user and window of ``WINDOW`` seconds: pages viewed and money spent, for users who spent."""
    viewed = views.window(at.Tumbling(WINDOW), at.Agg.count(), key=lambda v: v[0])
    spent = purchases.window(at.Tumbling(WINDOW), at.Agg.sum(lambda p: p[1]), key=lambda p: p[0])
    return (viewed.map(lambda r: ((r[0], r[1]), r[2]))
            .join(spent.map(lambda r: ((r[0], r[1]), r[2])))
            .map(lambda r: (r[0][0], r[0][1], r[1][0], round(r[1][1], 2))))


def events(second: int, seed: int) -> tuple[list[View], list[Purchase]]:
    """The events of one second of event time: the same on every worker (each keeps its share)."""
    rng = random.Random(seed * 100_003 + second)
    views = [(rng.choice(USERS), rng.choice(PAGES)) for _ in range(5)]
    purchases = [(user, round(rng.uniform(5, 80), 2)) for user, page in views if page == "cart" and rng.random() < .5]
    return views, purchases


def build(seconds: int, pace: float, seed: int) -> Any:
    async def run(worker: at.Worker) -> list[Summary]:
        views_in = at.InputHandle[View]()
        purchases_in = at.InputHandle[Purchase]()
        closed: list[Summary] = []

        def report(time: int, summary: Summary) -> None:
            user, (start, end), pages, amount = summary
            print(f"[{start:3}, {end:3})  {user:4} viewed {pages:2} pages, spent {amount:7.2f}"
                  f"   (worker {worker.index}, at time {time})", flush=True)
            closed.append(summary)

        probe = worker.dataflow(lambda scope: shop(views_in.to_stream(scope), purchases_in.to_stream(scope))
                                .inspect_time(report).probe(), name="shop")
        for second in range(seconds):
            views, purchases = events(second, seed)
            views_in.send_batch(views[worker.index::worker.peers])
            purchases_in.send_batch(purchases[worker.index::worker.peers])
            views_in.advance_to(second + 1)
            purchases_in.advance_to(second + 1)
            await worker.step_while(lambda: probe.less_than(views_in.time))
            if pace:
                await asyncio.sleep(pace)
        return closed

    return run


def main(argv: list[str] | None = None) -> list[Summary]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-w", "--workers", type=int, default=2, help="workers (default 2)")
    parser.add_argument("--seconds", type=int, default=60, help="seconds of event time to generate (default 60)")
    parser.add_argument("--pace", type=float, default=0.2,
                        help="wall-clock seconds per second of event time (default 0.2; 0: as fast as it goes)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the generated events")
    parser.add_argument("--ui", type=int, default=0, metavar="PORT",
                        help="port of the live dataflow page (default: any free port; -1: no page)")
    args = parser.parse_args(argv)
    options: dict[str, Any] = {}
    if args.ui >= 0:
        try:
            import websockets  # noqa: F401
            options["ui_port"] = args.ui
        except ImportError:
            print("aiotimely: no live page: pip install 'aiotimely[ui]' to get one", file=sys.stderr)
    results = at.execute(build(args.seconds, args.pace, args.seed), workers=args.workers, **options)
    return [summary for per_worker in results for summary in per_worker]


if __name__ == "__main__":
    main()
