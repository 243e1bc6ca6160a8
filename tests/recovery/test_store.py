"""The SQLite store's generations, driven directly as the Snapshotter drives it (``restore``, ``begin``,
``write``, ``mark``, ``prune``), runs killed at any step (the calls simply stop), against a plain model: every
restore gives the latest snapshot complete everywhere with exactly the pieces written for it, and refuses
only a directory that lost a file it may need. Then damage: missing and empty files, changed records, marks
and headers, an older format."""

from __future__ import annotations

import asyncio
import os
import pickle
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aiotimely.dataflow.state import Restored
from aiotimely.errors import RecoveryError
from aiotimely.recovery import Recovery

FLOW = "flow"
SHAPE = "shape"


def piece(tag: object) -> dict[str, bytes]:
    return {"op": pickle.dumps(tag)}


class Member:
    """One worker of a run, calling the store as a Snapshotter does (its own Recovery, as in its own process)."""

    def __init__(self, directory: Path, index: int, peers: int, runner: asyncio.Runner) -> None:
        self.store = Recovery(directory, every=1)
        self.index, self.peers, self.runner = index, peers, runner

    def restore(self) -> Restored | None:
        return self.store.restore(FLOW, self.index, self.peers)

    def begin(self, snapshot: int | None) -> None:
        self.store.begin(FLOW, SHAPE, self.index, self.peers, snapshot)

    def write(self, lo: int, hi: int | None, tag: object) -> None:
        self.runner.run(self.store.write(FLOW, self.index, lo, hi, piece(tag)))

    def mark(self, drained: int | None) -> None:
        self.runner.run(self.store.mark(FLOW, self.index, drained))

    def prune(self, complete: int) -> None:
        self.runner.run(self.store.prune(FLOW, self.index, complete))


# -- the model ------------------------------------------------------------------------------------------

INF = 1 << 62
"""A drained mark of every snapshot (the Snapshotter passes it as ``None``)."""


@dataclass
class Best:
    """The latest snapshot complete everywhere: its id, its run's workers, each worker's piece, its generation."""

    snapshot: int
    workers: int
    pieces: list[dict[str, bytes]]
    generation: int
    same_from: int
    """The least snapshot with the same pieces: ``snapshot``, unless every worker's piece is its last (covering
    every later snapshot too), and so from the latest first snapshot of those last pieces."""


@dataclass
class Run:
    """What one run did, in the model: it resumes from ``start``; per worker, what it wrote and marked."""

    number: int
    workers: int
    start: int = 0
    generation: int | None = None
    restored: list[bool] = field(default_factory=list)
    began: list[bool] = field(default_factory=list)
    records: list[list[tuple[int, int | None, object]]] = field(default_factory=list)
    marked: list[int] = field(default_factory=list)
    pruned: list[int] = field(default_factory=list)
    drained: int = 0      # how far progress tracking would let marks go: past ``start`` once every worker began

    def __post_init__(self) -> None:
        self.resume(0)

    def resume(self, start: int) -> None:
        """The snapshot the run resumes from, as its first restore found it."""
        self.start = start
        n = self.workers
        self.restored, self.began = [False] * n, [False] * n
        self.records = [[] for _ in range(n)]
        self.marked, self.pruned = [self.start] * n, [self.start] * n
        self.drained = self.start

    def durable(self, w: int) -> int:
        if not self.records[w]:
            return self.start
        lo, hi, _ = self.records[w][-1]
        return lo if hi is None else hi

    def final(self, w: int) -> bool:
        return bool(self.records[w]) and self.records[w][-1][1] is None

    def covering(self, w: int, snapshot: int) -> tuple[int, int | None, object] | None:
        for lo, hi, tag in self.records[w]:
            if lo <= snapshot and (hi is None or snapshot <= hi):
                return lo, hi, tag
        return None

    def complete(self, *, everywhere: bool = False) -> list[int]:
        """The snapshots of this run written on every worker and marked drained by one (its knowledge is global:
        the store resumes from them), or, ``everywhere``, by every worker (the dataflow knows them complete: it
        prunes for them)."""
        upto = min(self.marked) if everywhere else max(self.marked)
        candidates = {upto} if upto < INF else set()
        for records in self.records:
            candidates.update(lo if hi is None else hi for lo, hi, _ in records)
        return sorted(c for c in candidates if self.start < c <= upto
                      and all(self.covering(w, c) is not None for w in range(self.workers)))


