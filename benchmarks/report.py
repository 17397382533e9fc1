"""Merges pool_bench's and torch_baseline's records into one JSON, plots the
fraction of the read ceiling per method and shape, and prints the markdown tables
docs/PERFORMANCE.md shows.

usage: report.py SEQPOOL.json TORCH.json [TORCH.json...] --json OUT.json [--png OUT.png] [--space host|device]

--space device tables pool_bench_cuda's records against torch_baseline.py --device
cuda, adding the captured dispatcher step beside the eager one. Where the records
hold the peers a user would pick instead of writing kernels — the same PyTorch code
under torch.compile (torch_baseline.py --compile) and CUB's segmented sums for MEAN
(pool_bench_cuda's mean@cub) — a second table sets seqpool against each.
"""
import argparse
import json
import platform
import statistics
import subprocess


METHODS = ["cls", "last", "mean", "max", "all", "step", "colbert", "sparse", "bge-m3", "dispatcher"]
# Rows of the tables beside METHODS: results other than float32, ALL and STEP
# writing bf16, MEAN int8 and ALL sign bits (ubinary).
ENCODED = ["all→bf16", "step→bf16", "mean→int8", "all→ubinary"]
SHAPES = ["long", "short", "single", "wide", "padded"]
SHAPE_NAMES = {"long": "65536x1024, 64 prompts", "short": "65536x1024, 4096 prompts of 8-24",
               "single": "65536x1024, one prompt", "wide": "4096x4096, 8 prompts",
               "padded": "256x256x1024 padded, prompts of 32-256"}


