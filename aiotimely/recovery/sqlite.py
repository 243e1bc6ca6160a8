"""The default snapshot store: SQLite files in a recovery directory, one per worker.

Layout::

    DIRECTORY/g1-w4/worker-0.sqlite3 ... worker-3.sqlite3     a generation: the files of a run of 4 workers
    DIRECTORY/g2-w2/worker-0.sqlite3, worker-1.sqlite3        the next, after a restart with 2 workers

Each worker writes only its own file, in a thread (never on the event loop), one
transaction per record (a range of snapshots that its operators cover alike).
Resuming, every worker reads every file of the generation it resumes from, so the
directory must be one that every process can read: a local disk for processes of
one machine, or a shared file system (NFS, EFS, SMB) that honours SQLite's locks.
A store for machines that share nothing (an object store) would implement the
same three methods (:class:`~aiotimely.dataflow.state.StateStore`) over objects
named by dataflow, worker and snapshot range, with "the latest complete snapshot"
found by listing them.

Snapshots are pickled: a recovery directory is trusted as the program's own files
are (reading one runs whatever a writer put there).
"""

from __future__ import annotations

import asyncio
import pickle
import re
import sqlite3
from pathlib import Path
from ..dataflow.state import Restored
from ..errors import RecoveryError

__all__ = ["Recovery"]