class Model:
    """The generations the store makes (the latest if it has the run's worker count, else a new one, once a
    worker of the run begins) and the latest complete snapshot."""

    def __init__(self) -> None:
        self.generations: list[tuple[int, int]] = []
        self.best: Best | None = None

    def generation_for(self, workers: int) -> int:
        if self.generations and self.generations[-1][1] == workers:
            return self.generations[-1][0]
        number = self.generations[-1][0] + 1 if self.generations else 1
        self.generations.append((number, workers))
        return number

    def update(self, run: Run) -> None:
        """The run's latest complete snapshot (it resumed from the latest before) is the latest."""
        complete = run.complete()
        if complete:
            c = complete[-1]
            assert run.generation is not None
            covering = [run.covering(w, c) for w in range(run.workers)]
            los = [lo for lo, hi, _ in filter(None, covering) if hi is None]
            self.best = Best(c, run.workers, [piece(record[2]) for record in filter(None, covering)],
                             run.generation, max(los) if len(los) == run.workers else c)


def check_restored(restored: Restored | None, best: Best | None) -> None:
    if best is None:
        assert restored is None
        return
    assert restored is not None, f"nothing restored, and snapshot {best.snapshot} is complete"
    assert best.same_from <= restored.snapshot <= best.snapshot, (restored.snapshot, best)
    assert restored.peers == best.workers
    assert restored.pieces == best.pieces, "the pieces are not those written for the snapshot"


def step(run: Run, model: Model, members: list[Member], action: tuple) -> None:
    """Do ``action`` on the store and in the model."""
    kind, w, *args = action
    if kind == "restore":
        restored = members[w].restore()
        check_restored(restored, model.best)
        start = restored.snapshot if restored else 0
        if not any(run.restored):
            run.resume(start)
        assert start == run.start, "workers of one run restored different snapshots"
        run.restored[w] = True
    elif kind == "begin":
        if run.generation is None:
            run.generation = model.generation_for(run.workers)
        members[w].begin(run.start or None)
        run.began[w] = True
    elif kind == "write":
        lo, hi = run.durable(w) + 1, args[0]
        tag = (run.number, w, lo, hi)
        members[w].write(lo, hi, tag)
        run.records[w].append((lo, hi, tag))
    elif kind == "drain":
        run.drained = args[0]
    elif kind == "mark":
        members[w].mark(None if args[0] >= INF else args[0])
        run.marked[w] = args[0]
    elif kind == "prune":
        members[w].prune(args[0])
        run.pruned[w] = args[0]
    model.update(run)


@st.composite
def actions(draw, run: Run):
    """One of the steps the run's workers may take now (as the Snapshotter would), or ``None``: killed."""
    n = run.workers
    if draw(st.integers(0, 11)) == 0:
        return None
    choices: list[tuple] = []
    for w in range(n):
        if not run.restored[w]:
            choices.append(("restore", w))
        elif not run.began[w]:
            choices.append(("begin", w))
        else:
            if not run.final(w):
                choices.append(("write", w))
            if run.marked[w] < run.drained:
                choices.append(("mark", w))
            complete = [c for c in run.complete(everywhere=True) if c > run.pruned[w]]
            if complete:
                choices.append(("prune", w))
    if all(run.began) and run.drained < INF:
        choices.append(("drain", 0))
    if not choices:
        return None
    kind, w = draw(st.sampled_from(choices))
    if kind == "write":
        lo = run.durable(w) + 1
        return kind, w, draw(st.sampled_from([lo, lo, lo + 1, lo + 2, None]))
    if kind == "drain":
        return kind, 0, draw(st.sampled_from([run.drained + 1, run.drained + 2, run.drained + 4, INF]))
    if kind == "mark":
        marks = sorted({min(run.drained, run.marked[w] + 1), run.drained})
        return kind, w, draw(st.sampled_from(marks))
    if kind == "prune":
        return kind, w, draw(st.sampled_from([c for c in run.complete(everywhere=True) if c > run.pruned[w]]))
    return kind, w


def play(directory: Path, data, runner: asyncio.Runner, model: Model, runs: int, steps: int = 40) -> None:
    for number in range(runs):
        workers = data.draw(st.integers(1, 3), label="workers")
        run = Run(number, workers)
        members = [Member(directory, w, workers, runner) for w in range(workers)]
        for _ in range(steps):
            action = data.draw(actions(run), label="step")
            if action is None:
                break
            step(run, model, members, action)


def scratch() -> tempfile.TemporaryDirectory[str]:
    """A temporary folder, in memory where there is a tmpfs (SQLite's syncs cost nothing there)."""
    shm = "/dev/shm"
    return tempfile.TemporaryDirectory(dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None)


