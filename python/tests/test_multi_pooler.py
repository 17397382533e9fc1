"""seqpool.MultiPooler from Python: every request pooled by every Part, each part's
results bit for bit those of a Dispatcher of the same pooler alone (with the part's
token filters as the requests' own), whole and chunked, on NumPy and torch tensors;
one plan and one upload a step; outputs given or handed out; refusals. (BGE-M3's three outputs from one
step, against FlagEmbedding's maths: test_seqpool.py.)"""
import gc

import numpy as np
import pytest

import seqpool

def catalogue(rng, hidden_size):
    """Parts of every result type, head and kind of filter: (method, task, heads, filters)."""
    projection = (rng.normal(size=(5, hidden_size)) / np.sqrt(hidden_size)).astype(np.float32)
    labels = (rng.normal(size=(3, hidden_size)) / np.sqrt(hidden_size)).astype(np.float32)
    weigh = seqpool.Dense(rng.normal(size=(1, hidden_size)).astype(np.float32), np.array([0.1], np.float32),
                          activation="relu")
    bounds = np.array([[-1] * hidden_size, [1] * hidden_size], np.float32)
    return [
        ("cls", "embed", {}, {}),
        ("cls+mean", "embed", {"result_dtype": "float16"}, {}),
        ("mean_sqrt_len", "classify", {"classifier": labels, "problem": "multi_label"}, {}),
        ("max", "embed", {"result_dtype": "int8", "ranges": bounds}, {}),
        ("last", "embed", {"result_dtype": "uint8", "ranges": bounds}, {}),
        ("weighted_mean", "embed", {"result_dtype": "binary"}, {}),
        ("all", "token_embed", {"projector": projection}, {"drop_first": True}),
        ("all", "token_embed", {"result_dtype": "ubinary"}, {"drop_last": True}),
        ("all", "token_classify", {"classifier": weigh, "problem": "regression", "result_dtype": "sparse"},
         {"drop_token_ids": [0, 1]}),
        ("all", "token_classify", {"classifier": labels, "result_dtype": "bfloat16"}, {"drop_first": True}),
    ]


CATALOGUE_SIZE = 10


def draw_parts(rng, hidden_size, first):
    """Two to four parts of the catalogue, entry `first` among them; the bfloat16 part (the last, whose results
    NumPy cannot hold) only where it is `first`."""
    entries = catalogue(rng, hidden_size)
    assert len(entries) == CATALOGUE_SIZE
    others = [e for e in range(len(entries) - 1) if e != first]
    chosen = [first, *rng.choice(others, size=int(rng.integers(1, 4)), replace=False)]
    rng.shuffle(chosen)
    return [entries[c] for c in chosen]


def alone(hidden_size, method, task, heads):
    return seqpool.Dispatcher(hidden_size, **{task: method}, **heads)


def part_of(method, task, heads, filters):
    return seqpool.Part(method, task=task, **heads, **filters)


def assert_identical(found, wanted):
    """Results bit for bit: arrays (NumPy or torch) of one dtype, shape and values, or sparse (ids, weights) pairs."""
    assert len(found) == len(wanted)
    for f, w in zip(found, wanted):
        assert (f is None) == (w is None)
        for a, b in (zip(f, w) if isinstance(f, tuple) else [(f, w)]) if f is not None else []:
            assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
            assert a.equal(b) if hasattr(a, "equal") else a.tobytes() == b.tobytes()


def steps_of(lengths, cuts):
    """The steps of a schedule: `cuts[i]` splits request i's prompt into chunks, each step one chunk of every
    request left (lengths, scheduled, computed, which requests)."""
    chunks = [np.diff([0, *sorted(set(c) - {0, n}), n]).tolist() for n, c in zip(lengths, cuts)]
    done = [0] * len(lengths)
    while any(chunks):
        requests = [i for i, c in enumerate(chunks) if c]
        scheduled = [chunks[i].pop(0) for i in requests]
        yield requests, scheduled, [done[i] for i in requests]
        for i, s in zip(requests, scheduled):
            done[i] += s


