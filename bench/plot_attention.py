#!/usr/bin/python3
"""Plots a `cony bench attention --csv FILE` sweep: CPU µs per step, counted FLOPs,
state and peak bytes against the window n, and the approximation error.

Usage: /usr/bin/python3 bench/plot_attention.py SWEEP.csv OUT.png [D]
(D: the embedding size, to draw the raw window n·d floats beside the state bytes)
(needs python3-matplotlib; nothing in the build or the tests uses this script)
"""

import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    """{variant: [(n, core_us, step_us, flops, state, peak)]}, {(stream, variant): [(n, err)]}"""
    times, errors = defaultdict(list), defaultdict(list)
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if row[0] == "time" and row[3] == "single":
                n, label = int(row[1]), row[2]
                core, step, flops, state, peak = map(float, row[4:9])
                times[label].append((n, core, step, flops, state, peak))
            elif row[0] == "error":
                errors[(row[3], row[2])].append((int(row[1]), float(row[4])))
    return times, errors


def panel(ax, times, colors, column, title, ylabel):
    for label, rows in sorted(times.items()):
        rows = sorted(r for r in rows if r[column] > 0)
        if rows:
            ax.plot([r[0] for r in rows], [r[column] for r in rows], "o-", label=label,
                    color=colors[label])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("window n (tokens)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    times, errors = load(sys.argv[1])
    labels = sorted(set(times) | {label for _, label in errors})
    colors = {label: f"C{i}" for i, label in enumerate(labels)}
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    panel(axes[0][0], times, colors, 1, "attention core, CPU µs per step (one thread)", "µs / step")
    panel(axes[0][1], times, colors, 3, "counted FLOPs per step (SDA, all heads)", "FLOPs / step")
    panel(axes[1][0], times, colors, 4, "state kept between steps (vcc budgets overlap)", "bytes")
    if len(sys.argv) > 3:  # the raw float window n·d, for scale
        d = int(sys.argv[3])
        ns = sorted({r[0] for rows in times.values() for r in rows})
        axes[1][0].plot(ns, [4 * n * d for n in ns], "k:", label="raw window (n·d floats)")
        axes[1][0].legend(fontsize=8)
    axes[0][0].legend(fontsize=8)
    ax = axes[1][1]
    for (stream, label), rows in sorted(errors.items()):
        rows = sorted(rows)
        style = {"random": "o-", "smooth": "s--"}.get(stream, "^:")
        ax.plot([r[0] for r in rows], [r[1] for r in rows], style, label=f"{label}, {stream}",
                color=colors[label])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("window n (tokens)")
    ax.set_ylabel("relative RMS error vs exact attention")
    ax.set_title("approximation error: random (o), smooth (s), CNN (^) tokens")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