def generation_of(path: Path) -> int:
    return int(path.parent.name.split("-")[0][1:])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_restore_gives_the_latest_complete_snapshot_whatever_step_a_run_was_killed_at(data):
    with scratch() as folder, asyncio.Runner() as runner:
        directory = Path(folder) / "state"
        model = Model()
        play(directory, data, runner, model, data.draw(st.integers(1, 5), label="runs"))
        event(f"generations: {len(model.generations)}, complete: {model.best is not None}")
        # and a last run's workers, of any number, each find the same
        workers = data.draw(st.integers(1, 3), label="last workers")
        for w in range(workers):
            check_restored(Member(directory, w, workers, runner).restore(), model.best)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_lost_file_is_refused_where_the_answer_may_depend_on_it_and_only_there(data):
    with scratch() as folder, asyncio.Runner() as runner:
        directory = Path(folder) / "state"
        model = Model()
        play(directory, data, runner, model, data.draw(st.integers(1, 4), label="runs"))
        files = sorted(directory.glob("g*/worker-*.sqlite3"))
        if not files:
            return
        lost = data.draw(st.sampled_from(files), label="lost")
        if data.draw(st.booleans(), label="emptied"):
            lost.write_bytes(b"")
        else:
            lost.unlink()
        best = model.best
        workers = data.draw(st.integers(1, 3), label="last workers")
        try:
            restored = Member(directory, 0, workers, runner).restore()
        except RecoveryError as e:
            # refused: only where the lost file may hold what the answer depends on (its generation or a newer)
            assert best is None or generation_of(lost) >= best.generation, str(e)
            assert str(lost.parent) in str(e) and lost.name in str(e) and "move the recovery directory" in str(e)
            return
        # resumed: never from anything but the latest complete snapshot, so never if the file held it
        assert best is None or generation_of(lost) != best.generation, "the lost file's snapshot was not refused"
        check_restored(restored, best)


# -- the runs of the reported defects, step by step ----------------------------------------------------


@pytest.fixture
def where():
    with scratch() as folder:
        yield Path(folder)


@pytest.fixture
def runner():
    with asyncio.Runner() as runner:
        yield runner


def members(where: Path, workers: int, runner: asyncio.Runner) -> list[Member]:
    return [Member(where / "state", w, workers, runner) for w in range(workers)]


def complete_run(where: Path, runner: asyncio.Runner, workers: int, upto: int, tag: str) -> None:
    """A run of ``workers`` resuming from whatever there is, writing and draining snapshots up to ``upto``."""
    run = members(where, workers, runner)
    start = [m.restore() for m in run][0]
    begun = start.snapshot if start else 0
    for m in run:
        m.begin(start.snapshot if start else None)
    for m in run:
        m.write(begun + 1, upto, (tag, m.index))
    for m in run:
        m.mark(upto)
    for m in run:
        m.prune(upto)


def test_a_rescaled_run_that_never_drained_a_snapshot_leaves_the_older_generation_resumable(where, runner):
    complete_run(where, runner, 2, 4, "first")                   # g1-w2: snapshot 4 complete
    rescaled = members(where, 3, runner)                          # g2-w3: killed before 5 drained
    for m in rescaled:
        assert m.restore().snapshot == 4
    for m in rescaled:
        m.begin(4)
    for m in rescaled:
        m.write(5, 6, ("rescaled", m.index))
    for m in members(where, 3, runner):                            # every restart resumes from g1's 4
        restored = m.restore()
        assert (restored.snapshot, restored.peers) == (4, 2)
        assert restored.pieces == [piece(("first", 0)), piece(("first", 1))]
    for m in members(where, 2, runner):
        assert m.restore().snapshot == 4


def test_a_run_of_the_latest_generations_workers_resuming_from_an_older_one_mixes_no_runs(where, runner):
    complete_run(where, runner, 2, 4, "first")                   # g1-w2: 4 complete
    second = members(where, 3, runner)                            # g2-w3: drained, written on two workers
    for m in second:
        m.restore()
    for m in second:
        m.begin(4)
    for m in second[1:]:
        m.write(5, 7, ("second", m.index))
        m.mark(7)
    third = members(where, 3, runner)                             # g2-w3 again, from g1's 4: one worker
    for m in third:                                                  # began and wrote, then killed
        assert m.restore().snapshot == 4
    third[0].begin(4)
    third[0].write(5, 9, ("third", 0))
    restored = members(where, 3, runner)[2].restore()
    assert (restored.snapshot, restored.peers) == (4, 2)             # not 7 of two runs' records
    complete_run(where, runner, 3, 8, "fourth")                   # and a run that completes one takes over
    restored = members(where, 2, runner)[0].restore()
    assert (restored.snapshot, restored.peers) == (8, 3)
    assert restored.pieces == [piece(("fourth", w)) for w in range(3)]