@pytest.mark.parametrize("seed", range(CATALOGUE_SIZE))  # each part of the catalogue in one draw at least
@pytest.mark.parametrize("chunked", [False, True])
def test_parts_equal_their_dispatchers_alone(seed, chunked):
    torch = pytest.importorskip("torch") if seed == CATALOGUE_SIZE - 1 else None  # numpy has no bfloat16
    rng = np.random.default_rng([seed, 23])
    hidden_size = int(rng.choice([3, 8]))
    parts = draw_parts(rng, hidden_size, seed)
    multi = seqpool.MultiPooler(hidden_size, [part_of(*p) for p in parts])
    dispatchers = [alone(hidden_size, method, task, heads) for method, task, heads, _ in parts]
    assert multi.tasks == [task for _, task, _, _ in parts]
    lengths = rng.integers(1, 12, size=int(rng.integers(1, 6))).tolist()
    prompts = [rng.integers(0, 6, size=n) for n in lengths]
    rows = [rng.normal(size=(n, hidden_size)).astype(np.float32) for n in lengths]
    if torch is not None:
        rows = [torch.from_numpy(r) for r in rows]
    cuts = [rng.integers(0, n + 1, size=2).tolist() if chunked else [] for n in lengths]
    for requests, scheduled, computed in steps_of(lengths, cuts):
        chunks = [rows[i][c:c + s] for i, s, c in zip(requests, scheduled, computed)]
        hidden = torch.cat(chunks) if torch is not None else np.concatenate(chunks)
        step = dict(prompt_lens=[lengths[i] for i in requests], num_scheduled=scheduled, num_computed=computed,
                    ids=requests, token_ids=[prompts[i] for i in requests])
        # The multi_pooler is given the ids as vLLM holds them, a padded row a request.
        id_rows = np.full((len(requests), max(lengths)), -1, np.int64)
        for row, i in enumerate(requests):
            id_rows[row, :lengths[i]] = prompts[i]
        found = seqpool.pool(multi, hidden, **{**step, "token_ids": id_rows})
        assert len(found) == len(parts)
        for (_, _, _, filters), dispatcher, results in zip(parts, dispatchers, found):
            params = seqpool.PoolingParams(**filters) if filters else None
            assert_identical(results, seqpool.pool(dispatcher, hidden, **step, params=params))


def test_a_step_keeps_the_sync_contract_and_uploads_once():
    multi = seqpool.MultiPooler(8, [seqpool.Part("mean"), seqpool.Part("all"), seqpool.Part("max")])
    hidden = np.ones((10, 8), np.float32)
    plan = multi.plan([4, 6])
    multi.reserve(plan)
    before = multi.audit()
    outputs = multi.forward(hidden, plan)  # held: freeing them is an allocation call, after the step
    after = multi.audit()
    del outputs
    step = {key: after[key] - before[key] for key in after}
    assert step["uploads"] == 1 and step["upload_bytes"] > 0
    assert step["downloads"] == 0 and step["waits"] == 0 and step["allocations"] == 0
    assert step["launches"] == 3


