"""seqpool from Python on a GPU: torch.cuda tensors give the CPU's results, a step
keeps the sync contract, and a step captured in torch.cuda.graph replays for
changing batches. Skipped where the module has no CUDA engines or torch no GPU
(tests/gpu/run.sh runs them on the H200)."""
import numpy as np
import pytest

import seqpool

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (seqpool.has_cuda() and torch.cuda.is_available()),
                                reason="no CUDA module or no GPU")

SEQUENCE = ["cls", "last", "mean", "max", "weighted_mean", "mean_sqrt_len"]
TOKEN = ["all", "step"]


def both(hidden_size, **config):
    """The same dispatcher on the CPU and on the GPU's current stream."""
    stream = torch.cuda.current_stream().cuda_stream
    return (seqpool.Dispatcher(hidden_size, **config),
            seqpool.Dispatcher(hidden_size, device="cuda", stream=stream, **config))


@pytest.mark.parametrize("method", SEQUENCE + TOKEN)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_every_method_on_cuda_tensors_gives_the_cpus_results(method, dtype):
    rng = np.random.default_rng(4)
    hidden_size = 130
    task = "embed" if method in SEQUENCE else "token_embed"
    lengths = [1, 17, 300, 5, 64]
    values = torch.from_numpy(rng.normal(size=(sum(lengths), hidden_size)).astype(np.float32)).to(getattr(torch, dtype))
    token_ids = [torch.from_numpy(rng.integers(0, 4, size=n)) for n in lengths]
    params = seqpool.PoolingParams(step_tag_id=2) if method == "step" else None
    host, device = both(hidden_size, **{task: method}, result_dtype=dtype)
    wanted = seqpool.pool(host, values, lengths, token_ids=token_ids, params=params)
    found = seqpool.pool(device, values.cuda(), lengths, token_ids=token_ids, params=params)
    for f, w in zip(found, wanted):
        assert f.is_cuda
        tolerance = 2e-5 if dtype == "float32" else 1.6e-2
        torch.testing.assert_close(f.cpu().float(), w.float(), rtol=tolerance, atol=tolerance)


def test_a_cuda_step_keeps_the_sync_contract():
    _, device = both(64, embed="mean")
    hidden = torch.ones(40, 64, device="cuda")
    plan = device.plan([10, 30])
    device.reserve(plan)
    before = device.audit()
    out = device.forward(hidden, plan)
    step = {key: value - before[key] for key, value in device.audit().items()}
    assert step["uploads"] == 1 and step["downloads"] == 0 and step["waits"] == 0 and step["allocations"] == 0
    assert torch.from_dlpack(out).is_cuda


def test_a_step_captured_in_a_torch_cuda_graph_replays_for_changing_batches():
    rng = np.random.default_rng(8)
    hidden_size, capacity_rows = 96, 512
    stream = torch.cuda.Stream()
    config = {"embed": "mean", "token_embed": "all"}
    host = seqpool.Dispatcher(hidden_size, **config)
    device = seqpool.Dispatcher(hidden_size, device="cuda", stream=stream.cuda_stream, **config)
    device.reserve_capacity(requests=8, rows=capacity_rows, result_rows=capacity_rows)
    hidden = torch.zeros(capacity_rows, hidden_size, device="cuda")
    out = torch.zeros(device.output_capacity, device="cuda")
    home = device.reserve_graph()
    graph = torch.cuda.CUDAGraph()
    batches = [([30, 2, 100], ["embed", "token_embed", "embed"]), ([7], ["token_embed"]),
               ([200, 1, 1, 50, 9], ["embed", "embed", "token_embed", "token_embed", "embed"])]
    for step, (lengths, tasks) in enumerate(batches):
        values = torch.from_numpy(rng.normal(size=(sum(lengths), hidden_size)).astype(np.float32))
        plan = device.plan(lengths, ids=[f"{step}-{i}" for i in range(len(lengths))], tasks=tasks)
        device.reserve(plan)
        with torch.cuda.stream(stream):
            hidden[:sum(lengths)].copy_(values.cuda())
            if step == 0:
                with torch.cuda.graph(graph, stream=stream):
                    device.capture(hidden, plan, out, home)
            else:
                device.restage(plan, home)
            graph.replay()
            home.mark_launched()
        stream.synchronize()
        wanted = seqpool.pool(host, values.numpy(), lengths, tasks=tasks)
        for found, expected in zip(seqpool.split(out, plan), wanted):
            np.testing.assert_allclose(found.cpu().numpy(), expected, rtol=2e-5, atol=2e-5)


def test_a_captured_step_reads_a_padded_batch_only_as_its_plan_says():
    device = seqpool.Dispatcher(8, embed="mean", device="cuda")
    device.reserve_capacity(requests=4, rows=64, result_rows=4)
    plan = device.plan([3, 5], sequence_length=8)
    device.reserve(plan)
    out = torch.zeros(device.output_capacity, device="cuda")
    home = device.reserve_graph()
    # [4, 4, 8] holds as many rows as [2, 8, 8], but not its two sequences of 8: refused before capturing.
    with pytest.raises(ValueError, match="hidden"):
        device.capture(torch.zeros(4, 4, 8, device="cuda"), plan, out, home)


