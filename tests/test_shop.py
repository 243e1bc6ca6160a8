"""The README's first command: shop events through windows and a join on 2 workers, printed as windows close."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from collections import defaultdict
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))

import shop  # noqa: E402


def expected(seconds: int, seed: int) -> set[tuple[str, int, int, float]]:
    """The same table computed by plain Python: per user and complete window, views and spend (spenders only)."""
    views: dict[tuple[str, int], int] = defaultdict(int)
    spent: dict[tuple[str, int], float] = defaultdict(float)
    for second in range(seconds):
        vs, ps = shop.events(second, seed)
        for user, _ in vs:
            views[(user, second // shop.WINDOW)] += 1
        for user, amount in ps:
            spent[(user, second // shop.WINDOW)] += amount
    return {(user, w * shop.WINDOW, n, round(spent[(user, w)], 2)) for (user, w), n in views.items()
            if (user, w) in spent}


def test_shop_prints_each_users_window_once_when_it_closes() -> None:
    done = subprocess.run([sys.executable, str(EXAMPLES / "shop.py"), "--pace", "0", "--seconds", "40", "--ui", "-1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = set()
    workers = set()
    for line in done.stdout.splitlines():
        window, rest = line.split(")", 1)
        start, end = (int(x) for x in window.strip("[ ").split(","))
        words = rest.split()
        user, pages, amount = words[0], int(words[2]), float(words[5])
        assert line.endswith(f"at time {end})"), line       # sent exactly when the window closes
        workers.add(words[7].rstrip(","))
        rows.add((user, start, pages, amount))
    assert rows == expected(40, 7)
    assert workers == {"0", "1"}                             # keyed: both workers own users


def test_shop_prints_the_address_of_its_live_page_and_serves_it() -> None:
    proc = subprocess.Popen([sys.executable, str(EXAMPLES / "shop.py"), "--seconds", "20", "--pace", "0.1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"live dataflow view at (http://127\.0\.0\.1:\d+/)", line)
        assert match, line
        with urllib.request.urlopen(match.group(1), timeout=10) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "[ 10,  20)" in out
    finally:
        proc.kill()
