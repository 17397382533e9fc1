"""A ColBERT projection (ALL through a [128, 1024] layer) over one prompt of n
rows, for n from 16 to 8192: the time a step takes and its time a row, best of
three rounds of three steps (plan, reserve, forward). Short prompts must cost no
more a row than long ones. Prints a table and JSON; docs/PERFORMANCE.md
("Several outputs from Python, and short prompts through a layer") has the figures.

    PYTHONPATH=build/python python3 python/benchmarks/projection_rows.py
"""
import json
import time

import numpy as np

import seqpool

HIDDEN_SIZE = 1024
COLBERT_WIDTH = 128


def main():
    rng = np.random.default_rng(0)
    projector = (rng.normal(size=(COLBERT_WIDTH, HIDDEN_SIZE)) / 32).astype(np.float32)
    pooler = seqpool.pooler(HIDDEN_SIZE, "all", projector=projector)
    records = []
    for rows in (16, 64, 256, 512, 1024, 2048, 4096, 8192):
        hidden = rng.normal(size=(rows, HIDDEN_SIZE)).astype(np.float32)
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(3):
                seqpool.pool(pooler, hidden, [rows])
            best = min(best, (time.perf_counter() - start) / 3)
        records.append({"rows": rows, "step_ms": best * 1e3, "row_us": best / rows * 1e6})
        print(f"{rows:5d} rows: {best * 1e3:8.2f} ms, {best / rows * 1e6:6.2f} us a row")
    print(json.dumps(records))


if __name__ == "__main__":
    main()