def test_sparse_results_on_cuda_tensors_give_the_cpus_lists():
    # Values on a grid of 1/8 and integer weights: every weight is exact on both, so the lists are equal.
    rng = np.random.default_rng(32)
    hidden_size, lengths = 64, [1, 40, 300, 7]
    values = torch.from_numpy((rng.integers(-8, 9, size=(sum(lengths), hidden_size)) / 8).astype(np.float32))
    token_ids = [torch.from_numpy(rng.integers(0, 50, size=n)) for n in lengths]
    weigh = seqpool.Dense(rng.integers(-4, 5, size=(1, hidden_size)).astype(np.float32), activation="relu")
    params = seqpool.PoolingParams(drop_token_ids=[0, 1], top_k=16)
    host, device = both(hidden_size, token_classify="all", classifier=weigh, problem="regression",
                        result_dtype="sparse")
    wanted = seqpool.pool(host, values, lengths, token_ids=token_ids, params=params)
    found = seqpool.pool(device, values.cuda(), lengths, token_ids=token_ids, params=params)
    for (ids, weights), (want_ids, want_weights) in zip(found, wanted):
        assert ids.is_cuda and weights.is_cuda
        assert ids.cpu().tolist() == want_ids.tolist()
        assert weights.cpu().tolist() == want_weights.tolist()


@pytest.mark.parametrize("dtype", ["int8", "uint8", "binary", "ubinary"])
def test_quantized_results_on_cuda_tensors_give_the_cpus_bytes(dtype):
    # Raw rows on a grid of 1/8: each level is one exact subtraction and one division, the same on both.
    rng = np.random.default_rng(29)
    hidden_size, lengths = 96, [1, 33, 260, 4]
    values = torch.from_numpy((rng.integers(-8, 9, size=(sum(lengths), hidden_size)) / 8).astype(np.float32))
    bounds = np.array([[-1] * hidden_size, [1] * hidden_size], np.float32)
    ranged = {"ranges": bounds} if dtype in ("int8", "uint8") else {}
    raw = seqpool.PoolingParams(use_activation=False)
    host, device = both(hidden_size, embed="max", token_embed="all", result_dtype=dtype, **ranged)
    tasks = ["embed", "token_embed", "embed", "token_embed"]
    wanted = seqpool.pool(host, values, lengths, tasks=tasks, params=raw)
    found = seqpool.pool(device, values.cuda(), lengths, tasks=tasks, params=raw)
    for f, w in zip(found, wanted):
        assert f.is_cuda
        assert f.cpu().tolist() == w.tolist()


def test_a_multi_pooler_on_cuda_gives_the_cpus_results_eager_and_replayed_in_a_graph():
    # Raw rows on a grid of 1/8 and integer sparse weights: every part's result is exact on both, so equal.
    rng = np.random.default_rng(9)
    hidden_size, capacity_rows = 64, 256
    stream = torch.cuda.Stream()
    weigh = seqpool.Dense(rng.integers(-4, 5, size=(1, hidden_size)).astype(np.float32), activation="relu")
    bounds = np.array([[-1] * hidden_size, [1] * hidden_size], np.float32)
    dtypes = [torch.float32, torch.float32, torch.bfloat16, torch.int32, torch.int8]

    def parts():
        return [seqpool.Part("cls"), seqpool.Part("all", drop_first=True), seqpool.Part("max", result_dtype="bfloat16"),
                seqpool.Part("all", task="token_classify", classifier=weigh, problem="regression",
                             result_dtype="sparse", drop_token_ids=[0, 1]),
                seqpool.Part("mean", result_dtype="int8", ranges=bounds)]

    def assert_equal(found, wanted):
        for out, expected, dtype in zip(found, wanted, dtypes):
            for f, w in zip(out, expected):
                for a, b in zip(f, w) if isinstance(f, tuple) else [(f, w)]:
                    assert a.is_cuda
                    assert torch.equal(a.cpu(), b), (a, b)

    host = seqpool.MultiPooler(hidden_size, parts())
    device = seqpool.MultiPooler(hidden_size, parts(), device="cuda", stream=stream.cuda_stream)
    device.reserve_capacity(requests=4, rows=capacity_rows, result_rows=capacity_rows)
    hidden = torch.zeros(capacity_rows, hidden_size, device="cuda")
    outs = [torch.zeros((n, 2) if dtype == torch.int32 else n, dtype=dtype, device="cuda")
            for n, dtype in zip(device.output_capacity, dtypes)]
    home = device.reserve_graph()
    graph = torch.cuda.CUDAGraph()
    raw = seqpool.PoolingParams(use_activation=False)
    for step, lengths in enumerate([[30, 2, 100], [7], [200, 1, 50]]):
        values = torch.from_numpy((rng.integers(-8, 9, size=(sum(lengths), hidden_size)) / 8).astype(np.float32))
        token_ids = [torch.from_numpy(rng.integers(0, 50, size=n)) for n in lengths]
        step_args = {"ids": [f"{step}-{i}" for i in range(len(lengths))], "token_ids": token_ids, "params": raw}
        wanted = seqpool.pool(host, values, lengths, **step_args)
        with torch.cuda.stream(stream):
            assert_equal(seqpool.pool(device, values.cuda(), lengths, **step_args), wanted)
            plan = device.plan(lengths, **step_args)
            device.reserve(plan)
            hidden[:sum(lengths)].copy_(values.cuda())
            if step == 0:
                with torch.cuda.graph(graph, stream=stream):
                    device.capture(hidden, plan, outs, home)
            else:
                device.restage(plan, home)
            graph.replay()
            home.mark_launched()
        stream.synchronize()
        assert_equal([seqpool.split(out, part) for out, part in zip(outs, plan.parts)], wanted)
