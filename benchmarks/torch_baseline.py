"""What users would otherwise run: a vLLM-style PyTorch pooler, on the CPU or on a
CUDA GPU, on the shapes of pool_bench, with the same traffic accounting, printed
as JSON records.

MEAN sums rows with index_add_ over segment ids, MAX with scatter_reduce_, CLS and
LAST gather rows by index, ALL splits and normalises every token (a bare split
only makes views), STEP gathers the tagged rows with a boolean mask. Every method
ends with the head pool_bench uses: L2 normalisation (embed) or a two-label
classifier with softmax (classify). COLBERT is multi-vector retrieval as
FlagEmbedding computes BGE-M3's colbert_vecs, at ColBERTv2's width: every row
but each prompt's first through a 128-wide linear layer, then L2 normalisation
per row. SPARSE is BGE-M3's lexical weights: relu of a one-output linear layer on
every row whose token id is not 0 (the special ids FlagEmbedding leaves out), then
each request's largest weight of each id above 0, as (id, weight) pairs in order of
id — vectorised with scatter_reduce_ over (request, id) keys, where FlagEmbedding
runs a Python loop over the tokens. BGE-M3 is the three outputs of that model's one
forward, as FlagEmbedding computes them: the CLS row normalised, COLBERT and SPARSE
(traffic: every row once). The mixed batch runs each task batched over
all its requests, which is kinder than per-group calls. The padded shape is
pooled as TEI and ONNX-exported models pool [B, S, H] with an attention mask:
masked sum and amax over S, CLS and LAST by index, ALL and STEP by a boolean
mask.

On CUDA, inputs live on the GPU, each timed call ends with a synchronisation and
is preceded by a write of twice the GPU's L2, as pool_bench_cuda does.

--compile runs the same code under torch.compile (PyTorch 2; Inductor's Triton
kernels on a GPU), what a user who will not write kernels would pick instead: each
case's work is compiled, the cases of a method sharing Dynamo's cache of its code (as an
engine's steps would), which recompiles where its guards ask (with dynamic shapes after
a shape first changes) in each case's untimed first call; its records are of space "torch-compile" or "torch-cuda-compile". Where the
code breaks the graph (a split's counts read back, data-dependent shapes), Dynamo runs
that part eagerly, as it would for the user. The records are written to --json (whole,
through a file renamed into place) as each case ends, so that a run cut short keeps the
cases it finished; --seconds starts no case past that many seconds.

usage: torch_baseline.py [--json FILE] [--repeats N] [--threads N] [--device cpu|cuda] [--shape NAME]
                         [--method NAME[,NAME...]] [--dtype fp32|bf16] [--compile] [--seconds N]
"""
import argparse
import json
import mmap
import os
import subprocess
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

STEP_TAG = 7
COLBERT_WIDTH = 128
METHODS = ("cls", "last", "mean", "max", "all", "step", "colbert", "sparse", "bge-m3", "dispatcher")


def shapes():
    rng = np.random.default_rng(1)
    short, total = [], 0
    while total < 65536:
        length = min(int(rng.integers(8, 25)), 65536 - total)
        short.append(length)
        total += length
    padded = [32 + i * 97 % 225 for i in range(256)]  # as pool_bench draws them
    return {"long": (1024, [1024] * 64, 0), "short": (1024, short, 0), "single": (1024, [65536], 0),
            "wide": (4096, [512] * 8, 0), "padded": (1024, padded, 256)}


def segment_ids(lengths):
    return torch.repeat_interleave(torch.arange(len(lengths), device=lengths.device), lengths)


def first_rows(lengths):
    return torch.cumsum(lengths, 0) - lengths


def embed(rows):
    return F.normalize(rows, p=2, dim=-1)


def classify(rows, weight):
    return torch.softmax(rows @ weight.T, dim=-1)


