"""What a vLLM user gains by swapping its pooler for seqpool's from Python: the
vLLM-style PyTorch pooler of benchmarks/torch_baseline.py and seqpool's Python API
(plan, reserve and forward every step: latency with planning) on the same shapes,
dtypes and device. Prints a line per case and writes JSON; docs/PERFORMANCE.md
("Python") has the figures.

    PYTHONPATH=build/python python3 python/benchmarks/torch_vs_seqpool.py --device cuda --json out.json
"""
import argparse
import json
import pathlib
import statistics
import sys
import time

import torch

import seqpool

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))
from torch_baseline import STEP_TAG, run_method, shapes  # noqa: E402

METHODS = ("cls", "last", "mean", "max", "all", "step")


def median_seconds(work, repeats, sync):
    work()
    seconds = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        work()
        sync()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--shape", choices=tuple(shapes()), help="one shape only (default: every packed one)")
    parser.add_argument("--json", help="write the records to this file")
    args = parser.parse_args()
    device = args.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    stream = torch.cuda.current_stream().cuda_stream if device == "cuda" else 0
    records = []
    for shape, (hidden_size, lengths, padded_to) in shapes().items():
        if padded_to or (args.shape and shape != args.shape):
            continue
        rows = sum(lengths)
        lengths_t = torch.tensor(lengths, device=device)
        prompt_lens = torch.tensor(lengths)  # the host's copy, as an engine holds it
        ids = torch.tensor([STEP_TAG if t % 8 == 7 else t % 5 for t in range(rows)])
        starts = [0]
        for n in lengths[:-1]:
            starts.append(starts[-1] + n)
        # The prompts' ids as vLLM's pooling metadata holds them: [B, max_prompt_len], each row
        # padded past its prompt (vLLM pads with the vocabulary's size; seqpool reads no padding).
        prompt_ids = torch.full((len(lengths), max(lengths)), -1, dtype=torch.int64)
        for row, (s, n) in enumerate(zip(starts, lengths)):
            prompt_ids[row, :n] = ids[s:s + n]
        weight = torch.full((2, hidden_size), 1.0 / hidden_size, device=device)
        values = torch.randn(rows, hidden_size, generator=torch.Generator().manual_seed(2))
        for dtype, hidden in (("fp32", values.to(device)), ("bf16", values.to(torch.bfloat16).to(device))):
            for method in METHODS:
                token = method in ("all", "step")
                pooler = seqpool.pooler(hidden_size, method, device=device, stream=stream)
                params = seqpool.PoolingParams(step_tag_id=STEP_TAG) if method == "step" else None
                request_ids = torch.arange(len(lengths))

                def with_seqpool():
                    plan = pooler.plan(prompt_lens, ids=request_ids, token_ids=prompt_ids if token else None,
                                       params=params)
                    pooler.reserve(plan)
                    return pooler.forward(hidden, plan)

                theirs = median_seconds(lambda: run_method(method, hidden, lengths_t, ids.to(device), weight, "embed"),
                                        args.repeats, sync)
                ours = median_seconds(with_seqpool, args.repeats, sync)
                records.append({"method": method, "dtype": dtype, "shape": shape, "device": device,
                                "requests": len(lengths), "rows": rows, "hidden_size": hidden_size,
                                "torch_seconds": theirs, "seqpool_python_seconds": ours, "speedup": theirs / ours})
                print(f"{method:5} {dtype} {shape:7} torch {theirs * 1e3:8.3f} ms  seqpool from Python "
                      f"{ours * 1e3:8.3f} ms  {theirs / ours:6.1f}x", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu", "records": records},
                      out, indent=1)


if __name__ == "__main__":
    main()
