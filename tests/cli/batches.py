"""Writes batch files for seqpool-run, runs it, and states in numpy what it must compute.

The reference here is numpy code written from docs/SPEC.md, independent of the C++
reference the unit tests use.
"""
import json
import math
import os
import pathlib
import shutil
import subprocess
import tempfile
import weakref

import numpy as np

TOOL = os.environ.get("SEQPOOL_RUN", "seqpool-run")


def bfloat16_bits(values):
    """float32 -> bfloat16 bit patterns, rounding to nearest even, as <u2."""
    bits = np.ascontiguousarray(values, dtype="<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2")


def from_bfloat16_bits(bits):
    return (bits.astype("<u4") << 16).view("<f4")


def stored(values, dtype):
    """What an array of `dtype` holds once written: the values the tool reads."""
    if dtype == "float32":
        return np.asarray(values, dtype="<f4")
    if dtype == "float16":
        return np.asarray(values, dtype="<f2").astype("<f4")
    return from_bfloat16_bits(bfloat16_bits(values))


def save_hidden(path, values, dtype):
    if dtype == "float32":
        np.save(path, np.asarray(values, dtype="<f4"))
    elif dtype == "float16":
        np.save(path, np.asarray(values, dtype="<f2"))
    else:
        np.save(path, bfloat16_bits(values))


# docs/TESTS.md case 29: MEAN of ROWS, m = [0.5, 1, -1, 3, -3, 0.2, -0.7, 0, 0.25, -0.25, 0, 5], on
# RANGES (a step of 1/64 at every column: levels (x + 2) * 64) and in sign bits; ALL's rows, the
# first 2 * m and the second zero. Per result dtype: the NumPy type, MEAN's values, ALL's rows.
CASE_29_MEAN = np.array([0.5, 1, -1, 3, -3, 0.2, -0.7, 0, 0.25, -0.25, 0, 5], np.float32)
CASE_29_ROWS = np.stack([2 * CASE_29_MEAN, np.zeros(12, np.float32)])
CASE_29_RANGES = np.array([[-2] * 12, [1.984375] * 12], np.float32)
CASE_29 = {"uint8": (np.uint8, [160, 192, 64, 255, 0, 140, 83, 128, 144, 112, 128, 255],
                     [[192, 255, 0, 255, 0, 153, 38, 128, 160, 96, 128, 255], [128] * 12]),
           "int8": (np.int8, [32, 64, -64, 127, -128, 12, -44, 0, 16, -16, 0, 127],
                    [[64, 127, -128, 127, -128, 25, -89, 0, 32, -32, 0, 127], [0] * 12]),
           "ubinary": (np.uint8, [212, 144], [[212, 144], [0, 0]]),
           "binary": (np.int8, [84, 16], [[84, 16], [-128, -128]])}


class Batch:
    """A batch folder: the JSON, the arrays it names, and the tool's results."""

    def __init__(self, hidden_size, poolers, projector=None, classifier=None, dtype="float32"):
        # Removed with the batch (or when the interpreter exits), quietly: a
        # TemporaryDirectory left to the collector warns (Python 3.12).
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix="seqpool-batch-"))
        weakref.finalize(self, shutil.rmtree, self.folder, ignore_errors=True)
        self.dtype = dtype
        self.spec = {"hidden_size": hidden_size, "poolers": poolers, "steps": []}
        if projector is not None:
            self.spec["projector"] = self.layer("projector", *projector)
        if classifier is not None:
            weight, bias, *extra = classifier
            self.spec["classifier"] = self.layer("classifier", weight, bias)
            if extra:
                self.spec["classifier"].update(extra[0])

    def layer(self, name, weight, bias):
        layer = {}
        if weight is not None:
            np.save(self.folder / f"{name}_w.npy", np.asarray(weight, dtype="<f4"))
            layer["weight"] = f"{name}_w.npy"
        if bias is not None:
            np.save(self.folder / f"{name}_b.npy", np.asarray(bias, dtype="<f4"))
            layer["bias"] = f"{name}_b.npy"
        return layer

    def step(self, hidden, requests):
        name = f"step{len(self.spec['steps'])}.npy"
        hidden = np.asarray(hidden, dtype=np.float32)
        if hidden.ndim != 2:
            hidden = hidden.reshape(-1, self.spec["hidden_size"])
        save_hidden(self.folder / name, hidden, self.dtype)
        self.spec["steps"].append({"hidden_states": name, "requests": requests})

    def padded_step(self, sequences, requests, padding, length=None):
        """A step laid out [B, S, H] (SPEC section 2): request i's rows `sequences[i]` are the first
        (`padding` "right") or the last ("left") rows of sequence i, NaN the rest, which is never read;
        S is the longest sequence's length unless `length` says."""
        size = self.spec["hidden_size"]
        length = max(len(rows) for rows in sequences) if length is None else length
        padded = np.full((len(sequences), length, size), np.nan, np.float32)
        for sequence, rows in zip(padded, sequences):
            rows = np.asarray(rows, np.float32).reshape(-1, size)
            if padding == "right":
                sequence[:len(rows)] = rows
            else:
                sequence[length - len(rows):] = rows
        name = f"step{len(self.spec['steps'])}.npy"
        save_hidden(self.folder / name, padded, self.dtype)
        self.spec["steps"].append({"hidden_states": name, "padding": padding, "requests": requests})

    def run(self, space="host", audit=True, preexec_fn=None, env=None):
        (self.folder / "batch.json").write_text(json.dumps(self.spec))
        self.out = self.folder / "out"
        args = [TOOL, str(self.folder / "batch.json"), "--out", str(self.out), "--space", space]
        if audit:
            args.append("--audit")
        return subprocess.run(args, capture_output=True, text=True, timeout=300, preexec_fn=preexec_fn, env=env)

    def result(self, request_id, part=None):
        """A request's result: the batch's, or, for a batch with parts, part `part`'s."""
        return np.load(self.out / (f"{request_id}.npy" if part is None else f"{part}/{request_id}.npy"))

    def parts(self, *parts):
        """Makes the batch one with parts (SPEC section 9), in place of its poolers: each a dict of
        the part's fields, whose "projector" and "classifier" may be (weight, bias[, fields]) as
        the constructor takes them."""
        self.spec.pop("poolers", None)
        self.spec["parts"] = []
        for part in parts:
            part = dict(part)
            for head in ("projector", "classifier"):
                if isinstance(part.get(head), tuple):
                    weight, bias, *extra = part[head]
                    part[head] = self.layer(f"{part['name']}_{head}", weight, bias)
                    if extra:
                        part[head].update(extra[0])
            self.spec["parts"].append(part)

    def audit(self):
        return [json.loads(line) for line in (self.out / "audit.jsonl").read_text().splitlines()]

    def check_sync_contract(self, test):
        """SPEC section 6, as --audit recorded every step: at most one upload, nothing else."""
        for counts in self.audit():
            test.assertLessEqual(counts["uploads"], 1, counts)
            test.assertEqual((counts["downloads"], counts["waits"], counts["allocations"]), (0, 0, 0), counts)