SCRIPT = [  # (run's workers, action): three runs, 2 then 3 then 2 workers, each step a possible kill point
    (2, ("restore", 0)), (2, ("restore", 1)), (2, ("begin", 0)), (2, ("begin", 1)),
    (2, ("write", 0, 3)), (2, ("write", 1, 2)), (2, ("drain", 0, 3)), (2, ("mark", 0, 3)), (2, ("write", 1, 4)),
    (2, ("mark", 1, 3)), (2, ("prune", 1, 3)), (2, ("prune", 0, 3)),
    (3, ("restore", 2)), (3, ("begin", 2)), (3, ("restore", 0)), (3, ("write", 2, None)), (3, ("begin", 0)),
    (3, ("restore", 1)), (3, ("begin", 1)), (3, ("write", 0, 5)), (3, ("write", 1, 6)), (3, ("drain", 0, INF)),
    (3, ("mark", 1, INF)), (3, ("mark", 0, INF)), (3, ("mark", 2, INF)), (3, ("prune", 2, 4)),
    (3, ("write", 0, None)), (3, ("prune", 0, 6)), (3, ("prune", 1, 6)),
    (2, ("restore", 0)), (2, ("restore", 1)), (2, ("begin", 1)), (2, ("begin", 0)), (2, ("write", 0, 8)),
    (2, ("write", 1, None)), (2, ("drain", 0, 8)), (2, ("mark", 0, 8)), (2, ("mark", 1, 8)),
    (2, ("prune", 0, 8)), (2, ("prune", 1, 8)),
]


@pytest.mark.parametrize("kill", range(len(SCRIPT) + 1))
def test_a_kill_between_any_two_steps_leaves_a_directory_to_resume_from(where, runner, kill):
    model, run, team, count = Model(), None, [], 0
    for workers, action in SCRIPT[:kill]:
        if run is None or workers != run.workers or (action[0] == "restore" and run.restored[action[1]]):
            count += 1
            run = Run(count, workers)
            team = members(where, workers, runner)
        step(run, model, team, action)
    assert model.best is not None or kill < 10
    for workers in (1, 2, 3):
        for m in members(where, workers, runner):
            check_restored(m.restore(), model.best)


# -- damage ----------------------------------------------------------------------------------------------


def test_a_missing_file_of_a_generation_holding_snapshots_is_refused(where, runner):
    complete_run(where, runner, 2, 4, "first")
    lost = where / "state" / "g1-w2" / "worker-1.sqlite3"
    lost.unlink()
    with pytest.raises(RecoveryError) as refused:
        members(where, 2, runner)[0].restore()
    message = str(refused.value)
    assert str(lost.parent) in message and "worker-1.sqlite3 is missing" in message
    assert "restore the file, or move the recovery directory" in message and "away to start afresh" in message


def test_a_missing_file_of_a_newer_generation_holding_snapshots_is_refused(where, runner):
    complete_run(where, runner, 2, 4, "first")
    complete_run(where, runner, 3, 7, "second")                   # prunes g1: only g2 holds a snapshot
    (where / "state" / "g2-w3" / "worker-2.sqlite3").unlink()
    with pytest.raises(RecoveryError, match=r"g2-w3 holds snapshots, and its file worker-2.sqlite3 is missing"):
        members(where, 2, runner)[0].restore()


def test_an_empty_file_of_a_generation_holding_snapshots_is_refused(where, runner):
    complete_run(where, runner, 2, 4, "first")
    (where / "state" / "g1-w2" / "worker-0.sqlite3").write_bytes(b"")
    with pytest.raises(RecoveryError, match=r"worker-0.sqlite3 is empty \(it has no tables\)"):
        members(where, 2, runner)[1].restore()


def test_a_generation_being_created_is_not_taken_for_damage(where, runner):
    # the processes of a rescaled run start together: each makes its own file of g2-w3 while the others read
    complete_run(where, runner, 2, 4, "first")
    starting = members(where, 3, runner)
    assert starting[0].restore().snapshot == 4
    starting[0].begin(4)
    starting[0].write(5, 6, "fast")                                  # (a source may cut before its peers began)
    assert starting[1].restore().snapshot == 4                       # worker-1 and worker-2 are not there yet
    starting[1].begin(4)
    (where / "state" / "g2-w3" / "worker-2.sqlite3").write_bytes(b"")   # being made: no tables yet
    assert starting[2].restore().snapshot == 4
    starting[2].begin(4)
    assert [m.restore().snapshot for m in members(where, 3, runner)] == [4, 4, 4]


