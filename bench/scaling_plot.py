"""Draws bench/compare.sh --scaling's table: samples/s against batch size, one panel per model,
one line per (framework, threads). usage: python3 scaling_plot.py scaling.tsv out.png
(Debian's python3-matplotlib; the medians over rounds are taken here as in compare.sh)."""
import csv, statistics, sys
from collections import defaultdict
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

rows = defaultdict(list)
with open(sys.argv[1]) as f:
    for r in csv.DictReader(f, delimiter="\t"):
        try:
            v = float(r["samples_per_s"])
        except ValueError:
            continue
        if v == v:  # not nan
            rows[(r["model"], r["who"], int(r["threads"]), int(r["batch"]))].append(v)
models = sorted({k[0] for k in rows})
fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.2), squeeze=False)
titles = {"guide_cnn": "guide CNN fp32 (Adam, timed steps)", "small_cnn": "small_cnn (one epoch through fit)"}
for ax, m in zip(axes[0], models):
    for who in sorted({k[1] for k in rows if k[0] == m}, key=lambda w: w != "sinter"):
        for th in (1, 2):
            pts = sorted((k[3], statistics.median(v)) for k, v in rows.items()
                         if k[0] == m and k[1] == who and k[2] == th)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        linestyle="-" if th == 2 else "--",
                        color="#1f77b4" if who == "sinter" else "#ff7f0e",
                        label=f"{who}, {th} thread{'s' if th > 1 else ''}")
    ax.set_xscale("log", base=2)
    ax.set_xticks([32, 64, 128, 256, 512], ["32", "64", "128", "256", "512"])
    ax.set_xlabel("batch size")
    ax.set_ylabel("samples/s")
    ax.set_ylim(bottom=0)
    ax.set_title(titles.get(m, m))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=100)