def request(request_id, task, prompt_len, num_scheduled=None, num_computed=0, token_ids=None, **params):
    entry = {"id": request_id, "task": task, "prompt_len": prompt_len, "num_computed": num_computed,
             "num_scheduled": prompt_len if num_scheduled is None else num_scheduled}
    if token_ids is not None:
        entry["prompt_token_ids"] = list(token_ids)
    if params:
        entry["params"] = params
    return entry


def pool(method, prompt, params, token_ids=None):
    """SPEC section 3: the rows (or the one row) a method gives for a whole prompt, in float64;
    a concat ("cls+max+mean", section 2) its modes' rows side by side."""
    if "+" in method:
        return np.concatenate([pool(mode, prompt, params, token_ids) for mode in method.split("+")])
    prompt = np.asarray(prompt, dtype=np.float64)
    if method == "cls":
        return prompt[0]
    if method == "last":
        return prompt[-1]
    if method in ("mean", "max", "mean_sqrt_len"):  # the rows after the instruction
        prompt = prompt[params.get("instruction_len", 0):]
    if method == "mean":
        return prompt.mean(axis=0)
    if method == "max":
        return prompt.max(axis=0)
    if method == "weighted_mean":  # row t weighs t + 1 (SGPT)
        weights = np.arange(1, len(prompt) + 1, dtype=np.float64)
        return weights @ prompt / weights.sum()
    if method == "mean_sqrt_len":  # the sum over √prompt_len (sentence-transformers)
        return prompt.sum(axis=0) / np.sqrt(len(prompt))
    kept = np.ones(len(prompt), dtype=bool)  # the rows the method chooses, less those the token filters drop
    if method == "step" and params.get("step_tag_id") is not None:
        kept &= np.asarray(token_ids) == params["step_tag_id"]
    if params.get("drop_first"):
        kept[0] = False
    if params.get("drop_last"):
        kept[-1] = False
    if params.get("drop_token_ids"):
        kept &= ~np.isin(np.asarray(token_ids), params["drop_token_ids"])
    rows = prompt[kept]
    columns = params.get("returned_token_ids")
    if method == "step" and columns:
        rows = rows[:, columns]
    return rows


ACTIVATIONS = {"identity": lambda x: x, "tanh": np.tanh, "relu": lambda x: np.where(x < 0, 0.0, x),
               "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))}


def dense(rows, layers):
    """A head's layers in turn (SPEC section 4): one (weight, bias), or a list of
    (weight, bias) or (weight, bias, activation) layers."""
    for weight, bias, *activation in layers if isinstance(layers, list) else [layers]:
        rows = rows @ np.asarray(weight, np.float64).T + (0 if bias is None else np.asarray(bias, np.float64))
        rows = ACTIVATIONS[activation[0] if activation else "identity"](rows)
    return rows


def head(rows, task, params, projector=None, classifier=None, problem_type="single_label", platt=None):
    """SPEC section 4, applied to one row or to each row of a matrix."""
    rows = np.atleast_2d(rows)
    use_activation = params.get("use_activation", True)
    if task in ("embed", "token_embed"):
        if projector is not None:
            rows = dense(rows, projector)
        if params.get("dimensions") is not None:
            rows = rows[:, : params["dimensions"]]
        if use_activation:
            rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
        return rows
    if classifier is not None:
        rows = dense(rows, classifier)
    if platt is not None:
        rows = (rows - platt[0]) / platt[1]
    if not use_activation or problem_type == "regression":
        return rows
    if problem_type == "multi_label" or rows.shape[1] < 2:
        return 1 / (1 + np.exp(-rows))
    shifted = np.exp(rows - rows.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def expected(method, task, prompt, params, token_ids=None, **head_config):
    result = head(pool(method, prompt, params, token_ids), task, params, **head_config)
    return result if task.startswith("token_") else result[0]
