"""The source :func:`~aiotimely.connectors.kafka.source` makes, as small parts with one job each.

* :class:`KafkaClient` — what the source asks of aiokafka: a consumer of the group, a partition's name, a commit.
* :class:`Assignment` — which partitions of the topic this worker reads (partition ``p`` on worker ``p % peers``)
  and where each starts: at the position the snapshot resumed from keeps, or at the group's committed offset
  (or the beginning).
* :class:`RecordTimes` — the times records get, by ``time=``: :class:`PollTimes`, :class:`OffsetTimes`, or
  :class:`EventTimes` (an :class:`~aiotimely.connectors.EventTime` per partition, time moving on once every
  partition of the worker is past it; a poll's records are held until it ends, then timed and sent together).
* :class:`TimedOutput` — sends records at their times under the source's capability (remembering them for
  snapshots), and after each poll moves each partition's low time and the capability on.
* :class:`Fetch` — one poll: up to ``max_records`` records, asked for a bunch at a time while aiokafka has them
  at hand, each bunch made into records and sent on before the next is asked for.
* :class:`OffsetCommits` — at-least-once commits: the positions of the latest snapshot complete everywhere, or
  (with a probe) the offsets before which every record is complete downstream; every ``commit_interval`` on the
  clock while reading, and once more when the source has ended.
* :class:`IdleTimeout` — the end after ``idle_timeout`` seconds on the clock without a record.
* :class:`KafkaSource` — the logic on one worker, composed of the above.

Durations are read on a :class:`~aiotimely.worker.clock.Clock` (:data:`.sources.CLOCK` by default), so tests drive
commits and idle timeouts by hand.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from ..dataflow.input import SourceStopped
from .aiter import EventTime
from .positions import SourcePart, SourcePositions
from .sources import send_again

if TYPE_CHECKING:
    from ..dataflow import Capability, OperatorOutput, ProbeHandle
    from ..progress import Antichain
    from ..worker import WorkerHandle
    from ..worker.clock import Clock

__all__ = ["Timed", "KafkaClient", "Assignment", "RecordTimes", "PollTimes", "OffsetTimes", "EventTimes",
           "record_times", "TimedOutput", "Fetch", "Checkpoints", "OffsetCommits", "IdleTimeout", "KafkaSource",
           "past_stop"]

log = logging.getLogger("aiotimely.connectors.kafka")

Timed = list[tuple[int, list[Any]]]
"""Records grouped by time, earliest time first."""


class KafkaClient:
    """What the source asks of aiokafka (the module, given), for one topic and consumer group."""

    __slots__ = ("aiokafka", "bootstrap", "topic", "group_id")

    def __init__(self, aiokafka: Any, bootstrap: str, topic: str, group_id: str) -> None:
        self.aiokafka = aiokafka
        self.bootstrap = bootstrap
        self.topic = topic
        self.group_id = group_id

    def consumer(self) -> Any:
        """A consumer in the group that commits only when told, and starts a partition without a committed offset
        at its beginning."""
        return self.aiokafka.AIOKafkaConsumer(bootstrap_servers=self.bootstrap, group_id=self.group_id,
                                              enable_auto_commit=False, auto_offset_reset="earliest")

    def partition(self, number: int) -> Any:
        """The topic's partition ``number``, as aiokafka names it."""
        return self.aiokafka.TopicPartition(self.topic, number)

    async def commit(self, consumer: Any, offsets: dict[int, int]) -> None:
        """Commit the group's ``offsets`` (partition -> the next offset to read), if there are any."""
        if offsets:
            await consumer.commit({self.partition(p): o for p, o in offsets.items()})
            log.debug("committed %s", offsets)


