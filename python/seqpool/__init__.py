"""seqpool from Python: pools the hidden states of a packed, ragged batch of
requests into per-request results (embeddings, class scores, token vectors),
with no host-device synchronisation inside a step.

    import numpy as np, seqpool
    pooler = seqpool.pooler(hidden_size=4, method="mean")      # embed task
    results = seqpool.pool(pooler, hidden, prompt_lens=[2, 4])  # a list of arrays

Engines call the three phases themselves (SPEC section 12):

    plan = dispatcher.plan(prompt_lens, num_scheduled, num_computed, ids=..., tasks=..., params=...)
    dispatcher.reserve(plan)                # may allocate; outside the step
    out = dispatcher.forward(hidden, plan)  # the step: no sync, no allocation
    rows = seqpool.split(torch.from_dlpack(out), plan)

Several outputs of each request from one step (BGE-M3's dense, sparse and
ColBERT vectors), planned and uploaded once, come from a MultiPooler of Parts:

    m3 = seqpool.MultiPooler(hidden_size, [seqpool.Part("cls"), seqpool.Part("all", drop_first=True)])
    dense, colbert = seqpool.pool(m3, hidden, prompt_lens=[2, 4])  # a list of arrays a part
"""
from ._seqpool import (Dense, DeviceError, Dispatcher, GraphUpload, MultiPooler, Part, PartPlan, PartsPlan, Plan,
                       PoolingParams, _task_named, has_cuda)

__all__ = ["Dense", "DeviceError", "Dispatcher", "GraphUpload", "MultiPooler", "Part", "PartPlan", "PartsPlan", "Plan",
           "PoolingParams", "has_cuda", "pooler", "pool", "split"]

def pooler(hidden_size, method, task=None, **heads):
    """A Dispatcher serving one task with `method`: "embed" for a sequence method,
    "token_embed" for a token method ("all", "step") unless `task` says otherwise.
    `heads` are Dispatcher's other keywords (projector, classifier, result_dtype, device, ...)."""
    # A Part's default: token_embed for a token method, embed otherwise.
    task = Part(method).task if task is None else _task_named(task)
    return Dispatcher(hidden_size, **{task: method}, **heads)


def _framework_of(tensor):
    """The module whose from_dlpack makes tensors like `tensor`: torch, cupy,
    jax.numpy, or numpy (for NumPy arrays and anything else: buffers, ...)."""
    module = type(tensor).__module__.split(".")[0]
    if module == "torch":
        import torch
        return torch
    if module == "cupy":
        import cupy
        return cupy
    if module in ("jax", "jaxlib"):
        import jax.numpy
        return jax.numpy
    import numpy
    return numpy


def _as_float32(bits, framework):
    """int32 bit patterns as the float32 values they hold: a view (JAX, which has none, a new array)."""
    if framework.__name__ == "jax.numpy":
        import jax
        return jax.lax.bitcast_convert_type(bits, framework.float32)
    return bits.view(framework.float32)


def _viewed(output):
    """`output` as a framework's tensor where it is one forward() made (a DLPack
    tensor with no methods of its own): NumPy's on the host, PyTorch's where NumPy
    holds no such dtype (bfloat16) and on a GPU."""
    if hasattr(output, "reshape"):
        return output
    if output.__dlpack_device__()[0] == 1:  # kDLCPU
        try:
            import numpy
            return numpy.from_dlpack(output)
        except (ImportError, RuntimeError):  # no NumPy, or "Unsupported dtype in DLTensor"
            pass
    import torch
    return torch.from_dlpack(output)


def split(output, plan):
    """Per request, in batch order: a view of its result in `output` (a tensor the
    step wrote, `plan` its Plan, or for a MultiPooler's part k `plan.parts[k]`: a vector, or a [rows, cols] matrix for token tasks and spans), or
    None for a request that does not finish this step. Sparse results (an int32
    [entries, 2] output) give a pair (ids, weights) of views a request: its list's
    entries after the count, ascending by id, ids -1 (weights 0) past the ids it
    lists — `ids[ids >= 0]` keeps those without reading the count."""
    output = _viewed(output)
    framework = _framework_of(output) if plan.sparse else None
    # The offsets count values (a sparse output's entries) from the start: an `out` of any shape
    # (contiguous, as forward() takes it) is read as the vector (the [entries, 2] pairs) it holds.
    output = output.reshape(-1, 2) if plan.sparse else output.reshape(-1)
    found = []
    for slice_, matrix in zip(plan.results, plan.matrices):
        if slice_ is None:
            found.append(None)
            continue
        offset, rows, cols = slice_
        if plan.sparse:
            entries = output[offset + 1:offset + cols]
            found.append((entries[:, 0], _as_float32(entries[:, 1], framework)))
            continue
        values = output[offset:offset + rows * cols]
        found.append(values.reshape(rows, cols) if matrix else values)
    return found


def pool(pooler, hidden, prompt_lens=None, **step):
    """Plans, reserves and runs one step, and returns split() of its output as
    tensors of `hidden`'s kind (numpy in, numpy out; torch in, torch out); for a
    MultiPooler, a list of them a part. A padded [B, S, H] `hidden` needs no
    prompt_lens (each request's is S unless given) and says its sequence length
    itself; `step` takes plan()'s other arguments (num_scheduled, num_computed,
    ids, tasks, token_ids, params, padding)."""
    # Refused before anything is planned or reserved: a tensor (NumPy's, torch's, ...) says its shape.
    if not hasattr(hidden, "shape"):
        raise ValueError(f"hidden states: must be a tensor with a shape, got {type(hidden).__name__}")
    shape = tuple(hidden.shape)
    if len(shape) == 3:
        step.setdefault("sequence_length", shape[1])
        if prompt_lens is None:
            prompt_lens = [shape[1]] * shape[0]
    if prompt_lens is None:
        raise ValueError("prompt_lens: give each request's prompt length (hidden holds the rows of all of them)")
    framework = _framework_of(hidden)
    several = isinstance(pooler, MultiPooler)
    result_dtypes = pooler.result_dtypes if several else [pooler.result_dtype]
    if framework.__name__ == "numpy" and "bfloat16" in result_dtypes:
        raise ValueError("result_dtype: numpy has no bfloat16; pool torch tensors, or ask for float32 or float16")
    plan = pooler.plan(prompt_lens, **step)
    pooler.reserve(plan)
    output = pooler.forward(hidden, plan)
    if several:
        return [split(framework.from_dlpack(part), part_plan) for part, part_plan in zip(output, plan.parts)]
    return split(framework.from_dlpack(output), plan)
