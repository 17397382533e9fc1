"""BGE-M3's three outputs from Python (the dense CLS embedding, the sparse lexical
weights, the ColBERT vectors through a [128, H] layer): one MultiPooler step
against three Dispatcher steps over the same hidden states, as an engine calls
them (plan, reserve, forward every step), for one short query, a batch of short
queries and a batch of documents. Reports the latency of each way, best of five
interleaved rounds, and what each step uploaded. Prints a table and JSON;
docs/PERFORMANCE.md ("Python") has the figures.

    PYTHONPATH=build/python python3 python/benchmarks/multi_pooler.py
"""
import json
import time

import numpy as np

import seqpool

HIDDEN_SIZE = 1024
COLBERT_WIDTH = 128
SPECIAL_IDS = [0, 1, 2, 3]  # XLM-RoBERTa's CLS, PAD, EOS, UNK
CASES = [("one query of 16 rows", [16], 2000), ("64 queries of 16 rows", [16] * 64, 100),
         ("8 documents of 512 rows", [512] * 8, 5)]


def outputs(rng):
    """The three outputs' keywords, as Part and Dispatcher take them, and the filters their requests carry."""
    weigh = seqpool.Dense((rng.normal(size=(1, HIDDEN_SIZE)) / 32).astype(np.float32), np.zeros(1, np.float32),
                          activation="relu")
    colbert = (rng.normal(size=(COLBERT_WIDTH, HIDDEN_SIZE)) / 32).astype(np.float32)
    return [({"method": "cls"}, {}),
            ({"method": "all", "task": "token_classify", "classifier": weigh, "problem": "regression",
              "result_dtype": "sparse"}, {"drop_token_ids": SPECIAL_IDS}),
            ({"method": "all", "projector": colbert}, {"drop_first": True})]


def seconds(step, repeats):
    start = time.perf_counter()
    for _ in range(repeats):
        step()
    return (time.perf_counter() - start) / repeats


def main():
    rng = np.random.default_rng(0)
    chosen = outputs(rng)
    multi = seqpool.MultiPooler(HIDDEN_SIZE, [seqpool.Part(**kw, **filters) for kw, filters in chosen])
    dispatchers = []  # each output's own: its pooler, and the filters as its requests' knobs
    for kw, filters in chosen:
        given = dict(kw)
        method = given.pop("method")
        dispatchers.append((seqpool.pooler(HIDDEN_SIZE, method, **given), seqpool.PoolingParams(**filters)))
    records = []
    for name, lengths, repeats in CASES:
        hidden = rng.normal(size=(sum(lengths), HIDDEN_SIZE)).astype(np.float32)
        token_ids = [rng.integers(0, 250000, size=n) for n in lengths]

        def one_step():
            plan = multi.plan(lengths, token_ids=token_ids)
            multi.reserve(plan)
            multi.forward(hidden, plan)

        def three_steps():
            for dispatcher, params in dispatchers:
                plan = dispatcher.plan(lengths, token_ids=token_ids, params=params)
                dispatcher.reserve(plan)
                dispatcher.forward(hidden, plan)

        uploaded = []
        for pooler, step in ((multi, one_step), (None, three_steps)):
            counted = [multi] if pooler else [d for d, _ in dispatchers]
            before = [p.audit() for p in counted]
            step()
            after = [p.audit() for p in counted]
            uploaded.append((sum(a["uploads"] - b["uploads"] for a, b in zip(after, before)),
                             sum(a["upload_bytes"] - b["upload_bytes"] for a, b in zip(after, before))))
        # Interleaved, best of five: the machine is shared and noisy.
        one, three = [], []
        for _ in range(5):
            one.append(seconds(one_step, repeats))
            three.append(seconds(three_steps, repeats))
        records.append({"case": name, "requests": len(lengths), "rows": sum(lengths),
                        "multi_pooler_us": min(one) * 1e6, "three_dispatchers_us": min(three) * 1e6,
                        "multi_pooler_uploads": uploaded[0][0], "multi_pooler_upload_bytes": uploaded[0][1],
                        "three_dispatchers_uploads": uploaded[1][0], "three_dispatchers_upload_bytes": uploaded[1][1]})
    for r in records:
        print(f"{r['case']:24s}: MultiPooler {r['multi_pooler_us']:10.1f} us ({r['multi_pooler_uploads']} upload, "
              f"{r['multi_pooler_upload_bytes']} B), three Dispatchers {r['three_dispatchers_us']:10.1f} us "
              f"({r['three_dispatchers_uploads']} uploads, {r['three_dispatchers_upload_bytes']} B), "
              f"{r['three_dispatchers_us'] / r['multi_pooler_us']:.2f}x")
    print(json.dumps(records))


if __name__ == "__main__":
    main()