class Assignment:
    """The partitions of the topic this worker reads, assigned to its consumer by aiotimely (no consumer-group
    rebalancing), and where each starts."""

    __slots__ = ("client", "consumer", "index", "peers", "name", "tps")

    def __init__(self, client: KafkaClient, consumer: Any, index: int, peers: int, name: str) -> None:
        self.client = client
        self.consumer = consumer
        self.index = index
        self.peers = peers
        self.name = name
        self.tps: dict[int, Any] = {}
        """Per partition number, its aiokafka name (once assigned)."""

    async def partitions(self, given: list[int] | None) -> list[int]:
        """The topic's partitions: ``given``, or those the broker knows of (asked for up to 100 times, 50 ms
        apart, while it has no metadata for the topic yet)."""
        if given is not None:
            return given
        consumer, topic = self.consumer, self.client.topic
        for _ in range(100):
            found = consumer.partitions_for_topic(topic)
            if found:
                break
            await consumer.topics()
            await asyncio.sleep(0.05)
        known = sorted(found or [])
        if not known:
            raise ValueError(f"{self.name}: topic {topic!r} has no partitions at {self.client.bootstrap}")
        return known

    def mine(self, numbers: list[int], policy_for: Callable[[int], EventTime | None]) -> list[SourcePart]:
        """This worker's parts of the partitions ``numbers`` (``p % peers == index``), each with its time policy."""
        return [SourcePart(p, policy_for(p)) for p in numbers if p % self.peers == self.index]

    def assign(self, parts: list[SourcePart]) -> None:
        """Assign the consumer the partitions of ``parts``."""
        self.tps = {p.number: self.client.partition(p.number) for p in parts}
        self.consumer.assign(list(self.tps.values()))

    async def start(self, parts: list[SourcePart], positions: SourcePositions, start: int) -> list[tuple[int, Any]]:
        """Set each part up to read on from where the snapshot resumed from (at time ``start``) left it, or from
        the group's committed offset (or the beginning); the records the snapshot kept, to send again."""
        consumer, tps, restored = self.consumer, self.tps, positions.restored
        again: list[tuple[int, Any]] = []
        for p in parts:
            again.extend(positions.resume(p, start))
            if p.number in restored:  # read on where the snapshot says (before any fetch starts)
                consumer.seek(tps[p.number], p.position)
        for p in parts:
            if p.number not in restored:
                # The group's committed offset, or the beginning: aiokafka starts a partition assigned to a
                # consumer with a group there (auto_offset_reset="earliest"). Seeking there again would
                # drop the records it has already fetched, and fetch them again.
                p.position = await consumer.position(tps[p.number])
        return again


class RecordTimes:
    """The times a partition's records get (``time=`` of the source); each kind is a subclass."""

    __slots__ = ()

    def policy_for(self, partition: int) -> EventTime | None:
        """The time policy of ``partition`` (``None``: times need none)."""
        return None

    def take(self, part: SourcePart, records: list[Any], poll: int) -> Timed | None:
        """``records`` (of ``part``, taken in poll number ``poll``) grouped by time, to be sent now; ``None``: they
        are held until :meth:`release`."""
        raise NotImplementedError

    def release(self) -> list[tuple[SourcePart, Timed]]:
        """The records held in the poll that ended, per part, grouped by time."""
        return []

    def low(self, part: SourcePart, poll: int) -> int:
        """The earliest time still to come from ``part`` once ``poll`` is the next poll's number."""
        raise NotImplementedError


class PollTimes(RecordTimes):
    """Each poll of a worker the next integer time."""

    __slots__ = ()

    def take(self, part: SourcePart, records: list[Any], poll: int) -> Timed:
        return [(poll, records)]

    def low(self, part: SourcePart, poll: int) -> int:
        return poll


class OffsetTimes(RecordTimes):
    """A record's offset, divided by ``bucket``."""

    __slots__ = ("bucket",)

    def __init__(self, bucket: int) -> None:
        self.bucket = bucket

    def take(self, part: SourcePart, records: list[Any], poll: int) -> Timed:
        bucket = self.bucket
        times: Timed = []
        for r in records:
            t = r.offset // bucket
            if times and times[-1][0] == t:
                times[-1][1].append(r)
            else:
                times.append((t, [r]))
        return times

    def low(self, part: SourcePart, poll: int) -> int:
        return part.position // self.bucket


