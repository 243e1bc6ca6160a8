"""Draw the curves of ``docs/benchmarks.md`` from ``benchmarks/results/*.json`` (matplotlib, a bench extra).

    python -m benchmarks plots
"""

from __future__ import annotations

import json
from pathlib import Path

from .common import RESULTS, ROOT

DOCS = ROOT / "docs"


def load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def main(argv: list[str] | None = None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []

    def save_figure(fig, name: str) -> None:
        fig.tight_layout()
        path = DOCS / name
        fig.savefig(path, dpi=110)
        written.append(path)

    latency = load("latency")
    if latency:
        rates = sorted({r["rate"] for r in latency["words"]})
        fig, axes = plt.subplots(1, len(rates), figsize=(6 * len(rates), 4.5), squeeze=False)
        for ax, rate in zip(axes[0], rates, strict=True):
            for idiom, style in (("tokens", "o-"), ("notificator", "s--"), ("watermarks", "^:"), ("timed", "d-.")):
                rows = sorted((r for r in latency["words"] if r["rate"] == rate and r["idiom"] == idiom),
                              key=lambda r: -r["quantum_bits"])
                bits = [r["quantum_bits"] for r in rows]
                ax.plot(bits, [r["p999_us"] / 1e3 for r in rows], style, label=f"{idiom} p99.9")
            ax.axhline(1000, color="grey", linewidth=0.8)
            ax.set_yscale("log")
            ax.invert_xaxis()
            ax.set_xlabel("timestamp quantum: 2^k ns (k)")
            ax.set_ylabel("latency, ms (1 s = collapsed)")
            ax.set_title(f"rolling unique-word count, {rate:,} words/s")
            ax.legend()
        save_figure(fig, "latency-vs-quantum.png")

        fig, ax = plt.subplots(figsize=(6, 4.5))
        for idiom, style in (("tokens", "o-"), ("watermarks", "^:")):
            rows = sorted((r for r in latency["chains"] if r["idiom"] == idiom), key=lambda r: r["length"])
            ax.plot([r["length"] for r in rows], [r["p50_us"] for r in rows], style, label=f"{idiom} p50")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("idle no-op operators in the chain")
        ax.set_ylabel("time advance to chain end, µs")
        ax.legend()
        save_figure(fig, "chain-latency.png")

    many = load("many_dataflows")
    if many:
        fig, ax = plt.subplots(figsize=(6, 4.5))
        for interest, style in (("IF_CAPABILITY", "o-"), ("ALWAYS", "s--")):
            rows = sorted((r for r in many["runs"] if r["interest"] == interest), key=lambda r: r["filters"])
            ax.plot([r["filters"] for r in rows], [r["step_mean_ms"] for r in rows], style, label=interest)
        ax.set_xscale("log")
        ax.set_yscale("log")
        d = many["runs"][0]["dataflows"]
        ax.set_xlabel(f"filters per region (K), {d} dataflows")
        ax.set_ylabel("mean step time, ms")
        ax.legend()
        save_figure(fig, "many-dataflows.png")
    for path in written:
        print(f"wrote {path}")
    return written


if __name__ == "__main__":
    main()
