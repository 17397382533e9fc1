"""The Python binding's own cost per step: a step through seqpool's Python API
(plan from arrays as an engine holds them, reserve, forward) against the same
step through the C++ API alone, for 1 and 4096 one-row requests. Prints a table
and JSON; docs/PERFORMANCE.md ("Python") has the figures.

    PYTHONPATH=build/python python3 python/benchmarks/overhead.py
"""
import json
import time

import numpy as np

import seqpool

HIDDEN_SIZE = 64


def python_step_seconds(dispatcher, hidden, lengths, ids, repeats):
    start = time.perf_counter()
    for _ in range(repeats):
        plan = dispatcher.plan(lengths, ids=ids)
        dispatcher.reserve(plan)
        dispatcher.forward(hidden, plan)
    return (time.perf_counter() - start) / repeats


def main():
    records = []
    for requests in (1, 4096):
        repeats = 20000 if requests == 1 else 200
        lengths = np.ones(requests, np.int64)
        hidden = np.random.default_rng(0).normal(size=(requests, HIDDEN_SIZE)).astype(np.float32)
        dispatcher = seqpool.pooler(HIDDEN_SIZE, "cls")
        for ids_kind, ids in (("int array", np.arange(requests, dtype=np.int64)),
                              ("str list", [f"req-{i}" for i in range(requests)])):
            # Interleaved, best of five: the machine is shared and noisy.
            native, python = [], []
            for _ in range(5):
                native.append(dispatcher._native_step_seconds(hidden, lengths, ids=ids, repeats=repeats))
                python.append(python_step_seconds(dispatcher, hidden, lengths, ids, repeats))
            cpp, py = min(native), min(python)
            records.append({"requests": requests, "ids": ids_kind, "cpp_us": cpp * 1e6, "python_us": py * 1e6,
                            "overhead_us": (py - cpp) * 1e6, "goal_us": 20 + 0.05 * requests})
    for r in records:
        print(f"{r['requests']:5d} requests, ids {r['ids']:9s}: C++ {r['cpp_us']:8.1f} us, "
              f"Python {r['python_us']:8.1f} us, overhead {r['overhead_us']:6.1f} us (goal {r['goal_us']:.1f})")
    print(json.dumps(records))


if __name__ == "__main__":
    main()