class EventTimes(RecordTimes):
    """Event time (``time_of(record)``), by an :class:`EventTime` per partition (bounded ``lateness``, ``late=``
    for what comes later); a poll's records are held until it ends, and timed then, all together."""

    __slots__ = ("time_of", "lateness", "late", "where", "held")

    def __init__(self, time_of: Callable[[Any], int], lateness: int, late: str, where: Callable[[int], str]) -> None:
        self.time_of = time_of
        self.lateness = lateness
        self.late = late
        self.where = where
        self.held: dict[SourcePart, list[Any]] = {}

    def policy_for(self, partition: int) -> EventTime:
        policy = EventTime(self.time_of, self.lateness, late=self.late)
        policy.attach(self.where(partition))
        return policy

    def take(self, part: SourcePart, records: list[Any], poll: int) -> None:
        self.held.setdefault(part, []).extend(records)

    def release(self) -> list[tuple[SourcePart, Timed]]:
        released = [(part, _policy(part).times(records)) for part, records in self.held.items()]
        self.held.clear()
        return released

    def low(self, part: SourcePart, poll: int) -> int:
        return _policy(part).current()


def _policy(part: SourcePart) -> EventTime:
    policy = part.policy
    assert isinstance(policy, EventTime)
    return policy


def _timestamp(record: Any) -> int:
    """``time="timestamp"``: the record's Kafka timestamp."""
    return record.timestamp  # type: ignore[no-any-return]


def record_times(time: str | Callable[[Any], int], offset_bucket: int, lateness: int, late: str,
                 where: Callable[[int], str]) -> RecordTimes:
    """The :class:`RecordTimes` of ``time=`` (checked already): ``"poll"``, ``"offset"``, ``"timestamp"`` or a
    function of the record; ``where(partition)`` names the source for an event-time policy's log."""
    if time == "poll":
        return PollTimes()
    if time == "offset":
        return OffsetTimes(offset_bucket)
    return EventTimes(time if callable(time) else _timestamp, lateness, late, where)


class TimedOutput:
    """Sends records at their times under the source's capability (remembered for snapshots while they may be cut
    before them), notes per partition the latest time sent in a poll (for the commits' checkpoints), and moves the
    parts' low times and the capability on after each poll."""

    __slots__ = ("output", "cap", "positions", "every", "latest", "columns")

    def __init__(self, output: OperatorOutput, cap: Capability, positions: SourcePositions,
                 columns: Callable[[list[Any]], Any] | None = None) -> None:
        self.output = output
        self.cap = cap
        self.positions = positions
        self.every = positions.every
        self.latest: dict[int, int] = {}
        """Per partition, the latest time sent since :meth:`take_latest`."""
        self.columns = columns
        """A columnar source's maker of one Arrow batch of the records of a time (``None``: records go as they
        are)."""

    def give(self, at: Capability, group: list[Any]) -> None:
        """Send ``group`` at ``at``'s time: the records, or one Arrow batch of them."""
        if self.columns is None:
            self.output.session(at).give_many(group)
        else:
            self.output.session(at).give_container(self.columns(group))

    def send(self, part: SourcePart, times: Timed) -> None:
        """Send ``part``'s records, grouped by time (earliest first), now."""
        cap, every = self.cap, self.every
        for t, group in times:
            with cap.delayed(t) as at_t:
                self.give(at_t, group)
            if every is not None:
                part.sent(t, group)
        self.latest[part.number] = times[-1][0]

    def send_together(self, released: list[tuple[SourcePart, Timed]]) -> None:
        """Send the records a poll held, the records of every part at a time as one batch, earliest time first."""
        every = self.every
        groups: dict[int, list[Any]] = {}
        for part, times in released:
            for t, group in times:
                groups.setdefault(t, []).extend(group)
                if every is not None:
                    part.sent(t, group)
            if times:  # (none if every record of the partition's poll was late, and dropped)
                self.latest[part.number] = max(t for t, _ in times)
        cap = self.cap
        for t in sorted(groups):
            with cap.delayed(t) as at_t:
                self.give(at_t, groups[t])

    def take_latest(self) -> dict[int, int]:
        """The latest time sent per partition since the last call."""
        latest, self.latest = self.latest, {}
        return latest

    def follow(self, parts: list[SourcePart], times: RecordTimes, poll: int) -> None:
        """After a poll (``poll`` the next one's number): each part's low time moves on, the snapshots the least
        of them passed are reported, and the capability moves there."""
        for p in parts:
            p.moved(times.low(p, poll), self.every)
        low = min(p.low for p in parts)
        self.positions.report(low)
        if low > self.cap.time:
            self.cap.downgrade(low)