def pool(method, hidden, lengths, token_ids):
    """One task's pooler over all its requests: hidden [T, H], lengths [n]."""
    if method == "mean":
        sums = torch.zeros(len(lengths), hidden.shape[1], device=hidden.device).index_add_(
            0, segment_ids(lengths), hidden.float())
        return sums / lengths.unsqueeze(1)
    if method == "max":
        index = segment_ids(lengths).unsqueeze(1).expand(-1, hidden.shape[1])
        return torch.empty(len(lengths), hidden.shape[1], device=hidden.device).scatter_reduce_(
            0, index, hidden.float(), "amax", include_self=False)
    if method == "cls":
        return hidden[first_rows(lengths)].float()
    if method == "last":
        return hidden[torch.cumsum(lengths, 0) - 1].float()
    if method == "all":
        return hidden.float()
    if method == "colbert":  # every row but the first
        kept = torch.ones(hidden.shape[0], dtype=torch.bool, device=hidden.device)
        kept[first_rows(lengths)] = False
        return hidden[kept].float()
    mask = token_ids == STEP_TAG  # step
    return hidden[mask].float()


def pool_padded(method, hidden, lengths, token_ids):
    """A padded pooler over hidden [B, S, H], right-padded to S, lengths [B], token ids [B, S]."""
    mask = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0) < lengths.unsqueeze(1)
    if method == "mean":
        return torch.sum(hidden * mask.unsqueeze(-1), dim=1, dtype=torch.float32) / lengths.unsqueeze(1)
    if method == "max":
        return hidden.masked_fill(~mask.unsqueeze(-1), float("-inf")).amax(dim=1).float()
    if method == "cls":
        return hidden[:, 0].float()
    if method == "last":
        return hidden[torch.arange(len(lengths), device=hidden.device), lengths - 1].float()
    if method == "all":
        return hidden[mask].float()
    if method == "colbert":
        return hidden[:, 1:][mask[:, 1:]].float()
    return hidden[mask & (token_ids == STEP_TAG)].float()


def split_counts(method, lengths, token_ids):
    if method == "all":
        return lengths.tolist()
    if method == "colbert":
        return (lengths - 1).tolist()
    if token_ids.dim() == 2:  # padded [B, S]: the tagged rows among each sequence's prompt rows
        prompt = torch.arange(token_ids.shape[1], device=lengths.device).unsqueeze(0) < lengths.unsqueeze(1)
        return ((token_ids == STEP_TAG) & prompt).sum(1).tolist()
    mask = (token_ids == STEP_TAG).long()
    return torch.zeros(len(lengths), dtype=torch.long, device=lengths.device).index_add_(
        0, segment_ids(lengths), mask).tolist()


