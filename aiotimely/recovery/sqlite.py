"""The default snapshot store: SQLite files in a recovery directory, one per worker.

Layout::

    DIRECTORY/g1-w4/worker-0.sqlite3 ... worker-3.sqlite3     a generation: the files of a run of 4 workers
    DIRECTORY/g2-w2/worker-0.sqlite3, worker-1.sqlite3        the next, after a restart with 2 workers

A run writes into the latest generation if it has the run's number of workers, else into a new one (every
process of the run picks the same: the choice depends only on the folders there are, and a new folder is
made before any file in it). Each worker writes only its own file, in a thread (never on the event loop),
one transaction per record: a range of snapshots that its operators cover alike, with a checksum of the
stored state and of the range. Resuming, every worker reads every file of the generation it resumes from,
so the directory must be one that every process can read: a local disk for processes of one machine, or a
shared file system (NFS, EFS, SMB) that honours SQLite's locks. A store for machines that share nothing (an
object store) would implement the same methods (:class:`~aiotimely.dataflow.state.StateStore`) over objects
named by dataflow, worker and snapshot range, with "the latest complete snapshot" found by listing them.

**Which snapshot a generation holds.** Each file keeps, per dataflow, its records (``lo..hi``: one state
for those snapshots; ``hi`` NULL: every later one too) and a *drained* mark (nothing anywhere is in flight
at the times of the snapshots up to it: global knowledge, which progress tracking gives every worker). A
snapshot counts in a generation only if every worker's file has a record covering it and one worker's mark
reaches it: the latest such is the generation's complete snapshot. A run that resumes from this
generation keeps each file's records up to the snapshot resumed from and sets the marks to that snapshot;
one that resumes from another generation, or afresh, clears its records there and sets the marks to 0.
Each worker does so for its own file, then lowers the other workers' marks to the same (a mark higher can
only be an earlier run's, which must not count for this run's records). A worker marks a snapshot past the
one it resumed from only once progress tracking tells it that every worker of its run is past it, which
no worker is before every worker began; so records and marks of two runs are never combined, and a
generation never claims a snapshot it has no records of. ``restore`` takes the latest generation with a
complete snapshot; once a newer generation has one, each worker deletes the records of older generations
(those of the old workers ``j`` with ``j % workers == worker``) and marks them *superseded* by the newer.

**What is damage.** A generation is *committed* once a worker marked a snapshot drained in it: the first to
do so makes the file ``DIRECTORY/g{N}-w{W}.committed`` before it records its mark. By the rule above every
worker of that run had made its file by then, so a committed generation is missing none legitimately. A
generation that is being created (the processes of one run starting together, each making its own file
while others read) is not committed yet: a file of it that is not there, or has no tables yet, just means
that it holds no snapshot. In a committed generation newer than the one resumed from, or that one, a
missing or empty file (or a missing folder) is damage: ``restore`` refuses it (``RecoveryError`` naming the
folder and the file, and saying to restore it or to move the directory away) rather than resume from an
older snapshot or from nothing while, say, Kafka offsets were committed for the lost one. So is a generation
reached while it says it was superseded (the newer generation that superseded it lost its snapshots), a
record, drained mark or header whose checksum does not match (the file was changed), and a file of another
format (the older format 2 included: its directory is to be moved away).

Snapshots are pickled: a recovery directory is trusted as the program's own files are (reading one runs
whatever a writer put there). The checksums catch damage, not malice.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import pickle
import re
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from ..dataflow.state import Restored
from ..errors import RecoveryError

__all__ = ["Recovery"]

FORMAT = "aiotimely snapshots 3"
_OLDER_FORMATS = ("aiotimely snapshots 2",)
_GENERATION = re.compile(r"^g(\d+)-w(\d+)$")
_ALL = 1 << 62
"""Every snapshot id (a drained mark stored as NULL): the dataflow is done."""
_MARK = ".committed"
_FIX = "restore the file, or move the recovery directory {directory} away to start afresh"


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _range_check(dataflow: str, lo: int, hi: int | None, digest: bytes) -> bytes:
    """The checksum of a record: its dataflow, its range and its state's digest."""
    return _digest(f"{dataflow}\0{lo}\0{hi}\0".encode() + digest)


