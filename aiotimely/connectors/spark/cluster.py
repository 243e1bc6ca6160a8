"""aiotimely on a Spark cluster: the N processes of one computation as the N tasks of a Spark barrier stage.

``run_on_spark(spark, build, processes=N, workers=W)`` runs
``sc.parallelize(range(N), N).barrier().mapPartitions(task).collect()``. Spark starts
the N tasks of a barrier stage together (or none of them), and if one fails it kills
the others: exactly what the processes of one timely computation need. Each task:

1. holds a free port on its host: a socket bound with ``SO_REUSEADDR`` and kept
   open, not listening, until the computation ends, so no other program can take
   the port meanwhile; the cluster's own listener binds the same port (Linux lets
   two ``SO_REUSEADDR`` sockets share it while at most one listens);
2. tells the others its ``host:port`` through ``BarrierTaskContext.allGather``;
   task 0 adds a fresh secret (``secrets.token_hex``), which every process then
   authenticates with (it travels inside Spark, as the tasks themselves do);
3. runs ``aiotimely.execute(build, workers=W, processes=N, process=i,
   addresses=..., secret=...)`` over the usual TCP cluster, and returns its result.

The driver gets each process's result, in process order. An operator that fails
fails its process, which tells its peers (they fail with its message); the first
task to fail fails the stage, Spark kills the rest, and :func:`run_on_spark`
raises the aiotimely error (same class, same message) on the driver. A process
that dies or hangs is noticed by its peers (a closed connection at once, silence
after ``peer_timeout`` seconds), so no task waits forever; ``timeout`` bounds the
whole run from the driver as well.

pyspark is an optional extra (``pip install 'aiotimely[spark]'``): it is imported
only when :func:`run_on_spark` runs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import pickle as _pickle
import re
import secrets
import socket
import sys
import threading
import time
from typing import Any, Callable, Iterable, Iterator

from ...errors import ClusterError
from ...execution import Worker, execute

__all__ = ["run_on_spark"]

ECHO_DELAY = 3.0
"""Seconds a task whose process failed with a :class:`ClusterError` waits before failing (see ``_Task``)."""
_SHARE_BOUND_PORT = sys.platform.startswith("linux")
"""Whether a listener with ``SO_REUSEADDR`` may bind beside a bound, non-listening socket (Linux: yes; the BSDs
and Windows differ)."""
MAX_CARRIED = 65536
"""The most characters of pickled error a failing task adds to its message (a bigger one is left out)."""
_MARK = "aiotimely-error:"
_MARKED = re.compile(_MARK + r"([0-9a-f]{64}):([A-Za-z0-9+/=]+)")
"""The carried error: its HMAC under the run's key, then the pickle. The text before it may hold anything a
user's error said (records too), so only a blob signed with the key the driver drew is ever unpickled."""


def _pyspark() -> Any:
    try:
        import pyspark
    except ImportError as e:
        raise ImportError("run_on_spark needs pyspark: pip install 'aiotimely[spark]'") from e
    return pyspark


def _local_slots(master: str, task_cpus: int) -> int | None:
    """How many tasks a ``local`` master runs at once (``None`` for other masters: Spark checks those)."""
    if master == "local":
        threads = 1
    else:
        found = re.fullmatch(r"local\[(\*|\d+)(?:,\s*\d+)?\]", master)
        if found is None:
            return None
        threads = (os.cpu_count() or 1) if found.group(1) == "*" else int(found.group(1))
    return threads // max(task_cpus, 1)


def _hold_port(host: str) -> socket.socket:
    """A socket bound to a free port of ``host`` and kept (not listening), so that nobody else takes the port
    before the cluster listens on it (with ``SO_REUSEADDR``, as the cluster's listener also sets)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, 0))
    except OSError as e:
        sock.close()
        raise ClusterError(f"cannot take a free port on {host}: {e}") from None
    return sock


def _task_host(context: Any, index: int) -> str:
    """The address Spark knows this task's executor by (what the other executors reach it at)."""
    address: str = context.getTaskInfos()[index].address
    host = address.rpartition(":")[0] if ":" in address else address
    try:
        return socket.gethostbyname(host)
    except OSError:
        return host