def sparse_lists(hidden, lengths, token_ids, weight):
    """Each request's (id, weight) pairs: the largest relu(v·h) of each id but 0, above 0."""
    if hidden.dim() == 3:  # padded [B, S, H]: the prompt rows
        mask = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0) < lengths.unsqueeze(1)
        hidden, token_ids = hidden[mask], token_ids[mask]
    kept = token_ids != 0
    weights = torch.relu(F.linear(hidden[kept].float(), weight[:1])).squeeze(1)
    vocabulary = int(token_ids.max()) + 1
    keys = segment_ids(lengths)[kept] * vocabulary + token_ids[kept]
    largest = torch.zeros(len(lengths) * vocabulary, device=hidden.device).scatter_reduce_(0, keys, weights, "amax")
    listed = torch.nonzero(largest > 0).squeeze(1)
    counts = torch.zeros(len(lengths), dtype=torch.long, device=hidden.device).index_add_(
        0, listed // vocabulary, torch.ones_like(listed))
    return list(torch.stack((listed % vocabulary, largest[listed]), 1).split(counts.tolist()))


def run_method(method, hidden, lengths, token_ids, weight, head, padded=False, projector=None):
    if method == "bge-m3":
        return [run_method(part, hidden, lengths, token_ids, weight, head, padded, projector)
                for part in ("cls", "colbert", "sparse")]
    if method == "sparse":
        return sparse_lists(hidden, lengths, token_ids, weight)
    pooled = (pool_padded if padded else pool)(method, hidden, lengths, token_ids)
    if method == "colbert":
        pooled = F.linear(pooled, projector)
    result = embed(pooled) if head == "embed" else classify(pooled, weight)
    if method in ("all", "step", "colbert"):
        return list(result.split(split_counts(method, lengths, token_ids)))
    return result


def run_mixed(hidden, lengths, token_ids, weight):
    """Tasks cycle embed (MEAN), classify (CLS), token_embed (ALL), token_classify (STEP)."""
    firsts = first_rows(lengths)
    results = []
    for task, (method, head) in enumerate((("mean", "embed"), ("cls", "classify"), ("all", "embed"), ("step", "classify"))):
        if task >= len(lengths):
            continue
        chosen = torch.arange(task, len(lengths), 4, device=lengths.device)
        chosen_lengths = lengths[chosen]
        rows = torch.repeat_interleave(firsts[chosen], chosen_lengths) + (
            torch.arange(int(chosen_lengths.sum()), device=lengths.device) -
            torch.repeat_interleave(first_rows(chosen_lengths), chosen_lengths))
        results.append(run_method(method, hidden[rows], chosen_lengths, token_ids[rows], weight, head))
    return results


def traffic(method, lengths, token_ids, hidden_size, element_size, output_floats):
    tasks = [method] * len(lengths) if method != "dispatcher" else [("mean", "cls", "all", "step")[i % 4] for i in range(len(lengths))]
    read_rows, first = 0, 0
    for i, (used, length) in enumerate(zip(tasks, lengths.tolist())):
        if used in ("cls", "last"):
            read_rows += 1
        elif used == "colbert":
            read_rows += length - 1
        elif used == "sparse":
            ids = token_ids[i, :length] if token_ids.dim() == 2 else token_ids[first:first + length]
            read_rows += int((ids != 0).sum())
        elif used == "step":
            ids = token_ids[i, :length] if token_ids.dim() == 2 else token_ids[first:first + length]  # padded: [B, S]
            read_rows += int((ids == STEP_TAG).sum())
        else:
            read_rows += length
        first += length
    return read_rows * hidden_size * element_size + output_floats * 4


def output_floats(result):
    if isinstance(result, torch.Tensor):
        return result.numel()
    return sum(output_floats(part) for part in result)


def on_huge_pages(values):
    """A copy of `values` in memory that asks for huge pages, as pool_bench's input
    (a host_space buffer) does: both sides pay the same page walks."""
    memory = mmap.mmap(-1, values.numel() * values.element_size())
    memory.madvise(mmap.MADV_HUGEPAGE)
    copy = torch.frombuffer(memory, dtype=values.dtype).view(values.shape)
    copy.copy_(values)
    return copy


def cache_flusher(device):
    """Reads a buffer twice the size of the last-level cache before each timed
    call, as pool_bench does, so that both sides read their input from memory."""
    if device == "cuda":
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        flush = torch.empty(2 * l2 // 4, device="cuda")
        return lambda: flush.fill_(0.0)
    try:
        last_level = int(subprocess.run(["getconf", "LEVEL3_CACHE_SIZE"], capture_output=True, text=True).stdout)
    except (ValueError, OSError):
        last_level = 0
    flush = torch.ones(2 * (last_level if last_level > 0 else 256 << 20) // 4)
    return lambda: float(flush.sum())


def compiler(enabled):
    """What runs a case's work: as it is, or under torch.compile."""
    if not enabled:
        return lambda work: work
    if not hasattr(torch, "compile"):
        raise SystemExit(f"torch_baseline.py: --compile needs PyTorch 2 (torch.compile); this is {torch.__version__}")
    # Every case's work is the same lambda, its cases told apart by Dynamo's guards: room for all of them.
    torch._dynamo.config.cache_size_limit = 256
    return torch.compile


def write_records(path, records):
    """Writes the records whole: a run stopped mid-write leaves the last file."""
    if path:
        with open(path + ".part", "w") as out:
            json.dump(records, out, indent=2)
        os.replace(path + ".part", path)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument("--json", help="write the records to this file")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--shape", choices=tuple(shapes()), help="one shape only (default: every one)")
    parser.add_argument("--method", help="these methods only, comma-separated (default: every one)")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), help="one dtype only (default: both)")
    parser.add_argument("--compile", action="store_true", help="run each case under torch.compile")
    parser.add_argument("--seconds", type=float, help="start no case past this many seconds of the run")
    args = parser.parse_args()
    methods = METHODS if args.method is None else tuple(args.method.split(","))
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method {', '.join(unknown)}: choose from {', '.join(METHODS)}")
    torch.set_num_threads(args.threads)
    device = args.device
    space = ("torch" if device == "cpu" else "torch-cuda") + ("-compile" if args.compile else "")
    prepare = compiler(args.compile)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    evict = cache_flusher(device)
    records = []
    began = time.perf_counter()
    for shape, (hidden_size, lengths, padded_to) in shapes().items():
        if args.shape and shape != args.shape:
            continue
        # Rows of hidden states: every prompt's, and the padding.
        rows = len(lengths) * padded_to if padded_to else sum(lengths)
        lengths_t = torch.tensor(lengths, device=device)
        token_ids = torch.tensor([STEP_TAG if t % 8 == 7 else t % 5 for t in range(rows)], device=device)
        weight = torch.full((2, hidden_size), 1.0 / hidden_size, device=device)
        projector = torch.full((COLBERT_WIDTH, hidden_size), 1.0 / hidden_size, device=device)
        generator = torch.Generator().manual_seed(2)
        values = torch.randn(rows, hidden_size, generator=generator)
        if padded_to:
            values = values.view(len(lengths), padded_to, hidden_size)
            token_ids = token_ids.view(len(lengths), padded_to)
        place = on_huge_pages if device == "cpu" else (lambda tensor: tensor.to(device))
        for dtype, hidden in (("fp32", values), ("bf16", values.to(torch.bfloat16))):
            if args.dtype and dtype != args.dtype:
                continue
            hidden = place(hidden)
            for method in methods:
                if method == "dispatcher" and padded_to:
                    continue
                if args.seconds is not None and time.perf_counter() - began > args.seconds:
                    print(f"{method:10} {space:6} {dtype:5} {shape:7} not started: past --seconds {args.seconds:g}",
                          flush=True)
                    continue
                if method == "dispatcher":
                    work = lambda: run_mixed(hidden, lengths_t, token_ids, weight)
                else:
                    work = lambda: run_method(method, hidden, lengths_t, token_ids, weight, "embed", padded_to > 0,
                                              projector)
                work = prepare(work)
                result = work()
                seconds = []
                for _ in range(args.repeats):
                    evict()
                    sync()
                    start = time.perf_counter()
                    work()
                    sync()
                    seconds.append(time.perf_counter() - start)
                median = statistics.median(seconds)
                moved = traffic(method, lengths_t, token_ids, hidden_size, hidden.element_size(), output_floats(result))
                records.append({"method": method, "space": space, "dtype": dtype, "shape": shape, "rows": rows,
                                "hidden_size": hidden_size, "requests": len(lengths), "seconds": median,
                                "bytes": moved, "gbps": moved / median / 1e9})
                write_records(args.json, records)
                print(f"{method:10} {space:6} {dtype:5} {shape:7} {median * 1e3:9.3f} ms {moved / median / 1e9:7.2f} GB/s",
                      flush=True)
    write_records(args.json, records)


if __name__ == "__main__":
    main()
