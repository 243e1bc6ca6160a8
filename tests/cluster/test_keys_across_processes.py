"""Keys whose own Python hash is salted per process, in a computation of two processes with different hash
seeds: each key still lives on one worker (a keyed window counts it once), and a key that has only its salted
hash is refused with an error naming it, rather than split between workers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from aiotimely.launch import free_ports

from .harness import ROOT, finish

PROGRAM = Path(__file__).resolve().parent / "keys_program.py"


def run_seeded(target: str, tmp_path: Path, seeds: tuple[str, ...] = ("1", "2")) -> list[tuple[int, str, str]]:
    """One process per seed, each with its own PYTHONHASHSEED, one worker each."""
    ports = free_ports(len(seeds))
    hostfile = tmp_path / "hosts.txt"
    hostfile.write_text("".join(f"127.0.0.1:{port}\n" for port in ports))
    procs = [subprocess.Popen(
        [sys.executable, "-m", "aiotimely", "worker", f"{PROGRAM}:{target}", "-w", "1", "-n", str(len(seeds)),
         "-p", str(p), "--hostfile", str(hostfile)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, "AIOTIMELY_SECRET": "keys-secret", "PYTHONHASHSEED": seed})
        for p, seed in enumerate(seeds)]
    return [finish(proc, 60, "process did not end within 60 s") for proc in procs]


def test_a_keyed_window_counts_each_key_once_when_the_processes_hash_differently(tmp_path):
    results = run_seeded("counts", tmp_path)
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    lines = sorted(line for _, out, _ in results for line in out.splitlines())
    counts: dict[str, list[int]] = {}
    for line in lines:
        key, n, _worker = re.fullmatch(r"count (.*) (\d+) on (\d)", line).groups()
        counts.setdefault(key, []).append(int(n))
    # 6 dates, one instant (4 records, in 3 zones), 2 colors, 2 frozensets ({a, b} twice): 20 of each record
    assert len(counts) == 11, lines
    assert counts == {key: [80] if "datetime.datetime" in key else [40] if "'a', 'b'" in key else [20]
                      for key in counts}, lines


def test_a_key_with_only_a_salted_hash_is_refused_between_processes_naming_it(tmp_path):
    results = run_seeded("opaque", tmp_path)
    assert all(code != 0 for code, _, _ in results)
    err = "".join(err for _, _, err in results)
    assert "operator 'Exchange'" in err and "the exchange key of record 'a'" in err
    assert "a key of type keys_program.Opaque cannot route alike in every process" in err or \
        "Opaque cannot route alike in every process" in err
    assert "__aiotimely_route__" in err