def test_outputs_given_or_handed_out_and_plans_that_run_once():
    hidden = np.arange(24, dtype=np.float32).reshape(6, 4)
    multi = seqpool.MultiPooler(4, [seqpool.Part("cls", result_dtype="float16"), seqpool.Part("all")])
    plan = multi.plan([2, 4])
    assert plan.num_rows == 6 and len(plan.parts) == 2
    for part, (method, dtype) in zip(plan.parts, [("cls", "float16"), ("all", "float32")]):
        own = seqpool.pooler(4, method, result_dtype=dtype).plan([2, 4])  # each part's layout is its pooler's alone
        assert (part.output_size, part.results, part.matrices, part.sparse) == (
            own.output_size, own.results, own.matrices, own.sparse)
    assert plan.parts[1].results == [(0, 2, 4), (8, 4, 4)]
    multi.reserve(plan)
    given = [np.zeros(plan.parts[0].output_size, np.float16), np.zeros(24, np.float32)]
    assert multi.forward(hidden, plan, out=given) is given
    with pytest.raises(ValueError, match="it ran already"):
        multi.forward(hidden, plan, out=given)
    plan = multi.plan([2, 4])
    multi.reserve(plan)
    handed = multi.forward(hidden, plan)
    for h, g, part in zip(handed, given, plan.parts):
        assert_identical(seqpool.split(np.from_dlpack(h), part), seqpool.split(g, part))
    with pytest.raises(ValueError, match="its outputs were handed out then"):
        multi.forward(hidden, plan)
    unreserved = multi.plan([6])
    with pytest.raises(ValueError, match="call reserve"):
        multi.forward(hidden, unreserved)
    # An `out` whose iteration never ends is read one tensor past the parts, and refused.
    class Endless(list):
        def __iter__(self):
            while True:
                yield np.zeros(24, np.float32)

    endless = multi.plan([2, 4])
    multi.reserve(endless)
    with pytest.raises(ValueError, match="out: one tensor a part: got 3 for 2 parts"):
        multi.forward(hidden, endless, out=Endless())
    kept = plan.parts[1]
    del multi, plan  # the outputs keep the memory they live in
    gc.collect()
    assert_identical(seqpool.split(np.from_dlpack(handed[1]), kept), seqpool.split(given[1], kept))


def test_padded_batches_and_spans_reach_the_parts_they_apply_to():
    rng = np.random.default_rng(5)
    hidden = rng.normal(size=(2, 5, 4)).astype(np.float32)
    parts = [("mean", "embed", {}, {}), ("all", "token_embed", {}, {"drop_last": True})]
    multi = seqpool.MultiPooler(4, [part_of(*p) for p in parts])
    spans = seqpool.PoolingParams(spans=[(0, 2), (2, 4)])
    found = seqpool.pool(multi, hidden, [5, 3], params=[spans, None])
    assert found[0][0].shape == (2, 4) and found[0][1].shape == (4,)
    for (method, task, heads, filters), results in zip(parts, found):
        params = [spans, None] if task == "embed" else seqpool.PoolingParams(**filters)
        assert_identical(results, seqpool.pool(alone(4, method, task, heads), hidden, [5, 3], params=params))


def test_multi_pooler_on_torch_tensors():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    values = torch.from_numpy(rng.normal(size=(9, 16)).astype(np.float32)).to(torch.bfloat16)
    multi = seqpool.MultiPooler(16, [seqpool.Part("last", result_dtype="bfloat16"), seqpool.Part("max")])
    found = seqpool.pool(multi, values, [4, 5])
    assert found[0][0].dtype == torch.bfloat16 and found[1][0].dtype == torch.float32
    for (method, dtype), results in zip([("last", "bfloat16"), ("max", "float32")], found):
        wanted = seqpool.pool(seqpool.pooler(16, method, result_dtype=dtype), values, [4, 5])
        for f, w in zip(results, wanted):
            assert torch.equal(f, w)


def refuses(message, call, *args, **kwargs):
    with pytest.raises(ValueError) as raised:
        call(*args, **kwargs)
    assert message in str(raised.value), str(raised.value)