class Fetch:
    """Polls the consumer. One poll takes up to ``max_records`` records, asked for ``bunch`` at a time while
    aiokafka has them at hand (only the first ask waits, up to ``poll_ms``); each bunch is made into records of
    ``record_type`` and sent on (or held, by event time) before the next is asked for."""

    __slots__ = ("consumer", "tps", "parts", "times", "out", "record_type", "max_records", "poll_ms", "bunch")

    def __init__(self, consumer: Any, tps: list[Any], parts: dict[int, SourcePart], times: RecordTimes,
                 out: TimedOutput, record_type: type[tuple[Any, ...]], *, max_records: int, poll_ms: int,
                 bunch: int) -> None:
        self.consumer = consumer
        self.tps = tps
        self.parts = parts
        self.times = times
        self.out = out
        self.record_type = record_type
        self.max_records = max_records
        self.poll_ms = poll_ms
        self.bunch = bunch

    async def poll(self, number: int) -> tuple[int, bool]:
        """Poll number ``number``: how many records it took, and whether the computation is stopping
        (``SourceStopped`` came; what the poll took so far has been taken all the same)."""
        getmany, tps, max_records, bunch = self.consumer.getmany, self.tps, self.max_records, self.bunch
        got, timeout = 0, self.poll_ms
        try:
            while got < max_records:
                taken = self.take(await getmany(*tps, timeout_ms=timeout, max_records=min(bunch, max_records - got)),
                                  number)
                if not taken:
                    break
                got += taken
                timeout = 0
        except SourceStopped:
            return got, True
        return got, False

    def take(self, polled: dict[Any, list[Any]], poll: int) -> int:
        """Make ``polled`` (aiokafka's messages by partition) into records and send them on at their times (or
        hold them); returns how many there were."""
        new = tuple.__new__  # KafkaRecord(...) costs twice as much: NamedTuple's __new__ is Python code
        kind, parts, times, out = self.record_type, self.parts, self.times, self.out
        count = 0
        for tp, messages in polled.items():
            if not messages:
                continue
            count += len(messages)
            part = parts[tp.partition]
            records = [new(kind, (m.topic, m.partition, m.offset, m.key, m.value, m.timestamp)) for m in messages]
            part.position = messages[-1].offset + 1
            timed = times.take(part, records, poll)
            if timed is not None:
                out.send(part, timed)
        return count


