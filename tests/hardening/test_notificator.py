"""Notifications one at a time, as timely delivers them (its notificator test, ported)."""

from __future__ import annotations

import aiotimely as at


class Cap:
    """Stands in for a capability: a time, and whether it was dropped."""

    def __init__(self, time):
        self.time = time
        self.dropped = False

    def drop(self):
        assert not self.dropped
        self.dropped = True


def frontier(*times):
    f = at.MutableAntichain(less_equal=lambda a, b: a.less_equal(b))
    f.update_iter([(t, 1) for t in times])
    return f


def P(a, b):
    return at.Product(a, b)


def test_notifications_in_order_and_requests_made_while_delivering():
    # timely: notificator_delivers_notifications_in_topo_order
    notificator = at.FrontierNotificator()
    caps = {}
    for t in [P(3, 5), P(5, 4), P(1, 2), P(1, 1), P(1, 1), P(5, 4), P(6, 0), P(6, 2), P(5, 8)]:
        cap = Cap(t)
        notificator.notify_at(cap)
        caps.setdefault(t, cap)
    assert list(notificator.ready([frontier(P(0, 0))])) == []
    delivered = [cap.time for cap in notificator.ready([frontier(P(5, 7), P(6, 1))])]
    assert delivered == [P(1, 1), P(1, 2), P(3, 5), P(5, 4), P(6, 0)]
    later = frontier(P(6, 10))
    seen = []
    for cap in notificator.ready([later]):
        seen.append(cap.time)
        if cap.time == P(5, 8):
            notificator.notify_at(Cap(P(5, 9)))     # mid-session, already complete: delivered next
    assert seen == [P(5, 8), P(5, 9), P(6, 2)]
    assert all(cap.dropped for cap in caps.values() if cap.time != P(1, 1) or cap is caps[P(1, 1)])
    assert notificator.pending() == []


def test_breaking_out_after_one_notification_keeps_the_rest():
    notificator = at.FrontierNotificator()
    for t in (1, 2, 3):
        notificator.notify_at(Cap(t))
    done = at.MutableAntichain()                            # an empty frontier: every time is complete
    for cap in notificator.ready([done]):
        first = cap
        break
    assert first.time == 1 and first.dropped               # the one delivered is dropped as the loop ends
    assert notificator.pending() == [2, 3]
    assert [cap.time for cap in notificator.ready([done])] == [2, 3]


def test_a_barrier_takes_its_notifications_one_at_a_time(run):
    """timely's examples/barrier.rs, with three chains of rounds: each activation takes one notification
    and asks for the chain's next round; the notifications not taken stay pending."""
    def build(worker):
        rounds = []

        def make(scope):
            handle, loop = scope.feedback(1)

            @at.to_stream(["go"], scope).concat(loop).unary_notify(name="Barrier")
            async def barrier(input, output, notificator):
                async for _ in input.activations():
                    for time, _records in input.drain():
                        for start in (0, 10, 20):
                            notificator.notify_at(time.delayed(start))
                    for cap in notificator.ready():
                        rounds.append(cap.time)
                        if cap.time % 10 < 5:
                            notificator.notify_at(cap.delayed(cap.time + 1))
                        break                              # one at a time

            barrier.connect_loop(handle)

        worker.dataflow(make)
        return rounds

    assert run(build)[0] == [0, 1, 2, 3, 4, 5, 10, 11, 12, 13, 14, 15, 20, 21, 22, 23, 24, 25]