def _carry(error: BaseException, process: int, processes: int, key: bytes) -> Exception:
    """An exception for Spark to report: the error's text, and the error itself (pickled, by value where its
    class is the user's, as Spark ships functions; signed with the run's ``key``) for the driver to raise again."""
    from pyspark import cloudpickle

    dumps: Callable[[Any], bytes] = cloudpickle.dumps
    text = f"aiotimely process {process} of {processes} failed: {type(error).__name__}: {error}"
    try:
        blob = base64.b64encode(dumps(error)).decode("ascii")
    except Exception:
        return RuntimeError(text)
    if len(blob) > MAX_CARRIED:
        return RuntimeError(text)
    return RuntimeError(f"{text}\n{_MARK}{_sign(key, blob)}:{blob}")


def _sign(key: bytes, blob: str) -> str:
    return hmac.new(key, blob.encode("ascii"), hashlib.sha256).hexdigest()


def _recover(spark_error: BaseException, key: bytes) -> BaseException | None:
    """The aiotimely error a task reported, from the text of the Spark error that failed the stage: the blob
    signed with ``key`` (any other is text that merely looks like one, and is never unpickled)."""
    for found in _MARKED.finditer(str(spark_error)):
        signature, blob = found.groups()
        if not hmac.compare_digest(signature, _sign(key, blob)):
            continue
        try:
            error = _pickle.loads(base64.b64decode(blob))
        except Exception:
            return None
        return error if isinstance(error, BaseException) else None
    return None


class _Task:
    """What each task of the barrier stage runs (a class, so that Spark pickles it by reference)."""

    def __init__(self, build: Callable[[Worker], Any], processes: int, workers: int,
                 host: str | Callable[[], str] | None, options: dict[str, Any], key: bytes) -> None:
        self.build = build
        self.processes = processes
        self.workers = workers
        self.host = host
        self.options = options
        self.key = key
        """Signs the errors the tasks carry to the driver (see ``_MARKED``)."""

    def __call__(self, partition: Iterable[int]) -> Iterator[tuple[int, list[Any]]]:
        from pyspark import BarrierTaskContext

        context = BarrierTaskContext.get()
        index = context.partitionId()
        try:
            host = self.host() if callable(self.host) else self.host or _task_host(context, index)
            held = _hold_port(host)
        except Exception as error:
            raise _carry(error, index, self.processes, self.key) from error
        try:
            addresses, secret = self._meet(context, index, f"{host}:{held.getsockname()[1]}")
            if not _SHARE_BOUND_PORT:
                held.close()  # the listener cannot bind beside it here: a short race for the port instead
            results = execute(self.build, workers=self.workers, processes=self.processes, process=index,
                              addresses=addresses, secret=secret, **self.options)
        except Exception as error:
            if isinstance(error, ClusterError):
                # most likely an echo of a peer's failure ("process 1 failed: ..."): give that peer's own task
                # time to fail first, so that its error, not the echo, is the one Spark reports
                time.sleep(ECHO_DELAY)
            raise _carry(error, index, self.processes, self.key) from error
        finally:
            held.close()
        yield index, results

    def _meet(self, context: Any, index: int, address: str) -> tuple[list[str], str]:
        """Every process's address, in process order, and the secret task 0 drew: through ``allGather``."""
        secret = secrets.token_hex(32) if index == 0 else ""
        gathered = [json.loads(m) for m in context.allGather(json.dumps([index, address, secret]))]
        addresses = {int(p): str(a) for p, a, _ in gathered}
        keys = [str(s) for p, _, s in gathered if int(p) == 0]
        if sorted(addresses) != list(range(self.processes)) or len(gathered) != self.processes or keys == [""]:
            raise ClusterError(f"the {self.processes} barrier tasks did not exchange one address each and a "
                               f"secret: processes {sorted(addresses)} answered")
        return [addresses[p] for p in range(self.processes)], keys[0]