def test_a_generation_that_lost_every_file_or_its_folder_is_refused(where, runner):
    complete_run(where, runner, 1, 4, "first")                   # one worker: its one file is the generation
    complete_run(where, runner, 3, 7, "second")                   # g1's records pruned: g2 supersedes it
    state = where / "state"
    assert sorted(p.name for p in state.iterdir()) == ["g1-w1", "g1-w1.committed", "g2-w3", "g2-w3.committed"]
    for file in (state / "g2-w3").iterdir():
        file.unlink()
    with pytest.raises(RecoveryError, match=r"g2-w3 holds snapshots, and its file worker-0.sqlite3 is missing"):
        members(where, 1, runner)[0].restore()
    (state / "g2-w3").rmdir()
    with pytest.raises(RecoveryError, match=r"g2-w3 holds snapshots \(g2-w3.committed says so\), and its folder is "
                                            r"missing"):
        members(where, 1, runner)[0].restore()
    (state / "g2-w3.committed").unlink()                              # and even without its mark: g1 knows
    with pytest.raises(RecoveryError, match=r"g1-w1 was superseded by g2-w3 for dataflow 'flow'.*holds none now"):
        members(where, 1, runner)[0].restore()


def test_a_lone_worker_that_lost_its_file_is_refused(where, runner):
    complete_run(where, runner, 1, 4, "first")
    (where / "state" / "g1-w1" / "worker-0.sqlite3").unlink()
    with pytest.raises(RecoveryError, match=r"g1-w1 holds snapshots, and its file worker-0.sqlite3 is missing"):
        members(where, 1, runner)[0].restore()


def latest_record(path: Path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT rowid, lo, hi, state FROM snapshots ORDER BY lo DESC LIMIT 1").fetchone()
    finally:
        db.close()


def alter(path: Path, sql: str, *args) -> None:
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(sql, args)
    finally:
        db.close()


def test_a_changed_record_is_refused_naming_file_dataflow_and_snapshots(where, runner):
    complete_run(where, runner, 2, 4, "first")
    path = where / "state" / "g1-w2" / "worker-1.sqlite3"
    rowid, lo, hi, state = latest_record(path)
    changed = pickle.dumps({"op": pickle.dumps(("first", 2))})
    alter(path, "UPDATE snapshots SET state = ? WHERE rowid = ?", changed, rowid)
    with pytest.raises(RecoveryError, match=r"worker-1.sqlite3: the record of snapshots 1..4 of dataflow 'flow' "
                                            r"does not match its checksum"):
        members(where, 2, runner)[0].restore()


def test_a_changed_range_or_drained_mark_is_refused(where, runner):
    complete_run(where, runner, 2, 4, "first")
    path = where / "state" / "g1-w2" / "worker-0.sqlite3"
    alter(path, "UPDATE snapshots SET hi = 9")
    with pytest.raises(RecoveryError, match=r"worker-0.sqlite3: the record of snapshots 1..9 of dataflow 'flow'"):
        members(where, 2, runner)[0].restore()
    alter(path, "UPDATE snapshots SET hi = 4")
    alter(path, "UPDATE dataflows SET drained = 9")
    with pytest.raises(RecoveryError, match=r"worker-0.sqlite3: the entry of dataflow 'flow' .* does not match"):
        members(where, 2, runner)[0].restore()
    alter(path, "UPDATE dataflows SET drained = 4")
    assert members(where, 2, runner)[0].restore().snapshot == 4   # (the file as written passes)
    alter(path, "UPDATE meta SET value = 1 WHERE key = 'worker'")
    with pytest.raises(RecoveryError, match=r"worker-0.sqlite3 has a changed or damaged header"):
        members(where, 2, runner)[0].restore()


def test_a_directory_of_the_older_format_is_refused_saying_what_to_do(where, runner):
    complete_run(where, runner, 2, 4, "first")
    for w in range(2):
        alter(where / "state" / "g1-w2" / f"worker-{w}.sqlite3",
              "UPDATE meta SET value = 'aiotimely snapshots 2' WHERE key = 'format'")
    with pytest.raises(RecoveryError, match=r"older format 'aiotimely snapshots 2'.*move the recovery directory "
                                            r".* away to start afresh"):
        members(where, 2, runner)[0].restore()