def test_refusals_raise_value_error_with_seqpools_message():
    refuses("parts: a multi_pooler needs at least one part", seqpool.MultiPooler, 4, [])
    refuses('parts[1]: embed: method "all" cannot serve it', seqpool.MultiPooler, 4,
            [seqpool.Part("cls"), seqpool.Part("all", task="embed")])
    refuses('task: expected "embed"', seqpool.Part, "cls", task="pool")
    refuses('task: expected "embed", "classify", "token_embed" or "token_classify", got "embed\\u0000junk"',
            seqpool.Part, "cls", task="embed\x00junk")
    refuses("weight_floor: only sparse results take a weight floor", seqpool.Part, "cls", weight_floor=0.5)
    refuses("ranges: int8 results need calibration ranges", seqpool.Part, "cls", result_dtype="int8")
    refuses("part_filters: part 0 pools a sequence method; only token parts drop rows", seqpool.MultiPooler, 4,
            [seqpool.Part("cls", drop_first=True)])
    refuses('result_dtype: expected "float32"', seqpool.Part, "cls", result_dtype="float64")
    refuses("logit_mean: and logit_sigma are given together", seqpool.Part, "cls", task="classify", logit_mean=1.0)
    refuses('device: expected "cpu" or "cuda"', seqpool.MultiPooler, 4, [seqpool.Part("cls")], device="tpu")
    multi = seqpool.MultiPooler(4, [seqpool.Part("cls"), seqpool.Part("all", result_dtype="float16")])
    hidden = np.ones((3, 4), np.float32)
    plan = multi.plan([3])
    multi.reserve(plan)
    refuses("out: one tensor a part: got 1 for 2 parts", multi.forward, hidden, plan, out=[np.zeros(4, np.float32)])
    refuses("float16", multi.forward, hidden, plan, out=[np.zeros(4, np.float32), np.zeros(12, np.float32)])
    refuses("out: must be a sequence of tensors, one a part", multi.forward, hidden, plan, out=np.zeros(4, np.float32))
    read_only = np.zeros(4, np.float32)
    read_only.flags.writeable = False
    refuses("out: entry 0 is not a writable tensor", multi.forward, hidden, plan,
            out=[read_only, np.zeros(12, np.float16)])
    refuses("output of part 0: holds 2 values but the step writes 4", multi.forward, hidden, plan,
            out=[np.zeros(2, np.float32), np.zeros(12, np.float16)])
    refuses("hidden_states: width 5 differs from hidden_size 4", multi.forward, np.ones((3, 5), np.float32), plan)
    refuses("hidden: a [B, S, H] tensor is a padded batch's", multi.forward, np.ones((1, 3, 4), np.float32), plan)
    both = np.zeros(16, np.float32)
    refuses("output of part 1: overlaps the output of part 0", multi.forward, hidden, plan,
            out=[both[:4], both[2:].view(np.float16)])
    refuses("output of part 0: overlaps the hidden states", multi.forward, hidden, plan,
            out=[hidden.reshape(-1)[:4], np.zeros(12, np.float16)])
    padded = multi.plan([2, 3], sequence_length=3)
    multi.reserve(padded)
    refuses("hidden: is [3, 2, 4], but the plan's padded batch is 2 sequences of 3 rows", multi.forward,
            np.ones((3, 2, 4), np.float32), padded)
    other = seqpool.MultiPooler(4, [seqpool.Part("max")])
    foreign = other.plan([3])
    refuses("plan: was made by another pooler", multi.reserve, foreign)
    other.reserve(foreign)
    refuses("plan: was made by another pooler", multi.forward, hidden, foreign)
    mean, cls = seqpool.pooler(4, "mean"), seqpool.pooler(4, "cls")
    foreign = mean.plan([3])
    refuses("plan: was made by another pooler", cls.reserve, foreign)  # a Dispatcher's plan, too
    refuses("top_k", seqpool.pool, multi, hidden, [3], params=seqpool.PoolingParams(top_k=2))  # reaches no part
    refuses("capture", multi.reserve_graph)
    # A refused step leaves the pooler as it was.
    (row,), (matrix,) = seqpool.pool(multi, hidden, [3])
    assert row.shape == (4,) and matrix.shape == (3, 4)


def test_parts_and_poolers_read_back_what_they_were_made_with():
    sequence, token = seqpool.Part("cls+mean"), seqpool.Part("all", drop_last=True, result_dtype="binary")
    assert (sequence.method, sequence.task, sequence.result_dtype) == ("cls+mean", "embed", "float32")
    assert (token.method, token.task, token.result_dtype) == ("all", "token_embed", "binary")
    assert repr(token) == 'Part("all", task="token_embed", result_dtype="binary")'
    labels = seqpool.Part("step", task="token_classify")
    assert labels.task == "token_classify"
    multi = seqpool.MultiPooler(6, [sequence, token, labels])
    assert multi.hidden_size == 6 and multi.device == "cpu"
    assert multi.tasks == ["embed", "token_embed", "token_classify"]
    assert multi.result_dtypes == ["float32", "binary", "float32"]
