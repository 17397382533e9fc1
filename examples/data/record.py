"""Records the small example batch that README.md replays with seqpool-run.

Three steps of a model with hidden_size 8: embeddings (MEAN, one client asking for
4 matryoshka dimensions), a two-label classifier (CLS), token embeddings (ALL) and
process-reward scores (STEP: the classifier on each row at tag id 7). Two long
prompts arrive in chunks across the steps.
"""
import json

import numpy as np

rng = np.random.default_rng(2026)
hidden_size = 8


def rows(count):
    return rng.normal(size=(count, hidden_size)).astype("<f4")


np.save("classifier.npy", (rng.normal(size=(2, hidden_size)) / np.sqrt(hidden_size)).astype("<f4"))
np.save("classifier_bias.npy", np.array([0.1, -0.1], "<f4"))
reasoning_ids = [3, 5, 7, 2, 2, 7, 4, 7]

steps = [
    [  # step 0: two whole requests, and the first chunks of two long ones
        {"id": "query-1", "task": "embed", "prompt_len": 5, "num_scheduled": 5},
        {"id": "doc-1", "task": "embed", "prompt_len": 12, "num_scheduled": 6, "params": {"dimensions": 4}},
        {"id": "pair-1", "task": "classify", "prompt_len": 4, "num_scheduled": 4},
        {"id": "tokens-1", "task": "token_embed", "prompt_len": 6, "num_scheduled": 3},
    ],
    [  # step 1: the long ones go on, a reward request arrives whole
        {"id": "doc-1", "task": "embed", "prompt_len": 12, "num_computed": 6, "num_scheduled": 4,
         "params": {"dimensions": 4}},
        {"id": "tokens-1", "task": "token_embed", "prompt_len": 6, "num_computed": 3, "num_scheduled": 3},
        {"id": "reward-1", "task": "token_classify", "prompt_len": 8, "num_scheduled": 8,
         "prompt_token_ids": reasoning_ids, "params": {"step_tag_id": 7}},
    ],
    [  # step 2: the last chunk of doc-1, and a raw-score classification
        {"id": "doc-1", "task": "embed", "prompt_len": 12, "num_computed": 10, "num_scheduled": 2,
         "params": {"dimensions": 4}},
        {"id": "pair-2", "task": "classify", "prompt_len": 3, "num_scheduled": 3, "params": {"use_activation": False}},
    ],
]
for index, requests in enumerate(steps):
    np.save(f"step{index}.npy", rows(sum(r["num_scheduled"] for r in requests)))

batch = {
    "hidden_size": hidden_size,
    "poolers": {"embed": "mean", "classify": "cls", "token_embed": "all", "token_classify": "step"},
    "classifier": {"weight": "classifier.npy", "bias": "classifier_bias.npy", "problem_type": "single_label"},
    "steps": [{"hidden_states": f"step{i}.npy", "requests": r} for i, r in enumerate(steps)],
}
with open("batch.json", "w") as out:
    json.dump(batch, out, indent=2)
    out.write("\n")