FORMAT = "aiotimely snapshots 2"
_GENERATION = re.compile(r"^g(\d+)-w(\d+)$")
_ALL = 1 << 62


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
        self._generation: Path | None = None
        self._resumed: dict[tuple[str, int], Path | None] = {}   # (dataflow, worker) -> generation resumed from
        self._locks: dict[int, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return f"Recovery({str(self.directory)!r}, every={self.every})"

    # -- the files ------------------------------------------------------------------

    def _generations(self) -> list[tuple[int, int, Path]]:
        """``(generation, workers, folder)`` of every generation in the directory, oldest first."""
        found = []
        if self.directory.is_dir():
            for child in self.directory.iterdir():
                match = _GENERATION.match(child.name)
                if match and child.is_dir():
                    found.append((int(match.group(1)), int(match.group(2)), child))
        return sorted(found)

    def _writing_generation(self, peers: int) -> Path:
        """The generation this run writes: the latest, if it had this many workers; else a new one."""
        if self._generation is None:
            generations = self._generations()
            if generations and generations[-1][1] == peers:
                self._generation = generations[-1][2]
            else:
                number = generations[-1][0] + 1 if generations else 1
                self._generation = self.directory / f"g{number}-w{peers}"
            self._generation.mkdir(parents=True, exist_ok=True)
        return self._generation

    @staticmethod
    def _file(folder: Path, worker: int) -> Path:
        return folder / f"worker-{worker}.sqlite3"

    def _connect(self, path: Path, worker: int, peers: int, *, create: bool) -> sqlite3.Connection | None:
        """Open a worker's file, checking that it is a snapshot store of this kind (creating it if asked);
        ``None`` if another process is creating it right now (it has no tables yet)."""
        try:
            db = sqlite3.connect(path, timeout=60)
            if not create and db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'meta'").fetchone()[0] == 0:
                db.close()
                return None
            if create:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                with db:
                    db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value)")
                    db.execute("CREATE TABLE IF NOT EXISTS dataflows (name TEXT PRIMARY KEY, shape TEXT, "
                               "drained INTEGER)")
                    db.execute("CREATE TABLE IF NOT EXISTS snapshots (dataflow TEXT, lo INTEGER, hi INTEGER, "
                               "state BLOB, PRIMARY KEY (dataflow, lo))")
                    db.executemany("INSERT OR IGNORE INTO meta VALUES (?, ?)",
                                   [("format", FORMAT), ("every", self.every), ("worker", worker),
                                    ("peers", peers)])
            meta = dict(db.execute("SELECT key, value FROM meta"))
        except sqlite3.DatabaseError as e:
            raise RecoveryError(f"{path} is not a snapshot file aiotimely can read ({e}): is the recovery "
                                "directory another program's, or damaged?") from None
        if meta.get("format") != FORMAT:
            raise RecoveryError(f"{path} is not an aiotimely snapshot file (format {meta.get('format')!r})")
        if meta.get("every") != self.every:
            raise RecoveryError(f"{path} holds snapshots cut every {meta.get('every')} units of time, and this "
                                f"run cuts them every {self.every}: use the same 'every', or another directory")
        if meta.get("worker") != worker or meta.get("peers") != peers:
            raise RecoveryError(f"{path} belongs to worker {meta.get('worker')} of {meta.get('peers')}, not to "
                                f"worker {worker} of {peers}: the recovery directory was rearranged")
        return db

    # -- StateStore -------------------------------------------------------------------

    def restore(self, dataflow: str, worker: int, peers: int) -> Restored | None:
        """Read every generation's files to find ``dataflow``'s latest snapshot complete on all its workers."""
        best: tuple[int, str, int, Path] | None = None      # (snapshot, shape, workers, folder)
        for _, workers, folder in self._generations():
            found = self._complete_in(folder, workers, dataflow)
            if found is not None:
                best = (*found, workers, folder)
        self._resumed[dataflow, worker] = best[3] if best is not None else None
        if best is None:
            return None
        snapshot, shape, workers, folder = best
        return Restored(snapshot, workers, shape, f"the recovery directory {folder}",
                        [self._pieces(folder, w, workers, dataflow, snapshot) for w in range(workers)])

    def begin(self, dataflow: str, shape: str, worker: int, peers: int, snapshot: int | None) -> None:
        """Make this worker's file ready to write: its records of snapshots after ``snapshot`` (not complete
        everywhere) go; so do all its records when the snapshot resumed from is another generation's."""
        writing = self._writing_generation(peers)
        own = self._connect(self._file(writing, worker), worker, peers, create=True)
        assert own is not None
        try:
            with own:
                stored = own.execute("SELECT shape FROM dataflows WHERE name = ?", (dataflow,)).fetchone()
                if stored is not None and stored[0] != shape:
                    raise RecoveryError(
                        f"the recovery directory {writing} has snapshots of a dataflow {dataflow!r} of another "
                        "shape: it is another program's, or this program's dataflow changed; use another "
                        "directory (or move the old one away) to start afresh")
                own.execute("INSERT OR REPLACE INTO dataflows VALUES (?, ?, ?)", (dataflow, shape, snapshot or 0))
                if snapshot is None or self._resumed.get((dataflow, worker)) != writing:
                    own.execute("DELETE FROM snapshots WHERE dataflow = ?", (dataflow,))
                else:  # continue this generation's records from the snapshot resumed from
                    own.execute("DELETE FROM snapshots WHERE dataflow = ? AND lo > ?", (dataflow, snapshot))
                    own.execute("UPDATE snapshots SET hi = ? WHERE dataflow = ? AND lo <= ? AND "
                                "(hi IS NULL OR hi > ?)", (snapshot, dataflow, snapshot, snapshot))
        finally:
            own.close()

    def _complete_in(self, folder: Path, workers: int, dataflow: str) -> tuple[int, str] | None:
        """The latest snapshot of ``dataflow`` that every worker of this generation covers, and its shape."""
        ranges: list[list[tuple[int, int | None]]] = []
        shapes = set()
        drained = 0
        for w in range(workers):
            path = self._file(folder, w)
            if not path.exists():
                return None
            db = self._connect(path, w, workers, create=False)
            if db is None:
                return None
            try:
                stored = db.execute("SELECT shape, drained FROM dataflows WHERE name = ?", (dataflow,)).fetchone()
                if stored is None:
                    return None
                shapes.add(stored[0])
                drained = max(drained, _ALL if stored[1] is None else stored[1])
                ranges.append(db.execute("SELECT lo, hi FROM snapshots WHERE dataflow = ? ORDER BY lo",
                                         (dataflow,)).fetchall())
            finally:
                db.close()
        if len(shapes) > 1:
            raise RecoveryError(f"the recovery directory {folder} has snapshots of dataflows {dataflow!r} of "
                                "different shapes on different workers: were several programs run on it?")
        covered = None
        for worker_ranges in ranges:
            if not worker_ranges:
                return None
            top = max(lo if hi is None else hi for lo, hi in worker_ranges)
            covered = top if covered is None else min(covered, top)
        assert covered is not None
        complete = min(covered, drained)     # written everywhere, and finished with (as one worker saw)
        return (complete, shapes.pop()) if complete > 0 else None

    def _pieces(self, folder: Path, worker: int, workers: int, dataflow: str, snapshot: int) -> dict[str, bytes]:
        db = self._connect(self._file(folder, worker), worker, workers, create=False)
        if db is None:
            raise RecoveryError(f"{self._file(folder, worker)} lost its tables while it was read")
        try:
            row = db.execute("SELECT state FROM snapshots WHERE dataflow = ? AND lo <= ? AND (hi IS NULL OR hi >= ?)"
                             " ORDER BY lo DESC LIMIT 1", (dataflow, snapshot, snapshot)).fetchone()
        finally:
            db.close()
        if row is None:
            raise RecoveryError(f"{self._file(folder, worker)} has no record of snapshot {snapshot} of {dataflow!r}")
        pieces: dict[str, bytes] = pickle.loads(row[0])
        return pieces

    async def write(self, dataflow: str, worker: int, lo: int, hi: int | None, pieces: dict[str, bytes]) -> None:
        state = pickle.dumps(pieces, protocol=pickle.HIGHEST_PROTOCOL)
        path = self._file(self._require_generation(), worker)
        async with self._lock(worker):
            await asyncio.to_thread(self._write, path, dataflow, lo, hi, state)

    @staticmethod
    def _write(path: Path, dataflow: str, lo: int, hi: int | None, state: bytes) -> None:
        db = sqlite3.connect(path, timeout=60)
        try:
            with db:
                db.execute("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?)", (dataflow, lo, hi, state))
        finally:
            db.close()

    async def mark(self, dataflow: str, worker: int, drained: int | None) -> None:
        path = self._file(self._require_generation(), worker)
        async with self._lock(worker):
            await asyncio.to_thread(self._mark, path, dataflow, drained)

    @staticmethod
    def _mark(path: Path, dataflow: str, drained: int | None) -> None:
        db = sqlite3.connect(path, timeout=60)
        try:
            with db:
                db.execute("UPDATE dataflows SET drained = ? WHERE name = ?", (drained, dataflow))
        finally:
            db.close()

    async def prune(self, dataflow: str, worker: int, complete: int) -> None:
        writing = self._require_generation()
        async with self._lock(worker):
            await asyncio.to_thread(self._prune, writing, worker, dataflow, complete)

    def _prune(self, writing: Path, worker: int, dataflow: str, complete: int) -> None:
        """Records only of snapshots older than ``complete`` go, in this generation and the ones before."""
        db = sqlite3.connect(self._file(writing, worker), timeout=60)
        try:
            with db:
                db.execute("DELETE FROM snapshots WHERE dataflow = ? AND hi IS NOT NULL AND hi < ?",
                           (dataflow, complete))
        finally:
            db.close()
        for _, _, folder in self._generations():
            old = self._file(folder, worker)
            if folder != writing and old.exists():
                db = sqlite3.connect(old, timeout=60)
                try:
                    with db:
                        db.execute("DELETE FROM snapshots WHERE dataflow = ?", (dataflow,))
                finally:
                    db.close()

    def _require_generation(self) -> Path:
        if self._generation is None:
            raise RecoveryError("the recovery store was written to before any dataflow was restored")
        return self._generation

    def _lock(self, worker: int) -> asyncio.Lock:
        lock = self._locks.get(worker)
        if lock is None:
            lock = self._locks[worker] = asyncio.Lock()
        return lock
