"""What handing a step's token ids over costs: STEP's plan over 4096 prompts of
8–24 ids, the ids given as a tensor a request or as one [B, L] tensor, a row a
request (vLLM's padded prompt_token_ids), from NumPy and, where it imports, from
PyTorch. Prints a table and JSON; docs/PERFORMANCE.md ("Python") has the figures.

    PYTHONPATH=build/python python3 python/benchmarks/token_ids.py
"""
import json
import time

import numpy as np

import seqpool

REQUESTS, HIDDEN_SIZE, STEP_TAG = 4096, 64, 5


def best_plan_seconds(pooler, lengths, token_ids, params, repeats=15):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        pooler.plan(lengths, token_ids=token_ids, params=params)
        best = min(best, time.perf_counter() - start)
    return best


def main():
    rng = np.random.default_rng(0)
    lengths = rng.integers(8, 25, REQUESTS)
    ids = rng.integers(0, 30000, int(lengths.sum())).astype(np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    padded = np.full((REQUESTS, int(lengths.max())), -1, np.int64)  # padding is never read
    for row, (start, n) in enumerate(zip(starts, lengths)):
        padded[row, :n] = ids[start:start + n]
    frameworks = {"numpy": (ids, padded)}
    try:
        import torch
        frameworks["torch"] = (torch.from_numpy(ids), torch.from_numpy(padded))
    except ImportError:
        pass
    pooler = seqpool.pooler(HIDDEN_SIZE, "step")
    params = seqpool.PoolingParams(step_tag_id=STEP_TAG)
    records = []
    for framework, (flat, rows) in frameworks.items():
        per_request = [flat[start:start + n] for start, n in zip(starts, lengths)]
        for given, token_ids in (("a tensor a request", per_request), ("one [B, L] tensor", rows)):
            seconds = best_plan_seconds(pooler, lengths, token_ids, params)
            records.append({"framework": framework, "given_as": given, "requests": REQUESTS, "plan_seconds": seconds})
            print(f"{framework:5}  {given:18}  plan {seconds * 1e3:7.3f} ms")
    print(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