def run_on_spark(
    spark: Any,
    build: Callable[[Worker], Any],
    processes: int = 2,
    workers: int = 1,
    *,
    host: str | Callable[[], str] | None = None,
    timeout: float | None = None,
    connect_timeout: float | None = None,
    peer_timeout: float | None = None,
    pickle: bool = False,
    loop: str = "auto",
) -> list[list[Any]]:
    """Run ``build`` on ``processes`` aiotimely processes of ``workers`` workers each, the processes being the
    tasks of one Spark barrier stage; returns each process's list of per-worker results, in process order:
    ``results[p][w]`` is what ``build`` returned on worker ``p * workers + w`` (as :func:`aiotimely.execute`
    returns them, one list per process). Blocks until the computation ends: from asyncio, call it in a thread.

    ``spark`` is a ``SparkSession`` or a ``SparkContext`` (classic Spark: not Spark Connect). The stage needs
    ``processes`` task slots at once (``local[4]`` has 4; a ``local`` master with fewer is refused here; on a
    cluster, Spark checks). ``build`` and its results must pickle: Spark ships them.

    Each process listens on, and its peers dial, the address Spark knows its executor by (resolved to IPv4),
    or ``host``: a host name or address, or a function that each task calls on its executor to get one.

    An error in any process is raised here as the aiotimely error it was, e.g. the
    :class:`aiotimely.DataflowError` naming the operator that failed, with Spark's error as its cause; a task
    that ends without one (its Python worker crashed) raises Spark's error. ``timeout`` (seconds) cancels the
    Spark job and raises :class:`TimeoutError` if the computation has not ended by then. ``connect_timeout``,
    ``peer_timeout``, ``pickle`` and ``loop`` are :func:`aiotimely.execute`'s.
    """
    if processes < 1:
        raise ValueError(f"processes must be at least 1, not {processes}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    _pyspark()
    sc = getattr(spark, "sparkContext", spark)
    slots = _local_slots(str(sc.master), int(sc.getConf().get("spark.task.cpus", "1")))
    if slots is not None and processes > slots:
        raise ValueError(f"{processes} processes need {processes} task slots at once, but Spark's master "
                         f"{sc.master!r} has {slots}: use local[{processes}] or more")
    options: dict[str, Any] = {"connect_timeout": connect_timeout, "peer_timeout": peer_timeout, "pickle": pickle,
                               "loop": loop}
    key = secrets.token_bytes(32)
    task = _Task(build, processes, workers, host, options, key)
    tag = f"aiotimely-{secrets.token_hex(8)}"
    timed_out = threading.Event()

    def cancel() -> None:
        timed_out.set()
        sc.cancelJobsWithTag(tag)

    timer = threading.Timer(timeout, cancel) if timeout is not None else None
    sc.addJobTag(tag)
    try:
        if timer is not None:
            timer.daemon = True
            timer.start()
        rdd = sc.parallelize(range(processes), processes).barrier().mapPartitions(task)
        gathered = rdd.collect()
    except Exception as spark_error:
        if timed_out.is_set():
            raise TimeoutError(f"the aiotimely computation on Spark did not end within {timeout:g} s; "
                               "its job was cancelled") from spark_error
        error = _recover(spark_error, key)
        if error is None:
            raise
        error.add_note("(raised in an aiotimely process that run_on_spark ran as a Spark barrier task; the Spark "
                       "error above has that task's traceback)")
        raise error from spark_error
    finally:
        if timer is not None:
            timer.cancel()
        sc.removeJobTag(tag)
    by_process = dict(gathered)
    return [by_process[p] for p in range(processes)]