class Checkpoints:
    """Per partition, offsets that may be committed once given times are complete."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: dict[int, list[tuple[Any, int]]] = {}

    def add(self, partition: int, latest_time: Any, next_offset: int) -> None:
        self._pending.setdefault(partition, []).append((latest_time, next_offset))

    def complete(self, frontier: Antichain[Any]) -> dict[int, int]:
        """The offset to commit per partition: the last checkpoint whose time the frontier passed."""
        ready: dict[int, int] = {}
        for partition, marks in self._pending.items():
            done = 0
            for latest_time, next_offset in marks:
                if frontier.less_equal(latest_time):
                    break
                ready[partition] = next_offset
                done += 1
            del marks[:done]
        return ready


class OffsetCommits:
    """At-least-once commits of the group's offsets. In a recoverable dataflow: the positions of the latest
    snapshot complete everywhere. Otherwise, with a ``probe`` (``commit=``): per partition, the offset after the
    last poll whose records the probe shows complete. Every ``interval`` seconds on ``clock`` while the source
    reads, and once more when it has ended, after what it sent is complete."""

    __slots__ = ("client", "consumer", "probe", "positions", "clock", "interval_ms", "checkpoints", "last")

    def __init__(self, client: KafkaClient, consumer: Any, probe: ProbeHandle | None, positions: SourcePositions,
                 clock: Clock, interval: float) -> None:
        self.client = client
        self.consumer = consumer
        self.probe = probe
        self.positions = positions
        self.clock = clock
        self.interval_ms = interval * 1000
        self.checkpoints = Checkpoints()
        self.last = clock.now()
        """When the last commit was (ms on the clock; made: when reading starts)."""

    def polled(self, latest: dict[int, int], parts: dict[int, SourcePart]) -> None:
        """A poll ended that sent records up to ``latest`` times per partition: committing by probe, each such
        partition's position may be committed once the probe has passed its time."""
        if self.probe is not None and self.positions.every is None:  # (nothing else reads them)
            for number, t in latest.items():
                self.checkpoints.add(number, t, parts[number].position)

    async def when_due(self) -> bool:
        """Commit what is complete, if ``interval`` has passed since the last time; whether the computation is
        stopping (a ``SourceStopped`` came: the final commit covers this one)."""
        if self.clock.now() - self.last < self.interval_ms:
            return False
        stopped = False
        try:
            if self.positions.every is not None:
                await self.client.commit(self.consumer, self.positions.complete())
            elif self.probe is not None:
                await self.client.commit(self.consumer, self.checkpoints.complete(self.probe.frontier))
        except SourceStopped:
            stopped = True
        self.last = self.clock.now()
        return stopped

    async def final(self, parts: list[SourcePart]) -> None:
        """The source has ended: wait until what it sent is complete (in a snapshot, or by the probe), and commit
        that."""
        positions, client, consumer = self.positions, self.client, self.consumer
        if positions.every is not None:
            snapshotter = positions.snapshotter
            assert snapshotter is not None
            through = positions.participant.through if positions.participant else 0
            await past_stop(lambda: snapshotter.wait_complete(through))
            await past_stop(lambda: client.commit(consumer, {p.number: p.position for p in parts}))
        elif self.probe is not None:
            probe = self.probe
            await past_stop(probe.wait_done)
            await past_stop(lambda: client.commit(consumer, self.checkpoints.complete(probe.frontier)))


class IdleTimeout:
    """Whether ``seconds`` (``None``: never) have passed on ``clock`` since the last records came (made: when
    reading starts)."""

    __slots__ = ("clock", "limit_ms", "last")

    def __init__(self, clock: Clock, seconds: float | None) -> None:
        self.clock = clock
        self.limit_ms = None if seconds is None else seconds * 1000
        self.last = clock.now()

    def saw_records(self) -> None:
        """Records came now."""
        self.last = self.clock.now()

    def passed(self) -> bool:
        """The time without records is over."""
        return self.limit_ms is not None and self.clock.now() - self.last > self.limit_ms


async def past_stop(wait: Callable[[], Awaitable[None]]) -> None:
    """Await ``wait()`` to its end: a stop asked for meanwhile interrupts it (once, with :class:`SourceStopped`),
    but the source has ended already, and the draining the stop starts is what this waits for."""
    try:
        await wait()
    except SourceStopped:
        await wait()


