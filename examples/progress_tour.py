"""A tour of aiotimely's progress core: how frontiers follow capabilities round a loop.

The dataflow (one worker, no event loop: the progress core is sans-IO)::

    input --> iterate { body <--> feedback(+1 iteration) } --> sink

We play the operators by hand: the input holds a capability and sends one record,
the loop body and feedback pass it round twice, and we print what each operator's
input frontier says at every step: which times may still arrive there.

Run:  python examples/progress_tour.py
"""

from __future__ import annotations

from typing import Any

from aiotimely.progress import (
    INT,
    FrontierInterest,
    OperatorProgress,
    Product,
    Refinement,
    Source,
    Subgraph,
    SubgraphBuilder,
    Target,
)


def build() -> tuple[Subgraph, Subgraph, OperatorProgress, OperatorProgress, OperatorProgress,
                     OperatorProgress]:
    """Build the dataflow's progress structure: a top scope holding an iterative scope."""
    top = SubgraphBuilder(Refinement.region(INT), name="dataflow")
    loop = SubgraphBuilder(Refinement.iterative(INT), inputs=1, outputs=1, name="iterate", path=(0, 2))
    body = OperatorProgress("body", 2, 1, interest=FrontierInterest.NEVER)
    feedback = OperatorProgress("feedback", 1, 1, connectivity=[{0: Product(0, 1)}],
                                interest=FrontierInterest.NEVER)
    loop.add_child(body)                           # node 1 in the loop
    loop.add_child(feedback)                       # node 2 in the loop
    loop.add_edge(Source(0, 0), Target(1, 0))      # the loop's input -> body
    loop.add_edge(Source(1, 0), Target(2, 0))      # body -> feedback
    loop.add_edge(Source(2, 0), Target(1, 1))      # feedback -> body (the back edge)
    loop.add_edge(Source(1, 0), Target(0, 0))      # body -> the loop's output
    iterate = loop.build()

    source = OperatorProgress("input", 0, 1)
    sink = OperatorProgress("sink", 1, 0)
    top.add_child(source)                          # node 1
    top.add_child(iterate)                         # node 2
    top.add_child(sink)                            # node 3
    top.add_edge(Source(1, 0), Target(2, 0))
    top.add_edge(Source(2, 0), Target(3, 0))
    return top.build(), iterate, source, body, feedback, sink


def settle(*scopes: Subgraph) -> None:
    """Run progress rounds until nothing changes (the worker runtime's job, done by hand)."""
    for _ in range(10):
        for scope in scopes:
            scope.propagate()
            for child in range(1, len(scope.children)):
                scope.extract(child)
            batch = scope.send()
            if batch is not None:
                scope.receive(batch)     # one worker: its batches come straight back
        if not any(s.has_pending() or s.has_unsent() for s in scopes):
            return


def fmt(frontier: Any) -> str:
    """A frontier as a set of times; Product(o, i) shown as (o, i). {} means complete."""
    times = sorted(frontier)
    return "{" + ", ".join(f"({t.outer}, {t.inner})" if isinstance(t, Product) else str(t) for t in times) + "}"


def show(step: str, top: Subgraph, iterate: Subgraph) -> None:
    sink = fmt(top.frontier(Target(3, 0)))
    body = fmt(iterate.frontier(Target(1, 0)))
    back = fmt(iterate.frontier(Target(1, 1)))
    print(f"{step:<45} {sink:<6} {body:<9} {back}")


def main() -> None:
    top, iterate, source, body, feedback, sink = build()
    settle(top, iterate)
    print(f"{'frontiers at the inputs of:':<45} {'sink':<6} {'body':<9} body's back edge")
    show("start: every operator holds time 0", top, iterate)

    body.shared.internals[0].update(Product(0, 0), -1)      # map-like operators need no capability
    feedback.shared.internals[0].update(Product(0, 0), -1)
    settle(top, iterate, top)
    show("body and feedback drop their capabilities", top, iterate)

    source.shared.produceds[0].update(5, 1)                 # the input sends a record at 5 ...
    source.shared.internals[0].extend([(6, 1), (0, -1)])    # ... and moves on to 6
    iterate.entered(0, Product(5, 0), 1)                    # the record enters the loop at (5, 0)
    settle(top, iterate, top)
    show("input sends a record at 5, advances to 6", top, iterate)

    body.shared.consumeds[0].update(Product(5, 0), 1)       # body passes it to feedback and out
    body.shared.produceds[0].update(Product(5, 0), 1)
    feedback.shared.consumeds[0].update(Product(5, 0), 1)   # feedback sends it round at (5, 1)
    feedback.shared.produceds[0].update(Product(5, 1), 1)
    sink.shared.consumeds[0].update(5, 1)
    settle(top, iterate, top)
    show("the record goes round once: now at (5, 1)", top, iterate)

    body.shared.consumeds[1].update(Product(5, 1), 1)       # body ends the iteration: nothing more
    settle(top, iterate, top)
    show("the body consumes it and stops iterating", top, iterate)

    source.shared.internals[0].update(6, -1)                # the input closes
    settle(top, iterate, top)
    show("the input closes", top, iterate)
    print("dataflow complete:", not top.tracking_anything())


if __name__ == "__main__":
    main()