def machine():
    cpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in cpu.splitlines() if line.startswith("Model name")), "")
    return {"cpu": model, "threads": len(__import__("os").sched_getaffinity(0)), "system": platform.platform()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("seqpool")
    parser.add_argument("torch", nargs="+", help="torch_baseline.py's records (eager, and compiled)")
    parser.add_argument("--json", required=True)
    parser.add_argument("--png")
    parser.add_argument("--space", choices=("host", "device"), default="host")
    args = parser.parse_args()
    space = args.space
    ours = json.load(open(args.seqpool))
    theirs = [record for path in args.torch for record in json.load(open(path))]

    # PyTorch ran in the same invocation (run_all.sh, tests/gpu/run.sh): its
    # figures are set against the ceilings pool_bench measured there for the same
    # shape and dtype.
    ceilings = {}
    for r in ours:
        if r["space"] == space:
            ceilings.setdefault((r["shape"], r["dtype"]), []).append(r["ceiling_gbps"])
    for r in theirs:
        # A shape and dtype pool_bench wrote no record of (its cases failed) has no ceiling: and no row.
        measured = ceilings.get((r["shape"], r["dtype"]))
        r["ceiling_gbps"] = statistics.median(measured) if measured else None
        r["fraction"] = r["gbps"] / r["ceiling_gbps"] if measured else None
    records = ours + theirs
    with open(args.json, "w") as out:
        json.dump({"machine": machine(), "records": records}, out, indent=1)
        out.write("\n")

    index = {(r["space"], row_name(r), r["dtype"], r["shape"]): r for r in records}
    if args.png:
        plot(index, args.png)
    torch_space = "torch" if space == "host" else "torch-cuda"
    # On a GPU, "seqpool ms" is the step's GPU time, queued ahead; the speedup sets
    # PyTorch's latency against seqpool's, both timed from the call to the
    # synchronisation. On the host the two times are one.
    device = space == "device"
    print("| method | dtype | shape | seqpool ms |" + (" latency ms |" if device else "") +
          " plan ms | uploaded | GB/s | read ceiling | fraction |" + (" predicted |" if device else "") +
          " r+w bound | PyTorch ms | fraction | speedup (with plan) |")
    print("|---|---|---|---:|" + ("---:|" if device else "") + "---:|---:|---:|---:|---:|" +
          ("---:|" if device else "") + "---:|---:|---:|---:|")
    for dtype in ("fp32", "bf16"):
        for shape in SHAPES:
            # The eighth replays part of its capacity's batch: no PyTorch figure is of that batch.
            for method in METHODS + ENCODED + (["dispatcher graph", "dispatcher graph eighth"] if device else []):
                ours_record = index.get((space, method, dtype, shape))
                torch = index.get((torch_space, "dispatcher" if method == "dispatcher graph" else method, dtype, shape))
                if ours_record is None:
                    continue
                latency = ours_record.get("latency_seconds", ours_record["seconds"])
                step_seconds = latency + ours_record["plan_seconds"]
                predicted = predicted_fraction(ours_record) if device else None
                uploaded = ours_record.get("upload_bytes")
                print(f"| {method} | {dtype} | {shape} | {ours_record['seconds'] * 1e3:.3f} | " +
                      (f"{latency * 1e3:.3f} | " if device else "") +
                      f"{ours_record['plan_seconds'] * 1e3:.3f} | " +
                      (f"{uploaded / 1e3:.1f} kB | " if uploaded is not None else "— | ") +
                      f"{ours_record['gbps']:.1f} | {ours_record['ceiling_gbps']:.1f} | {ours_record['fraction']:.2f} | " +
                      ((f"{predicted:.2f} | " if predicted is not None else "— | ") if device else "") +
                      f"{ours_record['bound_fraction']:.2f} | " +
                      (f"{torch['seconds'] * 1e3:.3f} | {torch['fraction']:.2f} | "
                       f"{torch['seconds'] / latency:.1f}x ({torch['seconds'] / step_seconds:.1f}x) |" if torch else
                       "— | — | — |"))

    if device:
        print_peers(index)


def print_peers(index):
    """seqpool's step against the peers, where the run measured any: PyTorch eager
    and under torch.compile (latency, from the call to the synchronisation, the
    plan included on seqpool's side), and CUB's segmented sums for MEAN (GPU time)."""
    rows = []
    for dtype in ("fp32", "bf16"):
        for shape in SHAPES:
            for method in METHODS:
                ours = index.get(("device", method, dtype, shape))
                compiled = index.get(("torch-cuda-compile", method, dtype, shape))
                cub = index.get(("device", f"{method}@cub", dtype, shape))
                if ours is None or (compiled is None and cub is None):
                    continue
                eager = index.get(("torch-cuda", method, dtype, shape))
                step = ours.get("latency_seconds", ours["seconds"]) + ours["plan_seconds"]
                cells = [method, dtype, shape, f"{step * 1e3:.3f}"]
                for peer in (eager, compiled):
                    cells += [f"{peer['seconds'] * 1e3:.3f}", f"{peer['seconds'] / step:.1f}x"] if peer else ["—", "—"]
                cells += ([f"{cub['seconds'] * 1e3:.3f}", f"{cub['fraction']:.2f}", f"{cub['seconds'] / ours['seconds']:.1f}x"]
                          if cub else ["—", "—", "—"])
                rows.append(cells)
    if not rows:
        return
    print()
    print("| method | dtype | shape | seqpool step ms (with plan) | PyTorch ms | speedup | torch.compile ms | speedup |"
          " CUB segmented sums ms | fraction | speedup (GPU time) |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for cells in rows:
        print("| " + " | ".join(cells) + " |")


# The model of a device step that the first H200 run was fitted with (docs/PERFORMANCE.md,
# GPU): a fixed cost, the plan's upload at the speed a small copy reaches, the data at
# 0.8 of the read ceiling, and the serial L2 round trips of the kernel's tail, each ~0.2 µs.
STEP_FIXED_SECONDS = 10e-6
UPLOAD_BYTES_PER_SECOND = 55e9
STREAMING_SHARE = 0.8
ROUND_TRIP_SECONDS = 0.2e-6
SPLIT_ELEMENTS, TILE_ROWS, WARPS, LANES = 32768, 1024, 8, 32


def tail_round_trips(record, lengths):
    """A MEAN or MAX step's serial round trips after its last streaming load: a split
    request's partials merged by the last tile (a warp reads its share of them in turn),
    then its L2 norm in memory, a warp's lane a column of 32 at a time."""
    width = record["hidden_size"]
    longest = max(lengths)
    if longest * width <= SPLIT_ELEMENTS:
        return 2  # packed: the row is finished in registers
    tiles = -(-longest // TILE_ROWS)
    return -(-tiles // WARPS) + width // LANES + 2


def predicted_fraction(record):
    """The model's fraction of the read ceiling for a MEAN or MAX step on the device, or None."""
    if record["method"] not in ("mean", "max") or "upload_bytes" not in record:
        return None
    lengths = [record["rows"] // record["requests"]] * record["requests"]
    ideal = record["read_bytes"] / (record["ceiling_gbps"] * 1e9)
    seconds = (STEP_FIXED_SECONDS + record["upload_bytes"] / UPLOAD_BYTES_PER_SECOND + ideal / STREAMING_SHARE +
               ROUND_TRIP_SECONDS * tail_round_trips(record, lengths))
    return ideal / seconds


def row_name(record):
    """The method, and where its results are not float32 (nor the sparse lists the sparse method writes), what they are."""
    result = record.get("result", "fp32")
    return record["method"] if result in ("fp32", "sparse") else f"{record['method']}→{result}"


def plot(index, png):
    import matplotlib  # only here: the GPU machine tables without plotting

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, len(SHAPES), figsize=(4.5 * len(SHAPES), 8), sharey=True)
    width = 0.27
    for row, dtype in enumerate(["fp32", "bf16"]):
        for column, shape in enumerate(SHAPES):
            axis = axes[row][column]
            for k, (space, label, colour) in enumerate((("host", "seqpool host_space", "tab:blue"),
                                                         ("device", "seqpool device_space (OpenMP stand-in)", "tab:cyan"),
                                                         ("torch", "PyTorch, vLLM-style", "tab:orange"))):
                values = [index.get((space, m, dtype, shape), {}).get("fraction") or 0 for m in METHODS]
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
    figure.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
