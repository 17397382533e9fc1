"""Random recorded batches — every task, method, dtype and head, chunked over several
steps — replayed by seqpool-run on both spaces and compared with the numpy reference."""
import unittest

import numpy as np

from batches import Batch, expected, request, stored

SEQUENCE = ["cls", "last", "mean", "max", "weighted_mean", "mean_sqrt_len"]
TOKEN = ["all", "step"]
TASKS = ["embed", "classify", "token_embed", "token_classify"]


def draw_batch(seed):
    rng = np.random.default_rng(seed)
    hidden_size = int(rng.choice([1, 3, 16, 130]))
    dtype = str(rng.choice(["float32", "float16", "bfloat16"]))
    poolers = {"embed": str(rng.choice(SEQUENCE)), "classify": str(rng.choice(SEQUENCE)),
               "token_embed": str(rng.choice(TOKEN)), "token_classify": str(rng.choice(TOKEN))}
    head_config = {"embed": {}, "classify": {}}
    projector = classifier = None
    if rng.random() < 0.5:
        out = int(rng.integers(1, hidden_size + 4))
        projector = (rng.normal(size=(out, hidden_size)).astype(np.float32) / np.sqrt(hidden_size),
                     rng.normal(size=out).astype(np.float32) if rng.random() < 0.5 else None)
        head_config["embed"]["projector"] = projector
    extra = {"problem_type": str(rng.choice(["single_label", "multi_label", "regression"]))}
    head_config["classify"]["problem_type"] = extra["problem_type"]
    if rng.random() < 0.5:
        extra.update(logit_mean=float(rng.normal()), logit_sigma=float(rng.choice([0.5, -2.0])))
        head_config["classify"]["platt"] = (extra["logit_mean"], extra["logit_sigma"])
    weight = None
    if rng.random() < 0.5:
        labels = int(rng.choice([1, 2, 5]))
        weight = (rng.normal(size=(labels, hidden_size)).astype(np.float32) / np.sqrt(hidden_size),
                  rng.normal(size=labels).astype(np.float32) if rng.random() < 0.5 else None)
        head_config["classify"]["classifier"] = weight
    classifier = (weight[0] if weight else None, weight[1] if weight else None, extra)
    batch = Batch(hidden_size, poolers, projector=projector, classifier=classifier, dtype=dtype)

    prompts = []
    for i in range(int(rng.integers(1, 13))):
        task = str(rng.choice(TASKS))
        prompt_len = int(rng.integers(1, 200))
        params = {"use_activation": bool(rng.random() < 0.75)}
        kind = "classify" if "classify" in task else "embed"
        if rng.random() < 0.6:
            params["step_tag_id"] = int(rng.integers(0, 5))
        layer = projector if kind == "embed" else weight
        width = layer[0].shape[0] if layer is not None else hidden_size
        if task.startswith("token_") and poolers[task] == "step" and layer is None and rng.random() < 0.5:
            params["returned_token_ids"] = [int(c) for c in rng.integers(0, hidden_size, size=rng.integers(1, 5))]
            width = len(params["returned_token_ids"])
        if kind == "embed" and rng.random() < 0.5:
            params["dimensions"] = int(rng.integers(1, width + 1))
        if not task.startswith("token_") and poolers[task] != "weighted_mean" and prompt_len > 1 and rng.random() < 0.3:
            params["instruction_len"] = int(rng.integers(1, prompt_len))
        if task.startswith("token_") and rng.random() < 0.4:  # token filters
            params["drop_first"] = bool(rng.random() < 0.5)
            params["drop_last"] = bool(rng.random() < 0.5)
            params["drop_token_ids"] = [t for t in range(4) if rng.random() < 0.3]
        prompts.append({"id": f"r{i}", "task": task, "prompt_len": prompt_len, "params": params, "done": 0,
                        "rows": stored(rng.normal(size=(prompt_len, hidden_size)), dtype),
                        "ids": [int(t) for t in rng.integers(0, 4, size=prompt_len)]})

    while any(p["done"] < p["prompt_len"] for p in prompts):
        hidden, requests = [], []
        for p in prompts:
            remaining = p["prompt_len"] - p["done"]
            if remaining == 0:
                continue
            size = remaining if rng.random() < 0.4 else int(rng.integers(1, remaining + 1))
            requests.append(request(p["id"], p["task"], p["prompt_len"], size, p["done"], p["ids"], **p["params"]))
            hidden.append(p["rows"][p["done"]:p["done"] + size])
            p["done"] += size
        batch.step(np.concatenate(hidden).reshape(-1, hidden_size), requests)
    return batch, prompts, poolers, head_config


class RandomBatches:
    space = "host"

    def test_random_batches_match_the_reference(self):
        for seed in range(40):
            batch, prompts, poolers, head_config = draw_batch(seed)
            run = batch.run(self.space)
            self.assertEqual(run.returncode, 0, f"seed {seed}: {run.stderr}")
            batch.check_sync_contract(self)
            tolerance = 1e-5 if batch.dtype == "float32" else 1e-2
            for p in prompts:
                kind = "classify" if "classify" in p["task"] else "embed"
                want = expected(poolers[p["task"]], p["task"], p["rows"], p["params"], p["ids"], **head_config[kind])
                got = batch.result(p["id"])
                self.assertEqual(got.shape, want.shape, f"seed {seed}, {p['id']}")
                np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance,
                                           err_msg=f"seed {seed}, {p['id']} ({p['task']}, {poolers[p['task']]})")


class HostSpace(RandomBatches, unittest.TestCase):
    space = "host"


class DeviceSpace(RandomBatches, unittest.TestCase):
    space = "device"


if __name__ == "__main__":
    unittest.main()