def _row_check(name: str, shape: str, drained: int | None, superseded: str | None) -> bytes:
    """The checksum of a dataflow's row: its shape, its drained mark, what superseded it."""
    return _digest(f"{name}\0{shape}\0{drained}\0{superseded}".encode())


def _meta_check(meta: dict[str, object]) -> str:
    return _digest(repr(sorted((k, v) for k, v in meta.items() if k != "checksum")).encode()).hex()


def _span(lo: int, hi: int | None) -> str:
    return f"snapshots {lo}..{'' if hi is None else hi}"


@contextmanager
def _transaction(db: sqlite3.Connection, kind: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
    """One transaction on a connection in autocommit mode: committed if the block ends, else rolled back."""
    db.execute(f"BEGIN {kind}")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@dataclass
class _Found:
    """A generation's complete snapshot of a dataflow."""

    snapshot: int
    shape: str
    workers: int
    folder: Path


class Recovery:
    """Snapshots of every dataflow, cut every ``every`` units of its time, kept in SQLite files under
    ``directory``: give it to ``aiotimely.execute(..., recovery=Recovery("state/", every=10))`` (or to
    ``Worker(recovery=...)``). Started again with the same directory, a computation resumes each dataflow
    from its latest snapshot complete on every worker."""

    def __init__(self, directory: str | Path, *, every: int = 1) -> None:
        if type(every) is not int or every < 1:
            raise ValueError(f"every must be a positive int (units of the dataflows' time), not {every!r}")
        self.directory = Path(directory)
        self.every = every
        self._resumed: dict[tuple[str, int], Path | None] = {}   # (dataflow, worker) -> generation resumed from
        self._writing: dict[int, tuple[Path, int]] = {}   # worker -> the generation it writes, and its workers
        # (both by worker or popped once used: a long build of many short dataflows keeps nothing per dataflow)
        self._queues: dict[int, _Queue] = {}                     # worker -> its store operations, in order
        self._committed: set[Path] = set()                       # generations known to be marked committed
        self._writers: dict[Path, tuple[sqlite3.Connection, int | None]] = {}   # path -> connection, inode

    def __repr__(self) -> str:
        return f"Recovery({str(self.directory)!r}, every={self.every})"

    # -- the files ------------------------------------------------------------------

    def _generations(self, *, marked: bool = False) -> list[tuple[int, int, Path]]:
        """``(generation, workers, folder)`` of every generation in the directory, oldest first; with ``marked``,
        also those of which only the committed mark is left (their folder is missing)."""
        found = set()
        if self.directory.is_dir():
            for child in self.directory.iterdir():
                name = child.name
                if marked and name.endswith(_MARK):
                    name = name[:-len(_MARK)]
                elif not child.is_dir():
                    continue
                match = _GENERATION.match(name)
                if match:
                    found.add((int(match.group(1)), int(match.group(2)), self.directory / name))
        return sorted(found)

    def _marker(self, folder: Path) -> Path:
        """The file saying that ``folder`` is committed: a worker marked a snapshot drained in it."""
        return folder.parent / f"{folder.name}{_MARK}"

    def _commit(self, folder: Path) -> None:
        if folder not in self._committed:
            self._marker(folder).touch(exist_ok=True)
            self._committed.add(folder)

    def _writing_generation(self, peers: int) -> Path:
        """The generation this run writes: the latest, if it had this many workers; else a new one. Every
        worker of every process of a run picks the same (a new folder is made before any file in it)."""
        generations = self._generations()
        if generations and generations[-1][1] == peers:
            folder = generations[-1][2]
        else:
            number = generations[-1][0] + 1 if generations else 1
            folder = self.directory / f"g{number}-w{peers}"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @staticmethod
    def _file(folder: Path, worker: int) -> Path:
        return folder / f"worker-{worker}.sqlite3"

    def _fix(self) -> str:
        return _FIX.format(directory=self.directory)

    def _create(self, path: Path, worker: int, peers: int) -> sqlite3.Connection:
        """Open this worker's file, creating it (tables and identity in one transaction, so that a reader
        sees either no tables or all of them) if it is not there yet."""
        try:
            db = sqlite3.connect(path, timeout=60, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            with _transaction(db):
                db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value)")
                db.execute("CREATE TABLE IF NOT EXISTS dataflows (name TEXT PRIMARY KEY, shape TEXT, "
                           "drained INTEGER, superseded TEXT, checksum BLOB)")
                db.execute("CREATE TABLE IF NOT EXISTS snapshots (dataflow TEXT, lo INTEGER, hi INTEGER, "
                           "digest BLOB, checksum BLOB, state BLOB, PRIMARY KEY (dataflow, lo))")
                if db.execute("SELECT count(*) FROM meta").fetchone()[0] == 0:
                    meta: dict[str, object] = {"format": FORMAT, "every": self.every, "worker": worker,
                                               "peers": peers, "generation": path.parent.name}
                    meta["checksum"] = _meta_check(meta)
                    db.executemany("INSERT INTO meta VALUES (?, ?)", list(meta.items()))
        except sqlite3.DatabaseError as e:
            raise RecoveryError(f"{path} is not a snapshot file aiotimely can read ({e}): is the recovery "
                                "directory another program's, or damaged?") from None
        self._check_meta(db, path, worker, peers)
        return db

    def _open(self, path: Path, worker: int, peers: int) -> sqlite3.Connection | None:
        """Open a worker's file to read it, checking that it is a snapshot file of this kind; ``None`` if it is
        not there, or has no tables (being created by another process right now, or emptied)."""
        if not path.exists():
            return None
        try:
            db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=rw", uri=True, timeout=60, isolation_level=None)
            if db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").fetchone()[0] == 0:
                db.close()
                return None
        except sqlite3.DatabaseError as e:
            raise RecoveryError(f"{path} is not a snapshot file aiotimely can read ({e}): the recovery directory "
                                f"is another program's, or damaged; {self._fix()}") from None
        self._check_meta(db, path, worker, peers)
        return db

    def _check_meta(self, db: sqlite3.Connection, path: Path, worker: int, peers: int) -> None:
        try:
            meta = dict(db.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as e:
            db.close()
            raise RecoveryError(f"{path} is not a snapshot file aiotimely can read ({e}): the recovery directory "
                                f"is another program's, or damaged; {self._fix()}") from None
        problem = None
        if meta.get("format") in _OLDER_FORMATS:
            problem = (f"{path} holds snapshots in the older format {meta['format']!r}, and this aiotimely reads "
                       f"{FORMAT!r} only: finish the computation with the aiotimely that wrote it, or move the "
                       f"recovery directory {self.directory} away to start afresh")
        elif meta.get("format") != FORMAT:
            problem = f"{path} is not an aiotimely snapshot file (format {meta.get('format')!r})"
        elif meta.get("checksum") != _meta_check(meta):
            problem = (f"{path} has a changed or damaged header (its checksum does not match): "
                       f"{self._fix()}")
        elif meta.get("every") != self.every:
            problem = (f"{path} holds snapshots cut every {meta.get('every')} units of time, and this run cuts "
                       f"them every {self.every}: use the same 'every', or another directory")
        elif (meta.get("worker") != worker or meta.get("peers") != peers
              or meta.get("generation") != path.parent.name):
            problem = (f"{path} belongs to worker {meta.get('worker')} of {meta.get('peers')} in "
                       f"{meta.get('generation')}, not to worker {worker} of {peers} in {path.parent.name}: the "
                       "recovery directory was rearranged")
        if problem is not None:
            db.close()
            raise RecoveryError(problem)

    # -- reading a generation ----------------------------------------------------------

    def _complete_in(self, folder: Path, workers: int, dataflow: str) -> _Found | None:
        """The latest snapshot of ``dataflow`` that every worker of this generation has a record of and marked
        drained; ``None`` if there is none. Raises if the generation is committed and damaged."""
        rows: list[tuple[str, int | None, str | None] | None] = []
        ranges: list[list[tuple[int, int | None]]] = []
        absent: list[tuple[int, Path, str]] = []
        committed = self._marker(folder).exists()
        if not folder.is_dir():
            raise RecoveryError(
                f"the recovery directory's generation {folder} holds snapshots ({self._marker(folder).name} says so), "
                f"and its folder is missing: without it no snapshot of that generation can be resumed from, and an "
                f"older one would repeat or lose what it kept (Kafka offsets may be committed for it); restore the "
                f"folder, or move the recovery directory {self.directory} away to start afresh")
        for w in range(workers):
            path = self._file(folder, w)
            db = self._open(path, w, workers)
            if db is None:
                absent.append((w, path, "is missing" if not path.exists() else "is empty (it has no tables)"))
                continue
            try:
                with _transaction(db, "DEFERRED"):      # one consistent read of the file
                    committed = committed or db.execute(
                        "SELECT count(*) FROM dataflows WHERE drained IS NULL OR drained != 0").fetchone()[0] > 0
                    row = db.execute("SELECT shape, drained, superseded, checksum FROM dataflows WHERE name = ?",
                                     (dataflow,)).fetchone()
                    records = db.execute("SELECT lo, hi, digest, checksum FROM snapshots WHERE dataflow = ? "
                                         "ORDER BY lo", (dataflow,)).fetchall()
            except sqlite3.DatabaseError as e:
                raise RecoveryError(f"{path} cannot be read ({e}): it is damaged; {self._fix()}") from None
            finally:
                db.close()
            if row is not None and row[3] != _row_check(dataflow, row[0], row[1], row[2]):
                raise RecoveryError(f"{path}: the entry of dataflow {dataflow!r} (its shape and drained mark) does "
                                    f"not match its checksum: the file was changed or damaged; {self._fix()}")
            for lo, hi, digest, check in records:
                if check != _range_check(dataflow, lo, hi, digest):
                    raise RecoveryError(f"{path}: the record of {_span(lo, hi)} of dataflow {dataflow!r} does not "
                                        f"match its checksum: the file was changed or damaged; {self._fix()}")
            rows.append(None if row is None else (row[0], row[1], row[2]))
            ranges.append([(lo, hi) for lo, hi, _, _ in records])
        if absent:
            if committed:
                w, path, what = absent[0]
                raise RecoveryError(
                    f"the recovery directory's generation {folder} holds snapshots, and its file {path.name} {what}"
                    f" (worker {w} of {workers}): without it no snapshot of that "
                    f"generation can be resumed from, and an older one would repeat or lose what the lost one "
                    f"kept (Kafka offsets may be committed for it); {self._fix()}")
            return None  # being created (the run's processes starting), or never got anywhere
        present = [row for row in rows if row is not None]
        for row in present:
            if row[2] is not None:
                raise RecoveryError(
                    f"the recovery directory's generation {folder} was superseded by {row[2]} for dataflow "
                    f"{dataflow!r} (its snapshots pruned once {row[2]} held a complete one), and {row[2]} holds "
                    f"none now: its files were lost or changed; restore them, or move the recovery directory "
                    f"{self.directory} away to start afresh")
        if len(present) < workers:
            if any(row[1] != 0 for row in present):
                lost = self._file(folder, rows.index(None))
                raise RecoveryError(f"{lost} has no entry of dataflow {dataflow!r}, and other files of its "
                                    f"generation have snapshots of it: the file was changed or damaged; "
                                    f"{self._fix()}")
            return None
        shapes = {row[0] for row in present}
        if len(shapes) > 1:
            raise RecoveryError(f"the recovery directory {folder} has snapshots of dataflows {dataflow!r} of "
                                "different shapes on different workers: were several programs run on it?")
        drained = max(_ALL if row[1] is None else row[1] for row in present)   # (one worker's knowledge is global)
        candidates = {drained} if drained < _ALL else set()
        for worker_ranges in ranges:
            candidates.update(lo if hi is None else hi for lo, hi in worker_ranges)
        for snapshot in sorted((c for c in candidates if 1 <= c <= drained), reverse=True):
            if all(any(lo <= snapshot and (hi is None or snapshot <= hi) for lo, hi in worker_ranges)
                   for worker_ranges in ranges):
                return _Found(snapshot, shapes.pop(), workers, folder)
        return None

    def _pieces(self, found: _Found, worker: int, dataflow: str) -> dict[str, bytes]:
        path, snapshot = self._file(found.folder, worker), found.snapshot
        db = self._open(path, worker, found.workers)
        if db is None:
            raise RecoveryError(f"{path} vanished while it was read; {self._fix()}")
        try:
            row = db.execute("SELECT lo, hi, digest, checksum, state FROM snapshots WHERE dataflow = ? AND lo <= ? "
                             "AND (hi IS NULL OR hi >= ?) ORDER BY lo DESC LIMIT 1",
                             (dataflow, snapshot, snapshot)).fetchone()
        except sqlite3.DatabaseError as e:
            raise RecoveryError(f"{path} cannot be read ({e}): it is damaged; {self._fix()}") from None
        finally:
            db.close()
        if row is None:
            raise RecoveryError(f"{path} has no record of snapshot {snapshot} of {dataflow!r} any more: was the "
                                "recovery directory used by another computation at the same time?")
        lo, hi, digest, check, state = row
        if check != _range_check(dataflow, lo, hi, digest) or _digest(state) != digest:
            raise RecoveryError(f"{path}: the record of {_span(lo, hi)} of dataflow {dataflow!r} does not match "
                                f"its checksum: the file was changed or damaged; {self._fix()}")
        pieces: dict[str, bytes] = pickle.loads(state)
        return pieces

    # -- StateStore -------------------------------------------------------------------

    def restore(self, dataflow: str, worker: int, peers: int) -> Restored | None:
        """``dataflow``'s latest snapshot complete on all its workers: the complete snapshot of the latest
        generation that has one (a newer one damaged is refused, see the module's docstring)."""
        for _, workers, folder in reversed(self._generations(marked=True)):
            found = self._complete_in(folder, workers, dataflow)
            if found is not None:
                self._resumed[dataflow, worker] = folder
                return Restored(found.snapshot, workers, found.shape, f"the recovery directory {folder}",
                                [self._pieces(found, w, dataflow) for w in range(workers)])
        self._resumed[dataflow, worker] = None
        return None

    def begin(self, dataflow: str, shape: str, worker: int, peers: int, snapshot: int | None) -> None:
        """Make this worker's file ready to write. Resuming from this generation, its records of snapshots after
        ``snapshot`` go and its drained mark is ``snapshot``; resuming from another generation, or afresh, all its
        records go and its drained mark is 0 (this generation holds no snapshot of this run until every worker
        has written one). Then the other workers' marks go down to that too: a mark past it can only be a run's
        that is over, and must not count for the records this run writes."""
        writing = self._writing_generation(peers)
        resumed_from = self._resumed.pop((dataflow, worker), None)
        own = self._create(self._file(writing, worker), worker, peers)
        try:
            with _transaction(own):
                stored = own.execute("SELECT shape FROM dataflows WHERE name = ?", (dataflow,)).fetchone()
                if stored is not None and stored[0] != shape:
                    raise RecoveryError(
                        f"the recovery directory {writing} has snapshots of a dataflow {dataflow!r} of another "
                        "shape: it is another program's, or this program's dataflow changed; use another "
                        "directory (or move the old one away) to start afresh")
                if snapshot is not None and resumed_from == writing:
                    own.execute("DELETE FROM snapshots WHERE dataflow = ? AND lo > ?", (dataflow, snapshot))
                    cut = own.execute("SELECT lo, digest FROM snapshots WHERE dataflow = ? AND lo <= ? AND "
                                      "(hi IS NULL OR hi > ?)", (dataflow, snapshot, snapshot)).fetchall()
                    for lo, digest in cut:
                        own.execute("UPDATE snapshots SET hi = ?, checksum = ? WHERE dataflow = ? AND lo = ?",
                                    (snapshot, _range_check(dataflow, lo, snapshot, digest), dataflow, lo))
                    drained = snapshot
                    self._commit(writing)
                else:
                    own.execute("DELETE FROM snapshots WHERE dataflow = ?", (dataflow,))
                    drained = 0
                own.execute("INSERT OR REPLACE INTO dataflows VALUES (?, ?, ?, NULL, ?)",
                            (dataflow, shape, drained, _row_check(dataflow, shape, drained, None)))
        finally:
            own.close()
        for other in range(peers):
            if other != worker:
                self._lower_mark(self._file(writing, other), other, peers, dataflow, drained)
        self._writing[worker] = (writing, peers)

    def _lower_mark(self, path: Path, worker: int, peers: int, dataflow: str, drained: int) -> None:
        """Another worker's drained mark of ``dataflow`` down to ``drained`` (if its file is there yet)."""
        db = self._open(path, worker, peers)
        if db is None:
            return
        try:
            with _transaction(db):
                row = db.execute("SELECT shape, drained, superseded FROM dataflows WHERE name = ?",
                                 (dataflow,)).fetchone()
                if row is not None and (row[1] is None or row[1] > drained):
                    db.execute("UPDATE dataflows SET drained = ?, checksum = ? WHERE name = ?",
                               (drained, _row_check(dataflow, row[0], drained, row[2]), dataflow))
        except sqlite3.DatabaseError as e:
            raise RecoveryError(f"{path} cannot be written ({e}): it is damaged; {self._fix()}") from None
        finally:
            db.close()

    async def write(self, dataflow: str, worker: int, lo: int, hi: int | None, pieces: dict[str, bytes]) -> None:
        state = pickle.dumps(pieces, protocol=pickle.HIGHEST_PROTOCOL)
        path = self._file(self._writing_for(dataflow, worker)[0], worker)
        await self._queue(worker).run(functools.partial(self._write, path, dataflow, lo, hi, state))

    def _writer(self, path: Path) -> sqlite3.Connection:
        """The connection that writes a worker's own file: opened once, used by the worker's queue only (in a
        thread, one operation at a time), closed with the store (a connection per write costs more than the
        write)."""
        try:
            inode = os.stat(path).st_ino
        except OSError:
            inode = None  # (gone: opening it below makes an empty file, and the write fails saying so)
        kept = self._writers.get(path)
        if kept is not None and kept[1] == inode and inode is not None:
            return kept[0]
        if kept is not None:
            kept[0].close()  # the file was replaced since (a directory moved away and made anew)
        db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
        self._writers[path] = (db, inode)
        return db

    def _write(self, path: Path, dataflow: str, lo: int, hi: int | None, state: bytes) -> None:
        digest = _digest(state)
        with _transaction(self._writer(path)) as db:
            db.execute("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?, ?, ?)",
                       (dataflow, lo, hi, digest, _range_check(dataflow, lo, hi, digest), state))

    async def mark(self, dataflow: str, worker: int, drained: int | None) -> None:
        writing = self._writing_for(dataflow, worker)[0]
        await self._queue(worker).run(functools.partial(self._mark, writing, worker, dataflow, drained))

    def _mark(self, writing: Path, worker: int, dataflow: str, drained: int | None) -> None:
        if drained != 0:
            self._commit(writing)  # before any file of the generation holds a mark
        path = self._file(writing, worker)
        with _transaction(self._writer(path)) as db:
            row = db.execute("SELECT shape, superseded FROM dataflows WHERE name = ?", (dataflow,)).fetchone()
            if row is not None:
                db.execute("UPDATE dataflows SET drained = ?, checksum = ? WHERE name = ?",
                           (drained, _row_check(dataflow, row[0], drained, row[1]), dataflow))

    async def prune(self, dataflow: str, worker: int, complete: int) -> None:
        writing, peers = self._writing_for(dataflow, worker)
        await self._queue(worker).run(functools.partial(self._prune, writing, peers, worker, dataflow, complete))

    def _prune(self, writing: Path, peers: int, worker: int, dataflow: str, complete: int) -> None:
        """Records only of snapshots older than ``complete`` go in this generation; in the older ones, every
        record of the dataflow goes from the files of the old workers ``j`` with ``j % workers == worker``, and
        their entry says that this generation superseded them."""
        with _transaction(self._writer(self._file(writing, worker))) as db:
            db.execute("DELETE FROM snapshots WHERE dataflow = ? AND hi IS NOT NULL AND hi < ?",
                       (dataflow, complete))
        for _, workers, folder in self._generations():
            if folder == writing:
                continue
            for old in range(worker, workers, peers):
                try:
                    db_old = self._open(self._file(folder, old), old, workers)
                except RecoveryError:
                    continue   # not ours, or damaged: an older generation's, no longer needed
                if db_old is None:
                    continue
                try:
                    with _transaction(db_old):
                        db_old.execute("DELETE FROM snapshots WHERE dataflow = ?", (dataflow,))
                        row = db_old.execute("SELECT shape, drained, superseded FROM dataflows WHERE name = ?",
                                             (dataflow,)).fetchone()
                        if row is not None and row[2] is None:
                            db_old.execute("UPDATE dataflows SET superseded = ?, checksum = ? WHERE name = ?",
                                           (writing.name, _row_check(dataflow, row[0], row[1], writing.name),
                                            dataflow))
                except sqlite3.DatabaseError:
                    pass       # damaged: an older generation's, no longer needed
                finally:
                    db_old.close()

    def _writing_for(self, dataflow: str, worker: int) -> tuple[Path, int]:
        writing = self._writing.get(worker)
        if writing is None:
            raise RecoveryError(f"the recovery store was written to for dataflow {dataflow!r} on worker {worker} "
                                "before it began")
        return writing

    def _queue(self, worker: int) -> _Queue:
        queue = self._queues.get(worker)
        if queue is None:
            queue = self._queues[worker] = _Queue()
        return queue


class _Queue:
    """One worker's store operations, run in the order given, in a thread: those that come while a batch runs
    go together in the next batch, one thread hop for all of them, so that a worker finishing many small
    dataflows keeps up with their snapshots instead of holding each dataflow until its turn."""

    def __init__(self) -> None:
        self._pending: list[tuple[Callable[[], None], asyncio.Future[None]]] = []
        self._running = False

    async def run(self, operation: Callable[[], None]) -> None:
        """Run ``operation`` after those before it; raise what it raised."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((operation, done))
        if not self._running:
            self._running = True
            try:
                await self._run_batches()
            finally:
                self._running = False
        await done

    async def _run_batches(self) -> None:
        while self._pending:
            batch, self._pending = self._pending, []
            try:
                errors = await asyncio.to_thread(_each, [operation for operation, _ in batch])
            except BaseException as stopped:  # cancelled while the batch ran: the rest go with it
                for _, done in batch + self._pending:
                    if not done.done():
                        done.set_exception(asyncio.CancelledError() if isinstance(stopped, asyncio.CancelledError)
                                           else stopped)
                        done.exception()  # (retrieved: its waiter may be gone)
                self._pending = []
                raise
            for (_, done), error in zip(batch, errors, strict=True):
                if error is None:
                    done.set_result(None)
                else:
                    done.set_exception(error)


def _each(operations: list[Callable[[], None]]) -> list[Exception | None]:
    """Run each of ``operations`` in turn; what each raised (``None``: nothing)."""
    errors: list[Exception | None] = []
    for operation in operations:
        try:
            operation()
            errors.append(None)
        except Exception as e:
            errors.append(e)
    return errors
