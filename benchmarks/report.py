"""Merges pool_bench's and torch_baseline's records into one JSON, plots the
fraction of the read ceiling per method and shape, and prints the markdown tables
docs/PERFORMANCE.md shows.

usage: report.py SEQPOOL.json TORCH.json --json OUT.json --png OUT.png
"""
import argparse
import json
import platform
import statistics
import subprocess

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METHODS = ["cls", "last", "mean", "max", "all", "step", "dispatcher"]
SHAPES = ["long", "short", "single", "wide"]
SHAPE_NAMES = {"long": "65536x1024, 64 prompts", "short": "65536x1024, 4096 prompts of 8-24",
               "single": "65536x1024, one prompt", "wide": "4096x4096, 8 prompts"}


def machine():
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "")
    return {"cpu": model, "threads": len(__import__("os").sched_getaffinity(0)), "system": platform.platform()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seqpool")
    parser.add_argument("torch")
    parser.add_argument("--json", required=True)
    parser.add_argument("--png", required=True)
    args = parser.parse_args()
    ours = json.load(open(args.seqpool))
    theirs = json.load(open(args.torch))

    # PyTorch ran in the same run_all.sh invocation: its figures are set against
    # the ceilings pool_bench measured there for the same shape and dtype.
    ceilings = {}
    for r in ours:
        if r["space"] == "host":
            ceilings.setdefault((r["shape"], r["dtype"]), []).append(r["ceiling_gbps"])
    for r in theirs:
        r["ceiling_gbps"] = statistics.median(ceilings[(r["shape"], r["dtype"])])
        r["fraction"] = r["gbps"] / r["ceiling_gbps"]
    records = ours + theirs
    with open(args.json, "w") as out:
        json.dump({"machine": machine(), "records": records}, out, indent=1)
        out.write("\n")

    index = {(r["space"], r["method"], r["dtype"], r["shape"]): r for r in records}
    figure, axes = plt.subplots(2, 4, figsize=(18, 8), sharey=True)
    width = 0.27
    for row, dtype in enumerate(["fp32", "bf16"]):
        for column, shape in enumerate(SHAPES):
            axis = axes[row][column]
            for k, (space, label, colour) in enumerate((("host", "seqpool host_space", "tab:blue"),
                                                         ("device", "seqpool device_space (OpenMP stand-in)", "tab:cyan"),
                                                         ("torch", "PyTorch, vLLM-style", "tab:orange"))):
                values = [index.get((space, m, dtype, shape), {}).get("fraction", 0) for m in METHODS]
                axis.bar([i + (k - 1) * width for i in range(len(METHODS))], values, width, label=label, color=colour)
            axis.axhline(1.0, color="grey", linewidth=0.8)
            axis.set_xticks(range(len(METHODS)), METHODS, rotation=45)
            axis.set_title(f"{dtype}, {SHAPE_NAMES[shape]}", fontsize=9)
            if column == 0:
                axis.set_ylabel("fraction of the read ceiling")
    axes[0][0].legend(fontsize=8, loc="upper left")
    figure.suptitle("Pooling bandwidth as a fraction of the streaming-read ceiling measured in the same run, "
                    "caches flushed before every call")
    figure.tight_layout()
    figure.savefig(args.png, dpi=110)

    print("| method | dtype | shape | seqpool ms | plan ms | GB/s | read ceiling | fraction | r+w bound "
          "| PyTorch ms | fraction | speedup (with plan) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for dtype in ("fp32", "bf16"):
        for shape in SHAPES:
            for method in METHODS:
                host, torch = index[("host", method, dtype, shape)], index[("torch", method, dtype, shape)]
                step_seconds = host["seconds"] + host["plan_seconds"]
                print(f"| {method} | {dtype} | {shape} | {host['seconds'] * 1e3:.3f} | {host['plan_seconds'] * 1e3:.3f} | "
                      f"{host['gbps']:.1f} | {host['ceiling_gbps']:.1f} | {host['fraction']:.2f} | "
                      f"{host['bound_fraction']:.2f} | {torch['seconds'] * 1e3:.3f} | {torch['fraction']:.2f} | "
                      f"{torch['seconds'] / host['seconds']:.1f}x ({torch['seconds'] / step_seconds:.1f}x) |")


if __name__ == "__main__":
    main()
