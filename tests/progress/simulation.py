"""A multi-worker simulation of the progress protocol, checking the book's safety property.

Several workers run the same (possibly nested, cyclic) dataflow. Simulated operators
act at random, as real ones may: hold, downgrade and drop capabilities, send records
at times their capabilities allow, consume records and act on what they consumed.
Records travel in any order to any worker (the data plane needs only at-most-once).
Each action's progress is batched by the real :class:`Subgraph` code and broadcast on
FIFO channels; an adversary decides which worker hears which prefix of whose stream
when.

Checked throughout:

* **safety**: whenever a record appears at (or is consumed at) a location and time,
  every worker's frontier there still admits that time. Frontiers are checked
  never to move backwards, so "had already passed" and "has passed" agree;
* **liveness**: once every operator lets go, every worker's frontiers empty and no
  scope is left tracking anything.

``mutant=`` plants a known bug, to show that these checks catch it.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from aiotimely.progress import Antichain, ProgressBatch, Source, Target
from aiotimely.errors import ProgressError

from .driver import Cluster, build_tree, scopes
from .graphs import OpSpec, ScopeSpec, random_summary

MUTANTS = ("split_batch", "reorder_batches", "apply_twice", "initial_count_one", "skip_feedback")


class SafetyViolation(AssertionError):
    pass


class Simulation:
    def __init__(
        self,
        spec: ScopeSpec,
        peers: int,
        rng: random.Random,
        *,
        mutant: str | None = None,
        check_monotone: bool = True,
    ) -> None:
        self.spec = spec
        self.check_monotone = check_monotone
        self.peers = peers
        self.rng = rng
        self.mutant = mutant
        self.scope_spec: dict[tuple[int, ...], ScopeSpec] = dict(spec.walk())
        self.refine = {path: s.refinement(self.scope_spec[path[:-1]].ttype)
                       for path, s in self.scope_spec.items() if len(path) > 1}
        self.edges: dict[tuple[tuple[int, ...], Source], list[Target]] = {}
        for path, s in self.scope_spec.items():
            for source, target in s.edges:
                self.edges.setdefault((path, source), []).append(target)

        def without_feedback(op: OpSpec):
            return [{} for _ in range(op.inputs)] if op.feedback else op.connectivity

        skip = mutant == "skip_feedback"
        built = [build_tree(spec, worker=w, peers=peers, connectivity_of=without_feedback if skip else None)
                 for w in range(peers)]
        self.roots = [root for root, _ in built]
        self.ops = [ops for _, ops in built]
        self.op_spec: dict[tuple[tuple[int, ...], int], OpSpec] = {}
        for path, s in self.scope_spec.items():
            for c, child in enumerate(s.children, 1):
                if isinstance(child, OpSpec):
                    self.op_spec[(path, c)] = child
        self.scopes = [{s.path: s for s in scopes(root)} for root in self.roots]
        self.caps: list[dict[Any, Counter]] = [
            {key: Counter({(o, self.scope_spec[key[0]].ttype.minimum): 1 for o in range(op.outputs)})
             for key, op in self.op_spec.items()}
            for _ in range(peers)
        ]
        if mutant == "initial_count_one":
            for w in range(peers):
                for path, c in self.op_spec:
                    scope = self.scopes[w][path]
                    for sid in scope.graph.source_ids[c]:
                        scope.tracker.update_at(sid, self.scope_spec[path].ttype.minimum, 1 - peers)
        self.cluster = Cluster(self.roots)
        if mutant in ("reorder_batches", "apply_twice"):
            self.cluster.deliver = self._deliver_badly  # type: ignore[method-assign]
        if mutant == "split_batch":
            self.cluster.sender = self._splitting_sender  # type: ignore[method-assign]
            self._split_seq: Counter = Counter()
        self.messages: list[tuple[int, tuple[int, ...], Target, Any]] = []
        self.frontiers: list[dict[Any, Antichain]] = [{} for _ in range(peers)]
        self.checks = 0
        for w in range(peers):
            self._settle(w)

    # -- planted bugs in the transport ---------------------------------------------------

    def _splitting_sender(self, w: int):
        def send(batch: ProgressBatch) -> None:
            # retractions first, in a batch of their own: a peer may see them alone
            parts = [[c for c in batch.changes if c[2] < 0], [c for c in batch.changes if c[2] > 0]]
            for part in parts:
                if part:
                    seq = self._split_seq[(w, batch.path)]
                    self._split_seq[(w, batch.path)] += 1
                    for r in range(self.peers):
                        self.cluster.queues[(w, r)].append(ProgressBatch(batch.path, w, seq, part))
        return send

    def _deliver_badly(self, sender: int, receiver: int) -> ProgressBatch:
        queue = self.cluster.queues[(sender, receiver)]
        if self.mutant == "reorder_batches":
            batch = queue[-1]
            del queue[-1]
        else:
            batch = queue.popleft()
        scope = self.scopes[receiver][batch.path]
        times = 2 if self.mutant == "apply_twice" and self.rng.random() < 0.3 else 1
        for _ in range(times):
            for loc, t, d in batch.changes:  # straight into the scope, bypassing the sequence check
                scope._final.update((scope.graph.loc_id[loc], t), d)
        return batch

    # -- the simulated world ---------------------------------------------------------

    def run(self, steps: int) -> None:
        for _ in range(steps):
            roll = self.rng.random()
            if roll < 0.35:
                self._act_with_capability()
            elif roll < 0.7:
                self._consume()
            else:
                self._deliver_progress()
        self.finish()

    def finish(self) -> None:
        """Every operator drops everything and consumes everything; then everything must complete."""
        for _ in range(10_000):
            for w in range(self.peers):
                for key, held in self.caps[w].items():
                    if held:
                        op = self.ops[w][key]
                        for (o, t), n in held.items():
                            op.shared.internals[o].update(t, -n)
                        held.clear()
                self._settle(w)
            while self.messages:
                self._consume(produce=False)
            if not any(self.cluster.queues.values()):
                break
            while any(self.cluster.queues.values()):
                self._deliver_progress()
        else:
            raise AssertionError("the simulation did not drain")
        for w in range(self.peers):
            for scope in self.scopes[w].values():
                if scope.tracking_anything():
                    raise SafetyViolation(f"worker {w}: scope {scope.path} still tracks something after the end")
                for loc in scope.graph.locations:
                    if scope.frontier(loc):
                        raise SafetyViolation(
                            f"worker {w}: frontier at {loc!r} in scope {scope.path} is {scope.frontier(loc)} "
                            "after everything was released"
                        )

    def _act_with_capability(self) -> None:
        w = self.rng.randrange(self.peers)
        holders = [key for key, held in self.caps[w].items() if held]
        if not holders:
            return
        key = self.rng.choice(sorted(holders, key=repr))
        path, c = key
        ttype = self.scope_spec[path].ttype
        held = self.caps[w][key]
        o, t = self.rng.choice(sorted(held, key=repr))
        op = self.ops[w][key]
        roll = self.rng.random()
        if roll < 0.2:
            held[(o, t)] -= 1
            if not held[(o, t)]:
                del held[(o, t)]
            op.shared.internals[o].update(t, -1)
        elif roll < 0.45:
            later = ttype.results_in(random_summary(self.rng, ttype), t)
            if later is None or later == t:
                return
            held[(o, t)] -= 1
            if not held[(o, t)]:
                del held[(o, t)]
            held[(o, later)] += 1
            op.shared.internals[o].extend([(later, 1), (t, -1)])
        else:
            at = t if self.rng.random() < 0.6 else ttype.results_in(random_summary(self.rng, ttype), t)
            self._send(w, path, c, o, at)
        self._settle(w)

    def _consume(self, produce: bool = True) -> None:
        if not self.messages:
            return
        w, path, target, t = self.messages.pop(self.rng.randrange(len(self.messages)))
        self._check(path, target, t, f"a record consumed by worker {w}")
        child = self.scope_spec[path].children[target.node - 1]
        if isinstance(child, ScopeSpec):
            # the Enter side: count it into the nested scope, and pass it on inside
            inner = path + (target.node,)
            t_in = self.refine[inner].to_inner(t)
            self.scopes[w][inner].entered(target.port, t_in, 1)
            for tgt in self.edges.get((inner, Source(0, target.port)), ()):
                self._arrive(inner, tgt, t_in)
            self._settle(w)
            return
        key = (path, target.node)
        op = self.ops[w][key]
        op.shared.consumeds[target.port].update(t, 1)
        if produce:
            ttype = self.scope_spec[path].ttype
            for o, summaries in self.op_spec[key].connectivity[target.port].items():
                roll = self.rng.random()
                s = self.rng.choice(summaries)
                at = ttype.results_in(s, t)
                if at is None:
                    continue
                if roll < 0.3:
                    self.caps[w][key][(o, at)] += 1
                    op.shared.internals[o].update(at, 1)
                elif roll < 0.7:
                    self._send(w, path, target.node, o, at)
        self._settle(w)

    def _deliver_progress(self) -> None:
        pending = [key for key, queue in sorted(self.cluster.queues.items()) if queue]
        if not pending:
            return
        sender, receiver = self.rng.choice(pending)
        self.cluster.deliver(sender, receiver)
        self._settle(receiver)

    def _send(self, w: int, path: tuple[int, ...], node: int, output: int, t: Any) -> None:
        self.ops[w][(path, node)].shared.produceds[output].update(t, 1)
        for target in self.edges.get((path, Source(node, output)), ()):
            self._arrive(path, target, t)

    def _arrive(self, path: tuple[int, ...], target: Target, t: Any) -> None:
        self._check(path, target, t, "a record sent")
        if target.node == 0:  # the Leave side: on to the parent's consumers, at the outer time
            outer, index = path[:-1], path[-1]
            t_out = self.refine[path].to_outer(t)
            for tgt in self.edges.get((outer, Source(index, target.port)), ()):
                self._arrive(outer, tgt, t_out)
            return
        self.messages.append((self.rng.randrange(self.peers), path, target, t))

    # -- checks ---------------------------------------------------------------------

    def _check(self, path: tuple[int, ...], target: Target, t: Any, what: str) -> None:
        self.checks += 1
        for r in range(self.peers):
            frontier = self.scopes[r][path].frontier(target)
            if not frontier.less_equal(t):
                raise SafetyViolation(
                    f"{what} at {target!r} in scope {path} at time {t!r}, but worker {r}'s frontier there "
                    f"is {frontier}: it had already passed that time"
                )

    def _settle(self, w: int) -> None:
        self.cluster.run(w)
        seen = self.frontiers[w]
        for path, scope in self.scopes[w].items():
            for loc in scope.graph.locations:
                if type(loc) is not Target:
                    continue
                now = scope.frontier(loc)
                before = seen.get((path, loc))
                if self.check_monotone and before is not None and not before.dominates(now):
                    raise SafetyViolation(
                        f"worker {w}: the frontier at {loc!r} in scope {path} went back from {before} to {now}"
                    )
                seen[(path, loc)] = now


def find_violation(spec_for_seed, peers: int, seeds, steps: int, mutant: str | None = None, **options):
    """Run the simulation for each seed; return ``(seed, message)`` for the first violation, else ``None``."""
    for seed in seeds:
        rng = random.Random(seed)
        spec = spec_for_seed(rng)
        try:
            Simulation(spec, peers, rng, mutant=mutant, **options).run(steps)
        except (SafetyViolation, ProgressError) as e:
            return seed, str(e)
    return None