class KafkaSource:
    """The logic of a ``kafka.source`` on one worker: ``source(scope, name, KafkaSource(...).run)``. It reads
    until ``stop`` is set, the computation is asked to stop, or it has been idle for ``idle_timeout``."""

    __slots__ = ("client", "times", "worker", "partitions", "record_type", "max_records", "poll_ms", "bunch", "probe",
                 "commit_interval", "idle_timeout", "stop", "clock", "name", "columns")

    def __init__(self, client: KafkaClient, times: RecordTimes, *, worker: WorkerHandle,
                 partitions: list[int] | None, record_type: type[tuple[Any, ...]], max_records: int, poll_ms: int,
                 bunch: int, probe: ProbeHandle | None, commit_interval: float, idle_timeout: float | None,
                 stop: asyncio.Event | None, clock: Clock, name: str,
                 columns: Callable[[list[Any]], Any] | None = None) -> None:
        self.client = client
        self.times = times
        self.worker = worker
        self.partitions = partitions
        self.record_type = record_type
        self.max_records = max_records
        self.poll_ms = poll_ms
        self.bunch = bunch
        self.probe = probe
        self.commit_interval = commit_interval
        self.idle_timeout = idle_timeout
        self.stop = stop
        self.clock = clock
        self.name = name
        self.columns = columns
        """A columnar source's maker of one Arrow batch of records (``None``: a stream of records)."""

    async def run(self, output: OperatorOutput, cap: Capability) -> None:
        """Assign this worker its partitions, start each where it left off, send again what the snapshot kept,
        read, and end."""
        consumer = self.client.consumer()
        start = output.resume_time()
        parts: list[SourcePart] = []
        positions = SourcePositions(output, parts)
        await consumer.start()
        try:
            assignment = Assignment(self.client, consumer, self.worker.index, self.worker.peers, self.name)
            parts.extend(assignment.mine(await assignment.partitions(self.partitions), self.times.policy_for))
            if not parts:
                positions.finish()
                cap.drop()
                return
            assignment.assign(parts)
            cap.downgrade(start)
            send_again(output, cap, await assignment.start(parts, positions, start), self.columns)
            out = TimedOutput(output, cap, positions, self.columns)
            commits = OffsetCommits(self.client, consumer, self.probe, positions, self.clock, self.commit_interval)
            fetch = Fetch(consumer, list(assignment.tps.values()), {p.number: p for p in parts}, self.times, out,
                          self.record_type, max_records=self.max_records, poll_ms=self.poll_ms, bunch=self.bunch)
            await self.read(fetch, out, commits, parts, start)
            await self.end(parts, positions, cap, commits)
        finally:
            await consumer.stop()

    async def end(self, parts: list[SourcePart], positions: SourcePositions, cap: Capability,
                  commits: OffsetCommits) -> None:
        """The source has read its last: its policies say what is left to say, its positions stand for every
        later snapshot, its capability goes, and what it sent is committed once complete."""
        for p in parts:
            if p.policy is not None:
                p.policy.finish()
        positions.finish()
        cap.drop()
        await commits.final(parts)

    async def read(self, fetch: Fetch, out: TimedOutput, commits: OffsetCommits, parts: list[SourcePart],
                   poll: int) -> None:
        """Poll (the first poll numbered ``poll``) until asked to stop or idle: after each poll, send what it
        held, note the commits' checkpoints, move time on, and commit when due."""
        idle = IdleTimeout(self.clock, self.idle_timeout)
        times, stop, by_number = self.times, self.stop, fetch.parts
        stopped = False  # the computation is stopping: end as at the end of the topic
        asked: list[bool] = []  # (a poll that finds records waiting does not wait: no SourceStopped comes then)
        forget = self.worker.on_stop(lambda: asked.append(True))
        while not stopped and not asked and not (stop is not None and stop.is_set()):
            got, stopped = await fetch.poll(poll)
            out.send_together(times.release())
            commits.polled(out.take_latest(), by_number)
            if got:
                idle.saw_records()
                poll += 1
            out.follow(parts, times, poll)
            if not stopped:
                stopped = await commits.when_due()
            if idle.passed():
                break
        forget()
