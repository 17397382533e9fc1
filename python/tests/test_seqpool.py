"""seqpool from Python, against the numpy reference of tests/cli/batches.py (written
from docs/SPEC.md): every method and head, torch tensors, 16-bit inputs and results,
padded batches, chunked requests, mixed tasks, sparse results, refusals, and a leak check."""
import gc
import itertools
import os
import pathlib
import sys
import threading
import time
import tracemalloc
import weakref

import numpy as np
import pytest

import seqpool

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests" / "cli"))
from batches import CASE_29, CASE_29_RANGES, CASE_29_ROWS, Batch, expected, request, stored  # noqa: E402

SEQUENCE = ["cls", "last", "mean", "max", "weighted_mean", "mean_sqrt_len"]
TOKEN = ["all", "step"]
TASKS = ["embed", "classify", "token_embed", "token_classify"]


def close(found, wanted, dtype="float32"):
    tolerance = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}[dtype]
    np.testing.assert_allclose(np.asarray(found, np.float64), np.asarray(wanted, np.float64),
                               rtol=tolerance, atol=tolerance)


def draw_heads(rng, hidden_size, task):
    """Keywords for the Dispatcher and the reference's head config, for `task`."""
    kwargs, config = {}, {}
    if task in ("embed", "token_embed") and rng.random() < 0.5:
        out = int(rng.integers(1, hidden_size + 4))
        weight = (rng.normal(size=(out, hidden_size)) / np.sqrt(hidden_size)).astype(np.float32)
        bias = rng.normal(size=out).astype(np.float32) if rng.random() < 0.5 else None
        kwargs.update(projector=weight, projector_bias=bias)
        config["projector"] = (weight, bias)
    if task in ("classify", "token_classify"):
        problem = str(rng.choice(["single_label", "multi_label", "regression"]))
        kwargs["problem"] = problem
        config["problem_type"] = problem
        if rng.random() < 0.5:
            labels = int(rng.choice([1, 2, 5]))
            weight = (rng.normal(size=(labels, hidden_size)) / np.sqrt(hidden_size)).astype(np.float32)
            bias = rng.normal(size=labels).astype(np.float32) if rng.random() < 0.5 else None
            kwargs.update(classifier=weight, classifier_bias=bias)
            config["classifier"] = (weight, bias)
        if rng.random() < 0.5:
            mean, sigma = float(rng.normal()), float(rng.choice([0.5, -2.0]))
            kwargs.update(logit_mean=mean, logit_sigma=sigma)
            config["platt"] = (mean, sigma)
    return kwargs, config


def draw_knobs(rng, method, task, hidden_size, config):
    """A request's knobs, as the reference's dict (seqpool.PoolingParams(**knobs) gives them)."""
    knobs = {"use_activation": bool(rng.random() < 0.8)}
    has_layer = "projector" in config or "classifier" in config
    if method == "step":
        if rng.random() < 0.7:
            knobs["step_tag_id"] = 3
        if rng.random() < 0.5 and not has_layer:  # a layer must match the columns returned
            knobs["returned_token_ids"] = sorted(rng.choice(hidden_size, size=min(hidden_size, 2),
                                                            replace=False).tolist())
    if task.endswith("embed") and "returned_token_ids" not in knobs and rng.random() < 0.3:
        width = config["projector"][0].shape[0] if "projector" in config else hidden_size
        knobs["dimensions"] = int(rng.integers(1, width + 1))
    return knobs


@pytest.mark.parametrize("method", SEQUENCE + TOKEN)
@pytest.mark.parametrize("head", ["embed", "classify"])
@pytest.mark.parametrize("seed", range(3))
def test_every_method_and_head_on_numpy(method, head, seed):
    rng = np.random.default_rng([seed, SEQUENCE.index(method) if method in SEQUENCE else 10 + TOKEN.index(method)])
    task = head if method in SEQUENCE else "token_" + head
    hidden_size = int(rng.choice([1, 3, 16, 130]))
    kwargs, config = draw_heads(rng, hidden_size, task)
    dispatcher = seqpool.Dispatcher(hidden_size, **{task: method}, **kwargs)
    lengths = rng.integers(1, 40, size=int(rng.integers(1, 9)))
    hidden = rng.normal(size=(int(lengths.sum()), hidden_size)).astype(np.float32)
    token_ids = [rng.integers(0, 5, size=n).astype(rng.choice([np.int32, np.int64])) for n in lengths]
    knobs = [draw_knobs(rng, method, task, hidden_size, config) for _ in lengths]
    params = [seqpool.PoolingParams(**k) for k in knobs]
    results = seqpool.pool(dispatcher, hidden, lengths, token_ids=token_ids, params=params)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for i, n in enumerate(lengths):
        prompt = hidden[starts[i]:starts[i] + n]
        wanted = expected(method, task, prompt, knobs[i], token_ids[i], **config)
        assert results[i].shape == np.shape(wanted)
        close(results[i], wanted)


def test_results_are_bit_for_bit_the_cpp_api():
    """seqpool-run (the C++ API behind a file format) and the module give the same bits."""
    tool = os.environ.get("SEQPOOL_RUN")
    if not tool or not pathlib.Path(tool).exists():
        pytest.skip("SEQPOOL_RUN names no seqpool-run (meson test sets it)")
    rng = np.random.default_rng(7)
    hidden_size = 33
    lengths = [5, 17, 1, 64]
    hidden = rng.normal(size=(sum(lengths), hidden_size)).astype(np.float32)
    projector = (rng.normal(size=(20, hidden_size)).astype(np.float32), rng.normal(size=20).astype(np.float32))
    batch = Batch(hidden_size, {"embed": "mean"}, projector=projector)
    batch.step(hidden, [request(f"r{i}", "embed", n) for i, n in enumerate(lengths)])
    batch.run()
    dispatcher = seqpool.Dispatcher(hidden_size, embed="mean", projector=projector[0], projector_bias=projector[1])
    results = seqpool.pool(dispatcher, hidden, lengths)
    for i in range(len(lengths)):
        assert np.array_equal(results[i].view(np.uint32), batch.result(f"r{i}").view(np.uint32))


def need_torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("hidden_dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("result_dtype", ["float32", "float16", "bfloat16"])
def test_torch_tensors_and_16_bit(hidden_dtype, result_dtype):
    torch = need_torch()
    rng = np.random.default_rng(11)
    hidden_size = 24
    lengths = [3, 9, 1, 30]
    values = stored(rng.normal(size=(sum(lengths), hidden_size)), hidden_dtype)
    hidden = torch.from_numpy(values).to(getattr(torch, hidden_dtype))
    dispatcher = seqpool.Dispatcher(hidden_size, embed="max", token_embed="all", result_dtype=result_dtype)
    tasks = ["embed", "token_embed", "embed", "token_embed"]
    results = seqpool.pool(dispatcher, hidden, lengths, tasks=tasks)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for i, n in enumerate(lengths):
        assert results[i].dtype == getattr(torch, result_dtype)
        method = "max" if tasks[i] == "embed" else "all"
        wanted = expected(method, tasks[i], values[starts[i]:starts[i] + n], {})
        # A 16-bit result is the float result rounded once, as it is stored.
        close(results[i].float().numpy(), stored(wanted, result_dtype), result_dtype)


@pytest.mark.parametrize("padding", ["right", "left"])
def test_padded_batches(padding):
    rng = np.random.default_rng(3)
    hidden_size, length = 8, 12
    lengths = [12, 5, 1]
    padded = rng.normal(size=(3, length, hidden_size)).astype(np.float32)
    dispatcher = seqpool.pooler(hidden_size, "mean")
    results = seqpool.pool(dispatcher, padded, lengths, padding=padding)
    for i, n in enumerate(lengths):
        rows = padded[i, :n] if padding == "right" else padded[i, length - n:]
        close(results[i], expected("mean", "embed", rows, {}))


@pytest.mark.parametrize("method", SEQUENCE + TOKEN + ["cls+max+mean"])
def test_chunked_requests_equal_whole_ones(method):
    rng = np.random.default_rng(5)
    hidden_size = 16
    task = "token_embed" if method in TOKEN else "embed"
    prompts = [rng.normal(size=(n, hidden_size)).astype(np.float32) for n in (20, 7, 33)]
    token_ids = [rng.integers(0, 5, size=len(p)).astype(np.int64) for p in prompts]
    params = seqpool.PoolingParams(step_tag_id=3) if method == "step" else None
    whole = seqpool.Dispatcher(hidden_size, **{task: method})
    wanted = seqpool.pool(whole, np.concatenate(prompts), [len(p) for p in prompts], ids=["a", "b", "c"],
                          token_ids=token_ids, params=params)
    chunked = seqpool.Dispatcher(hidden_size, **{task: method})
    done = [0, 0, 0]
    found = [None, None, None]
    for chunk in (6, 9, 40):
        live = [i for i in range(3) if done[i] < len(prompts[i])]
        scheduled = [min(chunk, len(prompts[i]) - done[i]) for i in live]
        hidden = np.concatenate([prompts[i][done[i]:done[i] + s] for i, s in zip(live, scheduled)])
        results = seqpool.pool(chunked, hidden, [len(prompts[i]) for i in live], num_scheduled=scheduled,
                               num_computed=np.array([done[i] for i in live]), ids=[["a", "b", "c"][i] for i in live],
                               token_ids=[token_ids[i] for i in live], params=params)
        for i, s, result in zip(live, scheduled, results):
            done[i] += s
            assert (result is None) == (done[i] < len(prompts[i]))
            if result is not None:
                found[i] = result
        for i in live:
            assert chunked.num_computed(["a", "b", "c"][i]) == (done[i] if done[i] < len(prompts[i]) else 0)
    for f, w in zip(found, wanted):
        close(f, w)


def test_a_dispatcher_with_mixed_tasks_and_integer_ids():
    rng = np.random.default_rng(9)
    hidden_size = 10
    classifier = rng.normal(size=(3, hidden_size)).astype(np.float32)
    dispatcher = seqpool.Dispatcher(hidden_size, embed="cls", classify="mean", token_embed="all",
                                    token_classify="step", classifier=classifier)
    lengths = np.array([4, 6, 2, 5, 3], dtype=np.int32)
    tasks = ["classify", "embed", "token_classify", "embed", "token_embed"]
    methods = {"embed": "cls", "classify": "mean", "token_embed": "all", "token_classify": "step"}
    hidden = rng.normal(size=(int(lengths.sum()), hidden_size)).astype(np.float32)
    token_ids = [None, None, np.zeros(2, np.int32), None, None]  # STEP reads the ids of its prompts
    plan = dispatcher.plan(lengths, ids=np.arange(100, 105), tasks=tasks, token_ids=token_ids)
    assert plan.num_rows == lengths.sum()
    dispatcher.reserve(plan)
    out = np.from_dlpack(dispatcher.forward(hidden, plan))
    assert out.shape == (plan.output_size,)
    results = seqpool.split(out, plan)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for i, n in enumerate(lengths):
        config = {"classifier": (classifier, None)} if tasks[i].endswith("classify") else {}
        close(results[i], expected(methods[tasks[i]], tasks[i], hidden[starts[i]:starts[i] + n], {}, **config))
    # into a caller's tensor
    plan = dispatcher.plan(lengths, ids=[1, 2, 3, 4, 5], tasks=tasks, token_ids=token_ids)
    dispatcher.reserve(plan)
    given = np.zeros(plan.output_size, np.float32)
    assert dispatcher.forward(hidden, plan, out=given) is given
    for a, b in zip(seqpool.split(given, plan), results):
        assert np.array_equal(a, b)


def test_heads_of_several_dense_layers():
    """A head's layers as a list of seqpool.Dense, each output through its layer's activation
    function: a Dense expansion and projection back (GELU between), BERT's pooler (dense, tanh)
    before a classifier, one layer with an activation; each task against the reference."""
    rng = np.random.default_rng(13)
    hidden_size = 12
    lengths = [4, 1, 9, 3]

    def weight(out, inputs):
        return (rng.normal(size=(out, inputs)) / np.sqrt(inputs)).astype(np.float32)

    up, up_bias, down = weight(20, hidden_size), rng.normal(size=20).astype(np.float32), weight(6, 20)
    pooler, pooler_bias, labels = weight(hidden_size, hidden_size), rng.normal(size=hidden_size).astype(np.float32), \
        weight(3, hidden_size)
    projector = [(up, up_bias, "gelu"), (down, None, "identity")]
    classifier = [(pooler, pooler_bias, "tanh"), (labels, None)]
    dispatcher = seqpool.Dispatcher(hidden_size, embed="mean", classify="cls", token_embed="all",
                                    token_classify="all",
                                    projector=[seqpool.Dense(up, up_bias, activation="gelu"), seqpool.Dense(down)],
                                    classifier=[seqpool.Dense(pooler, pooler_bias, activation="tanh"),
                                                seqpool.Dense(labels)])
    tasks = ["embed", "classify", "token_embed", "token_classify"]
    methods = {"embed": "mean", "classify": "cls", "token_embed": "all", "token_classify": "all"}
    hidden = rng.normal(size=(sum(lengths), hidden_size)).astype(np.float32)
    results = seqpool.pool(dispatcher, hidden, lengths, tasks=tasks)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for i, n in enumerate(lengths):
        close(results[i], expected(methods[tasks[i]], tasks[i], hidden[starts[i]:starts[i] + n], {},
                                   projector=projector, classifier=classifier))
    # One layer with an activation function, given as a Dense.
    relu = seqpool.Dense(down @ up, activation="relu")
    assert (relu.in_features, relu.out_features, relu.activation) == (hidden_size, 6, "relu")
    assert repr(relu) == 'Dense(12 -> 6, activation="relu")'
    results = seqpool.pool(seqpool.pooler(hidden_size, "max", projector=relu), hidden, lengths)
    for i, n in enumerate(lengths):
        close(results[i], expected("max", "embed", hidden[starts[i]:starts[i] + n], {},
                                   projector=[(down @ up, None, "relu")]))


def test_the_sync_contract_holds_and_the_audit_is_readable():
    dispatcher = seqpool.pooler(8, "mean")
    hidden = np.ones((10, 8), np.float32)
    plan = dispatcher.plan([4, 6])
    dispatcher.reserve(plan)
    before = dispatcher.audit()
    out = dispatcher.forward(hidden, plan)  # held: freeing it is an allocation call, after the step
    after = dispatcher.audit()
    del out
    step = {key: after[key] - before[key] for key in after}
    assert step["uploads"] == 1 and step["upload_bytes"] > 0
    assert step["downloads"] == 0 and step["waits"] == 0 and step["allocations"] == 0


def test_an_int_id_is_the_id_of_its_decimal_text():
    rng = np.random.default_rng(11)
    prompt = rng.normal(size=(7, 4)).astype(np.float32)
    whole = seqpool.pool(seqpool.Dispatcher(4, embed="mean"), prompt, [7])[0]
    chunked = seqpool.Dispatcher(4, embed="mean")
    for first, then in ((7, "7"), ("18446744073709551614", 2**64 - 2), (2**64 - 1, "18446744073709551615"),
                        (-3, "-3")):
        assert seqpool.pool(chunked, prompt[:3], [7], num_scheduled=[3], ids=[first]) == [None]
        assert chunked.num_computed(then) == 3 and chunked.num_computed(first) == 3
        assert chunked.num_computed("0" + str(then)) == 0  # another id
        found = seqpool.pool(chunked, prompt[3:], [7], num_scheduled=[4], num_computed=[3], ids=[then])[0]
        close(found, whole)
        assert chunked.num_computed(first) == 0
    chunked.plan([7], num_scheduled=[3], ids=[5])
    refuses('request 1 (id "5"): id: appears twice in one step (first as request 0)', chunked.plan, [2, 2],
            ids=[5, "5"])
    refuses("ids: a request id is a str or an int in [-2^63, 2^64), got 18446744073709551616", chunked.plan, [2],
            ids=[2**64])
    refuses("ids: a request id is a str or an int in [-2^63, 2^64), got -9223372036854775809", chunked.plan, [2],
            ids=[-2**63 - 1])
    refuses("ids: a request id is a str or an int in [-2^63, 2^64), got True", chunked.plan, [2], ids=[True])
    # NumPy's integers and int tensors are ints: one id each with its decimal text.
    refuses('request 1 (id "-4"): id: appears twice in one step (first as request 0)', chunked.plan, [2, 2],
            ids=[np.int32(-4), "-4"])
    refuses('request 1 (id "9"): id: appears twice in one step (first as request 0)', chunked.plan, [2, 2],
            ids=np.array([9, 9], np.int32))
    assert chunked.plan([2, 2], ids=np.array([-1, 2**40], np.int64)).results == [(0, 1, 4), (4, 1, 4)]


def refuses(message, call, *args, **kwargs):
    with pytest.raises(ValueError) as raised:
        call(*args, **kwargs)
    assert message in str(raised.value), str(raised.value)


def test_refusals_raise_value_error_with_seqpools_message():
    refuses('method "all" cannot serve it', seqpool.Dispatcher, 4, embed="all")
    refuses("result_dtype", seqpool.Dispatcher, 4, embed="mean", result_dtype="float64")
    refuses("device", seqpool.Dispatcher, 4, embed="mean", device="tpu")
    refuses("logit_mean", seqpool.Dispatcher, 4, classify="cls", logit_mean=1.0)
    refuses("projector_bias", seqpool.Dispatcher, 4, embed="cls", projector_bias=np.ones(2, np.float32))
    if not seqpool.has_cuda():
        refuses("no CUDA module", seqpool.Dispatcher, 4, embed="mean", device="cuda")
    dispatcher = seqpool.pooler(4, "mean")
    refuses("prompt_len: must be at least 1, got 0", dispatcher.plan, [2, 0])
    refuses("num_scheduled", dispatcher.plan, [2, 3], [1])
    refuses("tasks", dispatcher.plan, [2], tasks=["sort"])
    refuses("task: classify has no pooler", dispatcher.plan, [2], tasks="classify")
    refuses("padding", dispatcher.plan, [2], padding="middle")
    refuses("projector: must have shape [out, in], got [4]", seqpool.Dispatcher, 4, embed="cls", projector=np.ones(4, np.float32))
    refuses("projector: must hold float32", seqpool.Dispatcher, 4, embed="cls", projector=np.ones((2, 4)))
    refuses("projector_bias: must have shape [2]", seqpool.Dispatcher, 4, embed="cls",
            projector=np.ones((2, 4), np.float32), projector_bias=np.ones(3, np.float32))
    ones = np.ones((2, 4), np.float32)
    refuses('activation: expected "identity", "tanh", "gelu" or "relu", got "softmax"', seqpool.Dense, ones,
            activation="softmax")
    refuses("weight: must have shape [out, in], got [4]", seqpool.Dense, np.ones(4, np.float32))
    refuses("bias: must have shape [2]", seqpool.Dense, ones, np.ones(3, np.float32))
    refuses("projector_bias: goes with one weight", seqpool.Dispatcher, 4, embed="cls",
            projector=[seqpool.Dense(ones)], projector_bias=np.ones(2, np.float32))
    refuses("projector_bias: goes with one weight", seqpool.Dispatcher, 4, embed="cls",
            projector=seqpool.Dense(ones), projector_bias=np.ones(2, np.float32))
    refuses("classifier: a list of 1 to 4 Dense layers, got 0", seqpool.Dispatcher, 4, classify="cls", classifier=[])
    refuses("classifier: a list of 1 to 4 Dense layers, got 5", seqpool.Dispatcher, 4, classify="cls",
            classifier=[seqpool.Dense(np.ones((4, 4), np.float32))] * 5)
    refuses("projector: layer 1 takes 3 inputs but layer 0 gives 2", seqpool.Dispatcher, 4, embed="cls",
            projector=[seqpool.Dense(ones), seqpool.Dense(np.ones((2, 3), np.float32))])
    refuses("ids", dispatcher.plan, [2], ids=[1.5])
    refuses("params", dispatcher.plan, [2], params=["mean"])
    refuses("prompt_lens", dispatcher.plan, np.array([[2]]))
    refuses("prompt_lens", dispatcher.plan, np.array([2.0]))
    plan = dispatcher.plan([2, 3])
    refuses("reserve", dispatcher.forward, np.ones((5, 4), np.float32), plan)
    dispatcher.reserve(plan)
    refuses("hidden", dispatcher.forward, np.ones((5, 3), np.float32), plan)
    refuses("hidden", dispatcher.forward, np.ones((5, 4), np.float64), plan)
    refuses("output", dispatcher.forward, np.ones((5, 4), np.float32), plan, out=np.ones(3, np.float32))
    given = np.zeros(plan.output_size, np.float32)
    dispatcher.forward(np.ones((5, 4), np.float32), plan, out=given)
    refuses("a plan runs once", dispatcher.forward, np.ones((5, 4), np.float32), plan, out=given)
    handed = dispatcher.plan([2, 3])
    dispatcher.reserve(handed)
    out = dispatcher.forward(np.ones((5, 4), np.float32), handed)
    refuses("a plan runs once", dispatcher.forward, np.ones((5, 4), np.float32), handed)
    del out
    refuses("capture", dispatcher.reserve_graph)
    assert issubclass(seqpool.DeviceError, RuntimeError)
    # A message quotes an id escaped: a NUL would end it where Python reads it as a C string.
    refuses('request 1 (id "a\\u0000b"): id: appears twice in one step', dispatcher.plan, [1, 1], ids=["a\0b"] * 2)
    # pool() reads a shape only where the hidden states have one: a list is refused as forward() refuses it.
    refuses("hidden states: must be a tensor", seqpool.pool, dispatcher, [[0.0] * 4] * 2, [2])


def test_arguments_of_the_wrong_kind_raise_value_error_too():
    """What nanobind cannot read as the argument's type is seqpool's refusal as well: a
    ValueError naming the field, not nanobind's TypeError listing the signatures."""
    dispatcher = seqpool.pooler(4, "mean")
    big_endian = np.ones((5, 4), ">f4")  # NumPy refuses to export it, and no DLPack dtype holds its buffer
    plan = dispatcher.plan([2, 3])
    dispatcher.reserve(plan)
    refuses("hidden states: its producer refused to export it (__dlpack__ raised BufferError: DLPack only supports "
            "native byte order.)", dispatcher.forward, big_endian, plan)
    refuses("hidden states: must be a tensor", dispatcher.forward, [[1.0] * 4] * 5, plan)
    refuses("plan: must be a plan this pooler's plan() made, got int", dispatcher.forward, np.ones((5, 4), np.float32), 7)
    refuses("plan: must be a plan this pooler's plan() made", dispatcher.reserve, None)
    refuses("projector: its producer refused to export it", seqpool.Dispatcher, 4, embed="cls",
            projector=np.ones((2, 4), ">f4"))
    refuses("projector_bias: must be a tensor", seqpool.Dispatcher, 4, embed="cls",
            projector=np.ones((2, 4), np.float32), projector_bias="zeros")
    refuses("ranges: must be a tensor", seqpool.Dispatcher, 4, embed="mean", result_dtype="int8", ranges=[[0.0] * 4])
    refuses("weight: its producer refused to export it", seqpool.Dense, np.ones((2, 4), ">f4"))
    refuses("bias: must be a tensor", seqpool.Dense, np.ones((2, 4), np.float32), 3)
    refuses("projector: its producer refused to export it", seqpool.Part, "cls", projector=np.ones((2, 4), ">f4"))
    # A Python float becomes a C++ float: one past float's range, or not a number, is refused
    # (seqpool-run refuses the same values), not taken as inf or NaN.
    for field, value in (("logit_mean", 1e39), ("logit_mean", float("nan")), ("logit_sigma", float("inf")),
                         ("logit_sigma", -1e39)):
        platt = {"logit_mean": 0.0, "logit_sigma": 1.0, field: value}
        refuses(f"{field}: must be a finite number within float's range", seqpool.Dispatcher, 4, classify="cls",
                **platt)
        refuses(f"{field}: must be a finite number within float's range", seqpool.Part, "cls", task="classify",
                **platt)
    refuses("weight_floor: must be a finite number within float's range", seqpool.Dispatcher, 4,
            token_embed="all", result_dtype="sparse", projector=np.ones((1, 4), np.float32), weight_floor=1e39)
    refuses("logit_sigma: must not be 0", seqpool.Dispatcher, 4, classify="cls", logit_mean=0.0, logit_sigma=0.0)
    refuses("logit_sigma: must not be 0 as a float, got 1e-50", seqpool.Dispatcher, 4, classify="cls",
            logit_mean=0.0, logit_sigma=1e-50)  # 0 as the float the head scales by
    scaled = seqpool.Dispatcher(4, classify="cls", logit_mean=2.0**120, logit_sigma=-(2.0**-126))  # in range
    assert scaled.result_dtype == "float32"


def test_a_refused_weight_is_asked_for_as_often_as_refused_hidden_states():
    """A layer's weight whose producer refuses to export it, and which nanobind cannot import another way (a
    big-endian array's buffer) either, is asked for as often as hidden states are: no import is tried twice."""
    class Counted(np.ndarray):
        calls = 0

        def __dlpack__(self, *args, **kwargs):
            Counted.calls += 1
            return super().__dlpack__(*args, **kwargs)

    def asked(call):
        Counted.calls = 0
        with pytest.raises(ValueError, match="its producer refused to export it"):
            call()
        return Counted.calls

    dispatcher = seqpool.pooler(4, "mean")
    plan = dispatcher.plan([2, 3])
    dispatcher.reserve(plan)
    hidden = asked(lambda: dispatcher.forward(np.ones((5, 4), ">f4").view(Counted), plan))
    assert hidden >= 1
    assert asked(lambda: seqpool.Dense(np.ones((2, 4), ">f4").view(Counted))) == hidden
    assert asked(lambda: seqpool.Dispatcher(4, embed="cls", projector=np.ones((2, 4), ">f4").view(Counted))) == hidden


def test_a_plan_of_the_other_kind_is_another_poolers():
    dispatcher = seqpool.pooler(4, "mean")
    multi = seqpool.MultiPooler(4, [seqpool.Part("mean"), seqpool.Part("cls")])
    plan, parts_plan = dispatcher.plan([2]), multi.plan([2])
    dispatcher.reserve(plan)
    multi.reserve(parts_plan)
    hidden = np.ones((2, 4), np.float32)
    for call, args in ((multi.reserve, (plan,)), (multi.forward, (hidden, plan)), (dispatcher.reserve, (parts_plan,)),
                       (dispatcher.forward, (hidden, parts_plan))):
        refuses("plan: was made by another pooler: plan the step with this one", call, *args)


def test_pooler_takes_its_task_by_position_as_spec_writes_it():
    scores = seqpool.pooler(4, "cls", "classify")  # no classifier: the pooled row is the logits
    probabilities = seqpool.pool(scores, np.arange(8, dtype=np.float32).reshape(2, 4), [2])[0]
    np.testing.assert_allclose(probabilities.sum(), 1.0, rtol=1e-6)  # softmax, a classify task's activation
    assert seqpool.pooler(4, "all", task="token_classify").result_dtype == "float32"


def test_split_reads_an_out_of_any_shape_as_the_values_it_holds():
    dispatcher = seqpool.pooler(4, "mean")
    hidden = np.arange(24, dtype=np.float32).reshape(6, 4)
    plan = dispatcher.plan([2, 1, 3])
    dispatcher.reserve(plan)
    out = np.zeros((3, plan.output_size // 3), np.float32)
    dispatcher.forward(hidden, plan, out=out)
    expected = seqpool.pool(dispatcher, hidden, [2, 1, 3])
    for found, wanted in zip(seqpool.split(out, plan), expected):
        assert found.shape == (4,)
        np.testing.assert_array_equal(found, wanted)
        assert np.shares_memory(found, out)


def test_a_bool_is_no_id_and_no_count():
    dispatcher = seqpool.pooler(4, "mean")
    for flag in (True, np.True_, np.False_):
        refuses("a request id is a str or an int", dispatcher.plan, [2], ids=[flag])
        refuses("prompt_lens: must hold ints, got", dispatcher.plan, [2, flag])
        refuses("num_scheduled: must hold ints, got", dispatcher.plan, [2], [flag])
    refuses("prompt_lens: must hold int64 or int32", dispatcher.plan, np.array([True]))


def test_pooling_params_are_equal_by_value_and_unhashable():
    a, b = seqpool.PoolingParams(dimensions=2), seqpool.PoolingParams(dimensions=2)
    assert a == b
    assert not a != b
    assert a != seqpool.PoolingParams(dimensions=3)
    with pytest.raises(TypeError):
        hash(a)
    # Against another type they are unequal, as Python's values are: lists and None-checks work.
    for other in (None, 2, "x", [a]):
        assert a != other and not a == other
        assert other != a and not other == a
    assert [None, a].index(b) == 1
    assert a in [None, b]


def test_knobs_and_widths_are_ints_not_bools():
    """A knob given True (a JSON request's true passed on, say) is refused, not taken as 1; so is a width."""
    refuses("hidden_size: must be an int", seqpool.Dispatcher, True, embed="mean")
    refuses("hidden_size: must be an int", seqpool.MultiPooler, np.True_, [seqpool.Part("mean")])
    assert seqpool.Dispatcher(np.int64(4), embed="mean").hidden_size == 4
    refuses("stream: must be an int", seqpool.Dispatcher, 4, embed="mean", stream=True)
    refuses("stream: must be a CUDA stream's handle, at least 0, got -1", seqpool.MultiPooler, 4,
            [seqpool.Part("mean")], stream=-1)
    refuses("spans: must be a sequence of (begin, end) pairs of ints, got b'\\x01\\x05'", seqpool.PoolingParams,
            spans=[b"\x01\x05"])
    for field in ("dimensions", "step_tag_id", "instruction_len", "top_k"):
        for flag in (True, np.True_):
            refuses(f"{field}: must be an int", seqpool.PoolingParams, **{field: flag})
            refuses(f"{field}: must be an int", setattr, seqpool.PoolingParams(), field, flag)
        refuses(f"{field}: must be an int", seqpool.PoolingParams, **{field: "2"})
    for field in ("returned_token_ids", "drop_token_ids"):
        refuses(f"{field}: must hold ints, got True", seqpool.PoolingParams, **{field: [1, True]})
        refuses(f"{field}: must hold ints, got False", setattr, seqpool.PoolingParams(), field, [False])
    refuses("spans: must be a sequence of (begin, end) pairs of ints, got (0, True)", seqpool.PoolingParams,
            spans=[(0, True)])
    refuses("spans: must be a sequence of (begin, end) pairs of ints, got (0, 1, 2)", seqpool.PoolingParams,
            spans=[(0, 1, 2)])
    refuses("spans: has more entries than its len() of 1", seqpool.PoolingParams, spans=Lying([(0, 1), (1, 2)]))
    refuses("drop_token_ids: must hold ints, got True", seqpool.Part, "all", drop_token_ids=[True])
    # What they take: Python's and NumPy's ints, lists and arrays of them, None where a knob is optional.
    params = seqpool.PoolingParams(dimensions=np.int64(2), top_k=None, spans=[[0, 2], (2, 3)],
                                   drop_token_ids=np.array([1, 2]), instruction_len=np.int32(1))
    assert (params.dimensions, params.top_k, params.instruction_len) == (2, None, 1)
    assert params.spans == [(0, 2), (2, 3)] and params.drop_token_ids == [1, 2]
    params.dimensions = None
    params.returned_token_ids = (4, np.int64(5))
    assert params.dimensions is None and params.returned_token_ids == [4, 5]
    assert seqpool.PoolingParams() == seqpool.PoolingParams(returned_token_ids=[], spans=(), drop_token_ids=[])


class Lying:
    """A sequence whose len() says one entry while iterating it gives them all."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return 1

    def __getitem__(self, index):
        return self.items[index]

    def __iter__(self):
        return iter(self.items)


class Endless(Lying):
    """A sequence whose iteration never ends."""

    def __iter__(self):
        return itertools.count()


class Vast(Endless):
    """A sequence whose iteration never ends and whose len() says more than memory holds."""

    def __len__(self):
        return 10**15


def test_arguments_are_read_within_the_batch_whatever_they_do_meanwhile():
    """A sequence that says one length and holds another, or grows while it is read,
    is read as it was when the call began, never past the batch's requests."""
    dispatcher = seqpool.pooler(4, "mean")
    for keyword, items in [("ids", [f"x{i}" for i in range(200)]), ("params", [None] * 200),
                           ("token_ids", [None] * 200)]:
        refuses(f"{keyword}: has more entries than the step's 1 requests", dispatcher.plan, [1],
                **{keyword: Lying(items)})
        refuses(f"{keyword}: has 200 entries for 1 requests", dispatcher.plan, [1], **{keyword: items})
    mixed = seqpool.Dispatcher(4, embed="mean", classify="cls")
    refuses("tasks: has more entries than the step's 1 requests", mixed.plan, [1], tasks=Lying(["embed"] * 200))
    # A sequence whose iteration never ends is read one entry past the batch, not until memory runs out.
    refuses("ids: has more entries than the step's 1 requests", dispatcher.plan, [1], ids=Endless(None))
    # So are the counts: prompt_lens, which says how many requests there are, one entry past its len(); the
    # others one past the batch's requests, whatever their len() says.
    refuses("prompt_lens: has more entries than its len() of 1", dispatcher.plan, Endless(None))
    refuses("prompt_lens: has more entries than its len() of 1", dispatcher.plan, Lying([1, 1]))
    refuses("num_computed: has more entries than the step's 1 requests", dispatcher.plan, [1],
            num_computed=Vast(None))
    refuses("num_scheduled: has more entries than the step's 1 requests", dispatcher.plan, [1],
            num_scheduled=Vast(None))
    assert dispatcher.plan([1, 1], ids=Lying(["p", "q"])).results == [(0, 1, 4), (4, 1, 4)]

    ids = []

    class Grows:
        def __index__(self):
            ids.extend(range(100, 300))
            return 0

    ids.append(Grows())
    plan = dispatcher.plan([1], ids=ids)
    assert len(ids) == 201 and plan.results == [(0, 1, 4)]
    # The default num_scheduled of these overflowed (UBSan, in a sanitized build of the module, saw it).
    refuses("num_computed: must not be negative", dispatcher.plan, [2**63 - 1], num_computed=[-2**63])
    # num_scheduled left out is the rest of each prompt: a num_computed that leaves none is what is refused.
    for computed in (5, 7, 2**63 - 1):
        refuses(f'request 1 (id "1"): num_computed: {computed} leaves none of prompt_len 5 to schedule (num_scheduled, '
                'left out, is the rest of each prompt)', dispatcher.plan, [2, 5], None, [0, computed])
    refuses("num_scheduled: must be at least 1, got 0", dispatcher.plan, [2, 5], [1, 0], [0, 5])
    # Refused before its rows are cut into tiles.
    refuses("num_scheduled: the step's 4611686018427387904 rows of 4 columns are more bytes than a 64-bit count",
            dispatcher.plan, [2**62])
    for rows in (2**31, 2**40):
        refuses(f"num_scheduled: the step reads {rows} rows; a step reads at most 2147483647 (its records count "
                "rows in 32 bits)", dispatcher.plan, [rows])


def test_a_count_tensor_of_another_length_is_refused_before_it_is_read():
    """A tensor that says 10^12 entries may take no memory (a stride of 0): its length is
    checked against the step's requests first, where reading it would fill memory."""
    dispatcher = seqpool.pooler(4, "mean")
    vast = np.lib.stride_tricks.as_strided(np.zeros(1, np.int64), shape=(10**12,), strides=(0,))
    for keyword in ("num_computed", "num_scheduled", "ids"):
        refuses(f"{keyword}: has 1000000000000 entries for 2 requests", dispatcher.plan, [1, 1], **{keyword: vast})
        refuses(f"{keyword}: has 3 entries for 2 requests", dispatcher.plan, [1, 1],
                **{keyword: np.array([0, 1, 2])})
    assert dispatcher.plan([1, 1], ids=np.array([5, 6])).results == [(0, 1, 4), (4, 1, 4)]
    # prompt_lens says how many requests there are: no more than a step's rows.
    refuses("prompt_lens: has 1000000000000 entries; a step has at most 2147483647 requests", dispatcher.plan, vast)
    # So is a knob's list of ids, against its own bound.
    for keyword in ("drop_token_ids", "returned_token_ids"):
        refuses(f"{keyword}: has 1000000000000 entries, more than the 2147483647 a knob's list may hold",
                seqpool.PoolingParams, **{keyword: vast})


class Interrupting:
    """An int whose __index__ is interrupted (or raises what it raises)."""

    def __init__(self, error):
        self.error = error

    def __index__(self):
        raise self.error


def test_what_an_argument_s_index_raises_reaches_the_caller():
    """A KeyboardInterrupt (or any error but the TypeError of no __index__, or the
    OverflowError of an int past the range) raised while an int is read is the caller's:
    it propagates, where turning it into seqpool's refusal would lose it."""
    dispatcher = seqpool.pooler(4, "mean")
    for error in (KeyboardInterrupt(), RuntimeError("from __index__")):
        for call in (lambda: dispatcher.plan([Interrupting(error)]),
                     lambda: dispatcher.plan([1], [Interrupting(error)]),
                     lambda: dispatcher.plan([1], ids=[Interrupting(error)]),
                     lambda: dispatcher.plan([1], sequence_length=Interrupting(error)),
                     lambda: dispatcher.reserve_capacity(requests=Interrupting(error), rows=1),
                     lambda: dispatcher.release(Interrupting(error))):
            with pytest.raises(type(error)):
                call()
    refuses("prompt_lens: must hold ints, got", dispatcher.plan, [Interrupting(TypeError("no int"))])
    refuses("prompt_lens: must hold ints, got 36893488147419103232", dispatcher.plan, [2**65])
    refuses("ids: a request id is a str or an int", dispatcher.plan, [1], ids=[Interrupting(TypeError("no int"))])
    refuses("sequence_length: must be an int in [-2^63, 2^63), got '4'", dispatcher.plan, [1], sequence_length="4")
    refuses("rows: must be an int in [-2^63, 2^63), got None", dispatcher.reserve_capacity, requests=1, rows=None)
    # An id asked about alone is the argument `id`, not an entry of `ids`.
    for bad in (True, 7.0, None):
        refuses("id: a request id is a str or an int", dispatcher.release, bad)
        refuses("id: a request id is a str or an int", dispatcher.num_computed, bad)


class Refusing:
    """A tensor whose producer refuses to export it: its __dlpack__ raises what it raises."""

    shape = (2, 4)

    def __init__(self, error):
        self.error = error

    def __dlpack__(self, *args, **kwargs):
        raise self.error

    def __dlpack_device__(self):
        return (1, 0)


class Unversioned:
    """A producer that predates max_version: asked for a versioned capsule, it raises
    a TypeError; asked plainly, it gives its reason."""

    shape = (2, 4)

    def __dlpack__(self, stream=None):
        raise BufferError("asked plainly")

    def __dlpack_device__(self):
        return (1, 0)


def test_what_a_tensor_s_producer_raises_reaches_the_caller():
    """nanobind clears what __dlpack__ raises (it tries the buffer protocol next). An
    Exception — DLPack's BufferError, or what a producer raises in its place (PyTorch's
    RuntimeError for a meta tensor) — is refused naming the field, with the producer's
    reason; what is no Exception (a KeyboardInterrupt) propagates. A tensor exported but not
    of a kind the argument takes is refused with seqpool's message, as before."""
    dispatcher = seqpool.pooler(4, "mean")
    multi = seqpool.MultiPooler(4, [seqpool.Part("mean")])
    plan, parts_plan = dispatcher.plan([2]), multi.plan([2])
    dispatcher.reserve(plan)
    multi.reserve(parts_plan)
    hidden = np.zeros((2, 4), np.float32)
    for error in (KeyboardInterrupt(), SystemExit(3), BufferError("the producer's reason"),
                  RuntimeError("Cannot pack tensors on meta")):
        refusing = Refusing(error)
        for field, call in (("hidden states", lambda: dispatcher.forward(refusing, plan)),
                            ("output", lambda: dispatcher.forward(hidden, plan, out=refusing)),
                            ("out", lambda: multi.forward(hidden, parts_plan, out=[refusing])),
                            ("prompt_lens", lambda: dispatcher.plan(refusing)),
                            ("ids", lambda: dispatcher.plan([2], ids=refusing)),
                            ("token_ids", lambda: dispatcher.plan([2], token_ids=refusing)),
                            ("token_ids", lambda: dispatcher.plan([2], token_ids=[refusing])),
                            ("projector", lambda: seqpool.Dispatcher(4, embed="mean", projector=refusing)),
                            ("ranges", lambda: seqpool.Dispatcher(4, embed="mean", ranges=refusing,
                                                                  result_dtype="int8")),
                            ("weight", lambda: seqpool.Dense(refusing))):
            if isinstance(error, Exception):
                refuses(f"{field}: its producer refused to export it (__dlpack__ raised {type(error).__name__}: "
                        f"{error})", call)
                continue
            with pytest.raises(type(error)) as raised:
                call()
            assert raised.value is error
    refuses("hidden states: its producer refused to export it (__dlpack__ raised BufferError: asked plainly)",
            dispatcher.forward, Unversioned(), plan)
    # Exported, but not what the argument takes: seqpool's refusal.
    refuses("hidden states: the tensor has 4 dimensions, needs 2 ([rows, H]) or 3", dispatcher.forward,
            np.zeros((2, 4, 1, 1), np.float32), plan)
    read_only = np.zeros(plan.output_size, np.float32)
    read_only.flags.writeable = False
    refuses("output: must be a writable tensor", dispatcher.forward, hidden, plan, out=read_only)


def test_a_tensor_that_requires_grad_is_refused_as_pytorch_refuses_to_export_it():
    """PyTorch's __dlpack__ refuses a tensor that requires grad: a step must not read it,
    nor write into it behind autograd's back. nanobind would import it anyway, through
    torch.utils.dlpack.to_dlpack(), which does not check: seqpool keeps the refusal."""
    torch = need_torch()
    dispatcher = seqpool.pooler(4, "mean")
    multi = seqpool.MultiPooler(4, [seqpool.Part("mean"), seqpool.Part("cls")])
    hidden = torch.arange(20, dtype=torch.float32).reshape(5, 4)
    plan, parts_plan = dispatcher.plan([2, 3]), multi.plan([2, 3])
    dispatcher.reserve(plan)
    multi.reserve(parts_plan)
    refused = "its producer refused to export it (__dlpack__ raised RuntimeError: "
    refuses("hidden states: " + refused, dispatcher.forward, hidden.clone().requires_grad_(), plan)
    leaf = torch.zeros(plan.output_size, requires_grad=True)
    refuses("output: " + refused, dispatcher.forward, hidden, plan, out=leaf)
    outs = [torch.zeros(part.output_size, requires_grad=True) for part in parts_plan.parts]
    refuses("out: " + refused, multi.forward, hidden, parts_plan, out=outs)
    assert not leaf.detach().any() and not any(out.detach().any() for out in outs)
    # A module's weights require grad too; they are copied once, as their values, so they are taken as they are held.
    layer = torch.nn.Linear(4, 2)
    held = seqpool.Dispatcher(4, embed="cls", projector=layer.weight, projector_bias=layer.bias)
    detached = seqpool.Dispatcher(4, embed="cls", projector=layer.weight.detach(), projector_bias=layer.bias.detach())
    stacked = seqpool.Dispatcher(4, embed="cls", projector=[seqpool.Dense(layer.weight, layer.bias)])
    for dispatcher_of in (held, stacked):
        for found, wanted in zip(seqpool.pool(dispatcher_of, hidden, [2, 3]), seqpool.pool(detached, hidden, [2, 3])):
            assert np.array_equal(np.asarray(found), np.asarray(wanted))
    # Detached, the same tensors are read and written.
    rows = hidden.numpy()
    dispatcher.forward(hidden, plan, out=leaf.detach())
    assert np.allclose(leaf.detach().numpy()[:4], unit(rows[:2].mean(axis=0)))
    multi.forward(hidden, parts_plan, out=[out.detach() for out in outs])
    assert np.allclose(outs[1].detach().numpy()[:4], unit(rows[0]))


def unit(row):
    return row / np.linalg.norm(row)


class InterruptedOnce:
    """A producer that exports `array`, but is interrupted (as by a Ctrl-C) the first time it is asked."""

    def __init__(self, array):
        self.array, self.armed = array, True

    def __dlpack__(self, *args, **kwargs):
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return (1, 0)


def test_an_interrupt_while_a_tensor_is_exported_reaches_the_caller_once():
    """nanobind clears what __dlpack__ raises and asks again or reads another way: an
    interrupt in the first export would be lost. It reaches the caller; the step does not
    run, and runs when asked again."""
    dispatcher = seqpool.pooler(4, "mean")
    hidden = np.arange(20, dtype=np.float32).reshape(5, 4)
    plan = dispatcher.plan([2, 3])
    dispatcher.reserve(plan)
    producer = InterruptedOnce(hidden)
    with pytest.raises(KeyboardInterrupt):
        dispatcher.forward(producer, plan)
    assert np.allclose(np.from_dlpack(dispatcher.forward(producer, plan))[:4], unit(hidden[:2].mean(axis=0)))
    with pytest.raises(KeyboardInterrupt):
        dispatcher.plan(InterruptedOnce(np.array([2, 3], np.int64)))


class Exporting:
    """A producer whose capsule says what it is told: `shape` over `data` (an address,
    0 for null) of int64, or float32 with `floats`; the capsule's memory lives as long
    as the producer."""

    def __init__(self, shape, data=0, floats=False):
        import ctypes
        self.shape = tuple(shape)

        class DLTensor(ctypes.Structure):
            _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                        ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                        ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                        ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]

        class DLManagedTensor(ctypes.Structure):
            _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

        self.extents = (ctypes.c_int64 * len(shape))(*shape)
        self.managed = DLManagedTensor(DLTensor(data or None, 1, 0, len(shape), 2 if floats else 0, 32 if floats else 64,
                                                1, self.extents, None, 0), None, None)
        self.new_capsule = ctypes.pythonapi.PyCapsule_New
        self.new_capsule.restype = ctypes.py_object
        self.new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        self.address = ctypes.addressof(self.managed)

    def __dlpack__(self, *args, **kwargs):
        return self.new_capsule(self.address, b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


def test_a_producer_s_null_data_or_negative_extent_is_refused_not_read():
    """A tensor of elements whose data is null, or of a negative extent, read as counts,
    ids, a knob's list, a weight or ranges: refused as the views of section 11 refuse them
    (it was read: a segfault, or the vector's own error)."""
    dispatcher = seqpool.pooler(2, "mean")
    null_ids, null_rows = Exporting([2]), Exporting([3, 2], floats=True)
    for field, call in (("prompt_lens", lambda: dispatcher.plan(null_ids)),
                        ("num_scheduled", lambda: dispatcher.plan([3, 4], null_ids)),
                        ("num_computed", lambda: dispatcher.plan([3, 4], None, null_ids)),
                        ("ids", lambda: dispatcher.plan([3, 4], ids=null_ids)),
                        ("returned_token_ids", lambda: seqpool.PoolingParams(returned_token_ids=null_ids)),
                        ("drop_token_ids", lambda: seqpool.Part("all", drop_token_ids=null_ids))):
        refuses(f"{field}: data is null; the tensor has 2 elements", call)
    for field, call in (("projector", lambda: seqpool.Dispatcher(2, embed="mean", projector=null_rows)),
                        ("weight", lambda: seqpool.Dense(null_rows)),
                        ("ranges", lambda: seqpool.Dispatcher(2, embed="mean", result_dtype="int8",
                                                              ranges=Exporting([2, 2], floats=True)))):
        refuses(f"{field}: data is null; the tensor has", call)
    values = np.array([3, 4], np.int64)
    negative = Exporting([-2], data=values.ctypes.data)
    refuses("prompt_lens: shape[0] is negative: -2", dispatcher.plan, negative)
    refuses("ids: shape[0] is negative: -2", dispatcher.plan, [3, 4], ids=negative)
    refuses("drop_token_ids: shape[0] is negative: -2", seqpool.PoolingParams, drop_token_ids=negative)
    # Told the truth, the same producer is read.
    assert dispatcher.plan(Exporting([2], data=values.ctypes.data)).results == dispatcher.plan([3, 4]).results


def test_numpy_arrays_of_str_or_objects_are_sequences_of_ids_and_counts():
    """NumPy exports no array of str or of objects (nor a big-endian one): such an array is
    read entry by entry, as the sequence it is."""
    dispatcher = seqpool.Dispatcher(2, embed="mean", classify="cls")
    wanted = dispatcher.plan([1, 2], tasks="embed").results
    ids = np.array(["req-a", "req-b"])
    for given in (ids, np.array(["req-a", "req-b"], dtype=object), np.array([7, "b"], dtype=object)):
        assert dispatcher.plan([1, 2], ids=given, tasks="embed").results == wanted
    # Read as ids: two alike are refused (7 is the id "7").
    refuses('request 1 (id "req-a")', dispatcher.plan, [1, 2], ids=np.array(["req-a", "req-a"]), tasks="embed")
    refuses('request 1 (id "7")', dispatcher.plan, [1, 2], ids=np.array([7, "7"], dtype=object), tasks="embed")
    for counts in (np.array([1, 2], dtype=object), np.array([1, 2], ">i8")):
        assert dispatcher.plan(counts, tasks="embed").results == wanted


def test_names_are_quoted_as_section_8_quotes_them_and_ids_are_utf_8():
    bad = 'x"\x00'
    quoted = '"x\\"\\u0000"'
    refuses(f"embed: method {quoted}", seqpool.Dispatcher, 4, embed=bad)
    refuses(f"tasks: expected \"embed\", \"classify\", \"token_embed\" or \"token_classify\", got {quoted}",
            seqpool.Dispatcher(4, embed="mean").plan, [1], tasks=[bad])
    refuses(f"task: expected \"embed\", \"classify\", \"token_embed\" or \"token_classify\", got {quoted}",
            seqpool.Part, "all", task=bad)
    refuses(f"task: expected \"embed\", \"classify\", \"token_embed\" or \"token_classify\", got {quoted}",
            seqpool.pooler, 4, "all", task=bad)
    refuses("task: expected \"embed\", \"classify\", \"token_embed\" or \"token_classify\", got 5", seqpool.pooler,
            4, "all", task=5)
    refuses("task: expected \"embed\", \"classify\", \"token_embed\" or \"token_classify\", got 5", seqpool.Part,
            "all", task=5)
    refuses("task: expected \"embed\", \"classify\", \"token_embed\" or \"token_classify\", got 'a\\ud800'",
            seqpool.Part, "all", task="a\ud800")
    # bytes are bytes, not the small ints they iterate as.
    refuses("tasks: must be a task name or a sequence of them, got bytes", seqpool.Dispatcher(4, embed="mean").plan,
            [1] * 5,
            tasks=b"embed")
    dispatcher = seqpool.pooler(4, "mean")
    refuses("ids: a str id must be UTF-8 text (no lone surrogates), got 'a\\ud800'", dispatcher.plan, [1],
            ids=["a\ud800"])
    refuses("id: a str id must be UTF-8 text (no lone surrogates)", dispatcher.release, "\udfff")
    refuses("id: a str id must be UTF-8 text (no lone surrogates)", dispatcher.num_computed, "\udfff")


def test_an_empty_weight_is_refused_by_its_shape():
    for shape in ((0, 4), (4, 0)):
        refuses(f"projector: must have shape [out, in] of at least [1, 1], got [{shape[0]}, {shape[1]}]",
                seqpool.Dispatcher, 4, embed="mean", projector=np.zeros(shape, np.float32))
        refuses("projector: must have shape [out, in] of at least [1, 1]", seqpool.Part, "mean",
                projector=np.zeros(shape, np.float32))
        refuses("weight: must have shape [out, in] of at least [1, 1]", seqpool.Dense, np.zeros(shape, np.float32))


def test_split_takes_the_outputs_forward_made():
    """forward() returns what reserve() made as objects with __dlpack__ alone; split() views
    them as NumPy's (PyTorch's for bfloat16) itself."""
    rng = np.random.default_rng(3)
    hidden = rng.normal(size=(5, 4)).astype(np.float32)
    dispatcher = seqpool.Dispatcher(4, embed="mean", token_embed="all")
    plan = dispatcher.plan([2, 3], tasks=["embed", "token_embed"])
    dispatcher.reserve(plan)
    made = dispatcher.forward(hidden, plan)
    assert not hasattr(made, "reshape")
    mean, rows = seqpool.split(made, plan)
    close(mean, expected("mean", "embed", hidden[:2], {}))
    close(rows, expected("all", "token_embed", hidden[2:], {}))
    multi = seqpool.MultiPooler(4, [seqpool.Part("mean"), seqpool.Part("cls", result_dtype="float16")])
    parts_plan = multi.plan([2, 3])
    multi.reserve(parts_plan)
    outputs = multi.forward(hidden, parts_plan)
    for k, method in enumerate(("mean", "cls")):
        found = seqpool.split(outputs[k], parts_plan.parts[k])
        for i, (begin, end) in enumerate(((0, 2), (2, 5))):
            close(found[i], stored(expected(method, "embed", hidden[begin:end], {}), ["float32", "float16"][k]),
                  ["float32", "float16"][k])
    torch = pytest.importorskip("torch")
    brain = seqpool.pooler(4, "mean", result_dtype="bfloat16")
    plan = brain.plan([5])
    brain.reserve(plan)
    (found,) = seqpool.split(brain.forward(hidden, plan), plan)
    assert found.dtype == torch.bfloat16
    close(found.float().numpy(), stored(expected("mean", "embed", hidden, {}), "bfloat16"), "bfloat16")


def test_a_plan_keeps_no_reference_to_its_token_ids():
    """plan() reads the ids and lets them go: what a producer exported is freed once plan() returns, and an array
    that refers back to its plan makes no cycle the collector cannot free; the plan runs as it would have."""
    exported = []

    class Exported:
        def __dlpack__(self, *args, **kwargs):
            ids = np.arange(2000, dtype=np.int64) % 7
            exported.append(weakref.ref(ids))
            return ids.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    class Ids(np.ndarray):
        """An array with room for attributes: here, its plan."""

    dispatcher = seqpool.pooler(4, "all")
    params = seqpool.PoolingParams(drop_token_ids=[3])
    hidden = np.random.default_rng(5).normal(size=(2000, 4)).astype(np.float32)
    wanted = seqpool.pool(dispatcher, hidden, [2000], token_ids=[np.arange(2000) % 7], params=params)
    plan = dispatcher.plan([2000], token_ids=[Exported()], params=params)
    gc.collect()
    assert len(exported) == 1 and exported[0]() is None
    assert plan.results == [(0, 2000 - 286, 4)]
    dispatcher.reserve(plan)
    np.testing.assert_array_equal(seqpool.split(np.from_dlpack(dispatcher.forward(hidden, plan)), plan)[0],
                                  wanted[0])

    ids = (np.arange(2000) % 7).view(Ids)
    ids.plan = dispatcher.plan([2000], token_ids=[ids], params=params)
    alive = weakref.ref(ids)
    del ids
    gc.collect()
    assert alive() is None


def test_ids_given_as_a_tensor_are_exported_once():
    exports = []

    class Counted:
        def __init__(self, values):
            self.values = values

        def __dlpack__(self, *args, **kwargs):
            exports.append(kwargs)
            return self.values.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    plan = seqpool.pooler(4, "mean").plan([2, 3], ids=Counted(np.array([7, 9], np.int64)))
    assert plan.results == [(0, 1, 4), (4, 1, 4)]
    assert len(exports) == 1


def test_counts_and_weights_from_unaligned_buffers():
    """A buffer's numbers need not be aligned (NumPy's view of a bytearray at an odd offset). On x86 a
    misaligned load reads right anyway; UBSan, in a sanitized build of the module, sees it."""
    def unaligned(values):
        values = np.asarray(values)
        memory = bytearray(values.nbytes + 1)
        view = np.ndarray(values.shape, dtype=values.dtype, buffer=memory, offset=1)
        view[...] = values
        assert not view.flags["ALIGNED"]
        return view

    rng = np.random.default_rng(13)
    hidden = rng.normal(size=(9, 6)).astype(np.float32)
    projector = rng.normal(size=(3, 6)).astype(np.float32)
    wanted = seqpool.pool(seqpool.pooler(6, "mean", projector=projector), hidden, [4, 5], num_computed=[0, 0])
    for lengths in (unaligned(np.array([4, 5], np.int64)), unaligned(np.array([4, 5], np.int32))):
        found = seqpool.pool(seqpool.pooler(6, "mean", projector=unaligned(projector)), hidden, lengths,
                             num_computed=unaligned(np.zeros(2, np.int64)))
        assert len(found) == len(wanted) == 2
        assert all(np.array_equal(a, b) for a, b in zip(found, wanted))
    # Hidden states are read where they lie, by loads of whole floats: refused, with how far off they lie.
    refuses("hidden states: data + byte_offset is not aligned to 4 bytes (it is 1 more than a multiple of 4)",
            seqpool.pool, seqpool.pooler(6, "mean"), unaligned(hidden), [4, 5])


def test_token_ids_as_one_tensor_a_row_a_request_as_vllm_holds_them():
    """vLLM's prompt_token_ids, [B, max_prompt_len] padded with the vocabulary's size, or its
    persistent int32 buffer sliced to the batch: the same results as a tensor a request."""
    rng = np.random.default_rng(12)
    hidden_size, lengths, vocab = 8, [5, 9, 3], 50
    prompts = [rng.integers(0, 4, size=n) for n in lengths]
    hidden = rng.normal(size=(sum(lengths), hidden_size)).astype(np.float32)
    padded = np.full((3, max(lengths)), vocab, np.int64)
    buffer = np.zeros((8, 16), np.int32)  # [max_num_reqs, max_model_len]
    for i, ids in enumerate(prompts):
        padded[i, :len(ids)] = ids
        buffer[i, :len(ids)] = ids
    params = seqpool.PoolingParams(step_tag_id=2, drop_token_ids=[1])
    per_request = seqpool.pool(seqpool.pooler(hidden_size, "step"), hidden, lengths, token_ids=prompts, params=params)
    for rows in (padded, buffer[:3, :12], buffer[:3]):
        results = seqpool.pool(seqpool.pooler(hidden_size, "step"), hidden, lengths, token_ids=rows, params=params)
        assert len(results) == len(per_request) == 3
        assert all(np.array_equal(a, b) for a, b in zip(results, per_request))
    assert [len(r) for r in per_request] == [int(np.sum((p == 2) & (p != 1))) for p in prompts]
    # Chunks read their request's row of each step's tensor.
    chunked = seqpool.pooler(hidden_size, "step")
    first = chunked.plan(lengths, [2, 4, 3], ids=["a", "b", "c"], token_ids=padded, params=params)
    chunked.reserve(first)
    chunked.forward(np.concatenate([hidden[0:2], hidden[5:9], hidden[14:17]]), first)
    last = chunked.plan(lengths[:2], [3, 5], [2, 4], ids=["a", "b"], token_ids=padded[:2], params=params)
    chunked.reserve(last)
    out = np.from_dlpack(chunked.forward(np.concatenate([hidden[2:5], hidden[9:14]]), last))
    finished = seqpool.split(out, last)
    assert len(finished) == 2
    for got, wanted in zip(finished, per_request[:2]):
        assert np.array_equal(got, wanted)

    dispatcher = seqpool.pooler(hidden_size, "step")
    refuses('request 1 (id "1"): prompt_token_ids: the tensor\'s rows hold 6 ids; the prompt has 9', dispatcher.plan,
            lengths, token_ids=padded[:, :6], params=params)
    refuses("token ids: the tensor has 2 rows; the batch has 3 requests", dispatcher.plan, lengths,
            token_ids=padded[:2], params=params)
    refuses("token ids: the tensor has 3 dimensions, needs 2", dispatcher.plan, lengths, token_ids=padded[None],
            params=params)
    refuses("token ids: strides[1] is 2; a row's ids must be adjacent (1)", dispatcher.plan, lengths,
            token_ids=buffer[:3, ::2], params=params)
    refuses("token ids: the tensor holds float32", dispatcher.plan, lengths, token_ids=padded.astype(np.float32),
            params=params)

    # plan() lets the tensor go, and what its __dlpack__ exported, once it has read the ids.
    exported = []

    class Exported:
        def __dlpack__(self, *args, **kwargs):
            rows = padded.copy()
            exported.append(weakref.ref(rows))
            return rows.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return (1, 0)

    plan = dispatcher.plan(lengths, token_ids=Exported(), params=params)
    gc.collect()
    assert exported[0]() is None
    dispatcher.reserve(plan)
    results = seqpool.split(np.from_dlpack(dispatcher.forward(hidden, plan)), plan)
    assert len(results) == 3 and all(np.array_equal(a, b) for a, b in zip(results, per_request))


def test_a_pooler_called_from_inside_its_own_call_refuses_instead_of_waiting_for_itself():
    dispatcher = seqpool.pooler(4, "mean")
    reentered = []

    class Length:
        def __index__(self):
            try:
                dispatcher.audit()
            except ValueError as refused:
                reentered.append(str(refused))
            return 3

    finished = threading.Event()

    def plan():
        dispatcher.plan([Length()])
        finished.set()

    worker = threading.Thread(target=plan, daemon=True)
    worker.start()
    assert finished.wait(30), "plan() waited for itself"
    assert reentered == ["pooler: called from code one of its own calls runs while it reads its arguments (an "
                         "argument's __index__, __len__, __iter__, __dlpack__, …): call it once that call has returned"]
    assert dispatcher.audit()["uploads"] == 0


def test_a_padded_tensor_is_the_plans_batch_and_outputs_lie_apart_from_the_rows():
    dispatcher = seqpool.pooler(4, "mean")
    hidden = np.full((2, 3, 4), np.nan, np.float32)
    hidden[:, :2] = 1.0
    plan = dispatcher.plan([2, 2, 2], sequence_length=2)  # 6 rows, but 3 sequences of 2
    dispatcher.reserve(plan)
    refuses("hidden: is [2, 3, 4], but the plan's padded batch is 3 sequences of 2 rows", dispatcher.forward,
            hidden, plan)
    plan = dispatcher.plan([3, 3])
    dispatcher.reserve(plan)
    refuses("hidden: a [B, S, H] tensor is a padded batch's: plan it with sequence_length=S, or give the packed "
            "rows as [T, H]", dispatcher.forward, hidden, plan)
    rows = np.arange(20, dtype=np.float32).reshape(5, 4)
    plan = dispatcher.plan([2, 3])
    dispatcher.reserve(plan)
    refuses("output: overlaps the hidden states", dispatcher.forward, rows, plan, out=rows.reshape(-1)[-8:])
    results = seqpool.split(np.from_dlpack(dispatcher.forward(rows, plan)), plan)  # refused before it ran: it runs
    wanted = [rows[:2].mean(0), rows[2:].mean(0)]
    close(results, [w / np.linalg.norm(w) for w in wanted])


def resident_bytes():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_many_steps_leak_nothing():
    """10,000 steps leave no Python object or reference behind, no memory the
    process holds (outputs and plans are C++ memory), and 2,000 more no Python memory."""
    dispatcher = seqpool.pooler(16, "step")
    hidden = np.ones((12, 16), np.float32)
    token_ids = [np.arange(5, dtype=np.int64), np.arange(7, dtype=np.int32)]
    params = seqpool.PoolingParams(step_tag_id=2)

    def step():
        results = seqpool.pool(dispatcher, hidden, [5, 7], token_ids=token_ids, params=params, ids=["x", 9])
        assert results[0].shape == (1, 16)

    for _ in range(100):
        step()
    gc.collect()
    objects, references, resident = len(gc.get_objects()), sys.getrefcount(token_ids[0]), resident_bytes()
    for _ in range(10_000):
        step()
    gc.collect()
    objects_after, references_after = len(gc.get_objects()), sys.getrefcount(token_ids[0])
    assert objects_after <= objects + 10
    assert references_after == references
    assert resident_bytes() - resident < 4 << 20
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(2_000):
        step()
    gc.collect()
    grown = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert grown < 64 * 1024, grown


def test_outputs_and_plans_outlive_their_dispatcher():
    """An output keeps the memory it lives in, and a plan the dispatcher it needs."""
    hidden = np.arange(20, dtype=np.float32).reshape(5, 4)
    dispatcher = seqpool.pooler(4, "mean")
    plan = dispatcher.plan([2, 3])
    dispatcher.reserve(plan)
    out = dispatcher.forward(hidden, plan)
    unused = dispatcher.plan([5])
    dispatcher.reserve(unused)
    del dispatcher
    gc.collect()
    first = np.from_dlpack(out)[:4]
    close(first, expected("mean", "embed", hidden[:2], {}))
    del out, unused, first
    gc.collect()
    (row,) = seqpool.pool(seqpool.pooler(4, "cls"), hidden, [5])  # the README's one-call form
    close(row, expected("cls", "embed", hidden, {}))


def test_plans_held_at_once_are_their_own_and_dropped_ones_are_planned_into_again():
    """A plan's storage goes back to its pooler when Python drops it, for a later
    plan to plan into: plans held at once (more than the pooler keeps spare) each
    keep their own results, and a plan made into a dropped one's storage, smaller
    or larger, pools as a fresh one does, for a Dispatcher and a MultiPooler."""
    rng = np.random.default_rng(5)
    dispatcher = seqpool.pooler(4, "mean")
    multi = seqpool.MultiPooler(4, [seqpool.Part("mean"), seqpool.Part("all")])
    assert dispatcher._spare_plans == 0 and multi._spare_plans == 0
    batches = [[2, 3], [1], [4, 1, 1], [5, 2, 6, 1], [3]]
    for round_ in range(3):
        held = [(lengths, dispatcher.plan(lengths), multi.plan(lengths)) for lengths in batches]
        assert dispatcher._spare_plans == 0 and multi._spare_plans == 0  # each plan took one, where one was kept
        for lengths, plan, parts in held:  # run in the order made, each after every other was made
            offsets = np.cumsum([0] + lengths)
            assert plan.results == [(4 * i, 1, 4) for i in range(len(lengths))]
            hidden = rng.normal(size=(offsets[-1], 4)).astype(np.float32)
            dispatcher.reserve(plan)
            out = np.from_dlpack(dispatcher.forward(hidden, plan))
            multi.reserve(parts)
            outputs = [np.from_dlpack(output) for output in multi.forward(hidden, parts)]
            pooled, tokens = (seqpool.split(output, part) for output, part in zip(outputs, parts.parts))
            for i, length in enumerate(lengths):
                rows = hidden[offsets[i]:offsets[i + 1]]
                close(out[4 * i:4 * i + 4], expected("mean", "embed", rows, {}))
                close(pooled[i], expected("mean", "embed", rows, {}))
                close(tokens[i], expected("all", "token_embed", rows, {}))
        batches = batches[1:] + batches[:1]  # the next round's plans take other sizes' storage
        del held, plan, parts
        gc.collect()
        assert dispatcher._spare_plans == 2 and multi._spare_plans == 2  # two kept of the five dropped
    kept = dispatcher.plan([2])
    assert dispatcher._spare_plans == 1
    del dispatcher  # a plan, and what it will give back to, outlive the pooler
    gc.collect()
    assert kept.results == [(0, 1, 4)]
    del kept
    gc.collect()


def run_threads(work, count=4):
    """Runs `work` in `count` threads at once; an exception in any fails the caller."""
    raised = []

    def guarded():
        try:
            work()
        except BaseException as failure:  # noqa: BLE001 — handed to the test's thread
            raised.append(failure)

    threads = [threading.Thread(target=guarded) for _ in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if raised:
        raise raised[0]


def test_one_dispatcher_shared_by_threads_never_crashes():
    """A dispatcher serves one engine thread (SPEC 10): steps interleaved from
    several threads each either pool correctly or are refused with seqpool's
    message (a plan whose reserve() another thread's replaced), never corrupt
    memory: the module runs one call of a dispatcher at a time."""
    rng = np.random.default_rng(2)
    hidden = rng.normal(size=(3000, 32)).astype(np.float32)
    dispatcher = seqpool.pooler(32, "max")
    wanted = seqpool.pool(seqpool.pooler(32, "max"), hidden, [1000] * 3)
    pooled, refused = [], []

    def work():
        for _ in range(30):
            try:
                results = seqpool.pool(dispatcher, hidden, [1000] * 3)
            except ValueError as refusal:
                refused.append(str(refusal))
                continue
            pooled.append(all(np.array_equal(a, b) for a, b in zip(results, wanted)))

    run_threads(work)
    assert len(pooled) + len(refused) == 120 and all(pooled)
    assert all("plan" in message or "reserve" in message for message in refused), refused[:3]


def test_threads_pool_at_once():
    """forward() lets go of the GIL: dispatchers in several threads give their own results."""
    rng = np.random.default_rng(1)
    hidden = rng.normal(size=(4000, 64)).astype(np.float32)
    wanted = seqpool.pool(seqpool.pooler(64, "mean"), hidden, [1000] * 4)

    def work():
        dispatcher = seqpool.pooler(64, "mean")
        for _ in range(20):
            for a, b in zip(seqpool.pool(dispatcher, hidden, [1000] * 4), wanted):
                assert np.array_equal(a, b)

    run_threads(work)


@pytest.mark.parametrize("kind", ["Dispatcher", "MultiPooler"])
def test_reserve_lets_go_of_the_gil(kind):
    """reserve() may wait for the device (a staging slot, pinned memory's growth): another
    thread runs Python meanwhile. Here its wait is growing the state store for 50,000 chunked
    requests; the other thread's ticks land inside it."""
    size, count = 1024, 50_000
    pooler = (seqpool.pooler(size, "mean") if kind == "Dispatcher"
              else seqpool.MultiPooler(size, [seqpool.Part("mean")]))
    plan = pooler.plan([2] * count, [1] * count)
    ticks, stop = [], threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())

    switch = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        while not ticks:
            time.sleep(0.001)
        began = time.perf_counter()
        pooler.reserve(plan)
        ended = time.perf_counter()
    finally:
        stop.set()
        ticker.join()
        sys.setswitchinterval(switch)
    margin = (ended - began) / 4
    assert ended - began > 0.01, "the reserve was too short to tell"
    assert any(began + margin < t < ended - margin for t in ticks), (ended - began, len(ticks))


def test_spans_pool_each_passage_into_a_row_of_its_own():
    rng = np.random.default_rng(12)
    hidden = rng.normal(size=(20, 6)).astype(np.float32)
    spans = [(0, 5), (5, 12), (15, 20)]
    params = seqpool.PoolingParams(spans=spans)
    assert params.spans == spans and params == seqpool.PoolingParams(spans=spans)
    (result,) = seqpool.pool(seqpool.pooler(6, "mean"), hidden, [20], params=params)
    assert result.shape == (3, 6)
    for row, (begin, end) in zip(result, spans):
        close(row, expected("mean", "embed", hidden[begin:end], {}))
    refuses("spans", seqpool.pooler(6, "mean").plan, [20], params=seqpool.PoolingParams(spans=[(5, 5)]))


@pytest.mark.parametrize("method", ["cls+max+mean", "max+mean", "cls+last", "mean_sqrt_len+weighted_mean"])
def test_a_concat_named_in_sentence_transformers_order(method):
    rng = np.random.default_rng(35)
    prompts = [rng.normal(size=(n, 8)).astype(np.float32) for n in (20, 7, 33)]
    results = seqpool.pool(seqpool.pooler(8, method), np.concatenate(prompts), [len(p) for p in prompts])
    for prompt, result in zip(prompts, results):
        assert result.shape == (8 * len(method.split("+")),)
        close(result, expected(method, "embed", prompt, {}))  # normalised whole, as sentence-transformers' Normalize
    refuses('method "mean+cls" cannot serve it (expected cls, last, mean, max, weighted_mean, mean_sqrt_len or two or '
            "three of cls, max, mean, mean_sqrt_len, weighted_mean and last, in that order, joined by '+'",
            seqpool.Dispatcher, 4, embed="mean+cls")


def test_an_instruction_is_left_out_of_the_rows_pooled():
    rng = np.random.default_rng(27)
    hidden = rng.normal(size=(20, 6)).astype(np.float32)
    params = seqpool.PoolingParams(instruction_len=7)
    assert params.instruction_len == 7 and params != seqpool.PoolingParams() and "instruction_len=7" in repr(params)
    for method in ("mean", "max", "mean_sqrt_len"):
        (result,) = seqpool.pool(seqpool.pooler(6, method), hidden, [20], params=params)
        close(result, expected(method, "embed", hidden[7:], {}))
    (result,) = seqpool.pool(seqpool.pooler(6, "cls"), hidden, [20], params=params)
    close(result, expected("cls", "embed", hidden, {}))
    refuses("instruction_len", seqpool.pooler(6, "mean").plan, [20], params=seqpool.PoolingParams(instruction_len=20))


def test_token_filters_drop_rows_of_a_token_method():
    rng = np.random.default_rng(28)
    hidden = rng.normal(size=(9, 6)).astype(np.float32)
    ids = np.array([101, 7, 1012, 7, 5, 1012, 9, 7, 102], np.int64)
    params = seqpool.PoolingParams(drop_first=True, drop_last=True, drop_token_ids=[1012], use_activation=False)
    assert params.drop_first and params.drop_last and params.drop_token_ids == [1012]
    assert "drop_first=True" in repr(params) and params != seqpool.PoolingParams(use_activation=False)
    (result,) = seqpool.pool(seqpool.pooler(6, "all"), hidden, [9], token_ids=[ids], params=params)
    close(result, hidden[[1, 3, 4, 6, 7]])
    refuses("drop_token_ids", seqpool.pooler(6, "all").plan, [9], token_ids=[ids],
            params=seqpool.PoolingParams(drop_token_ids=[7, 7]))
    refuses("drop_first", seqpool.pooler(6, "mean").plan, [9], params=seqpool.PoolingParams(drop_first=True))


def test_sparse_results_list_weights_by_id():
    # docs/TESTS.md case 32: w = relu(h0 - h1 - 0.5) of each row, the largest of each token id, ids above
    # the floor; request b in chunks 1+2 over two steps. Case 33: MAX listed by column.
    rows_a = np.array([[3, 0], [2, 0], [0, 1], [4, 0.5], [1, 0.25], [5, 0]], np.float32)
    rows_b = np.array([[1, 0], [2, 0], [0, 0]], np.float32)
    ids_a, ids_b = np.array([0, 7, 5, 7, 9, 2]), np.array([9, 9, 4])
    weigh = seqpool.Dense(np.array([[1, -1]], np.float32), np.array([-0.5], np.float32), activation="relu")
    for floor, top_k, want_a, want_b in ((None, None, [(7, 3), (9, 0.25)], [(9, 1.5)]),
                                         (-1.0, None, [(5, 0), (7, 3), (9, 0.25)], [(4, 0), (9, 1.5)]),
                                         (-1.0, 2, [(7, 3), (9, 0.25)], [(4, 0), (9, 1.5)])):
        dispatcher = seqpool.Dispatcher(2, token_classify="all", classifier=weigh, problem="regression",
                                        result_dtype="sparse", weight_floor=floor)
        assert dispatcher.result_dtype == "sparse"
        params = seqpool.PoolingParams(drop_token_ids=[0, 2], top_k=top_k)
        assert params.top_k == top_k
        first = dispatcher.plan([6, 3], [6, 1], ids=["a", "b"], token_ids=[ids_a, ids_b], params=params)
        dispatcher.reserve(first)
        out = dispatcher.forward(np.concatenate([rows_a, rows_b[:1]]), first)
        assert first.sparse and np.from_dlpack(out).shape == (first.output_size, 2)
        (ids, weights), unfinished = seqpool.split(np.from_dlpack(out), first)
        assert unfinished is None
        listed = ids >= 0
        assert list(zip(ids[listed].tolist(), weights[listed].tolist())) == want_a
        assert np.all(weights[~listed] == 0)
        (ids, weights), = seqpool.pool(dispatcher, rows_b[1:], [3], num_scheduled=[2], num_computed=[1], ids=["b"],
                                       token_ids=[ids_b], params=params)
        assert ids.dtype == np.int32 and weights.dtype == np.float32
        assert list(zip(ids[ids >= 0].tolist(), weights[ids >= 0].tolist())) == want_b
    by_column = seqpool.Dispatcher(4, classify="max", problem="regression", result_dtype="sparse")
    hidden = np.array([[0, 2, -1, 0.5], [1, 0, -2, 0.25]], np.float32)
    for top_k, want in ((None, [(0, 1), (1, 2), (3, 0.5)]), (2, [(0, 1), (1, 2)])):
        (ids, weights), = seqpool.pool(by_column, hidden, [2], params=seqpool.PoolingParams(top_k=top_k))
        assert list(zip(ids[ids >= 0].tolist(), weights[ids >= 0].tolist())) == want
    refuses("weight_floor: only sparse results take a weight floor", seqpool.Dispatcher, 4, embed="mean",
            weight_floor=0.5)
    refuses("top_k: must be at least 1", seqpool.pool, by_column, hidden, [2], params=seqpool.PoolingParams(top_k=0))
    refuses("token_embed: head: a sparse result weighs each row with the head's last dense layer", seqpool.Dispatcher, 4,
            token_embed="all", result_dtype="sparse")
    refuses('"sparse"', seqpool.Dispatcher, 4, embed="mean", result_dtype="float64")


@pytest.mark.parametrize("one_step", [False, True])
def test_bge_m3s_three_outputs_as_flag_embedding_computes_them(one_step):
    # BGE-M3 from Python: the dense CLS embedding, the sparse weights and the ColBERT vectors of each prompt, from
    # a dispatcher each over the same hidden states, or from one MultiPooler step (planned and uploaded once), in
    # two steps (the second prompt chunked), against FlagEmbedding's BGEM3FlagModel maths in numpy. Ids are
    # XLM-RoBERTa's: CLS 0, PAD 1, EOS 2, UNK 3.
    rng = np.random.default_rng(34)
    hidden_size, special = 16, [0, 1, 2, 3]
    prompts = [np.array([0, 9, 5, 9, 3, 2]), np.array([0, 7, 8, 7, 7, 6, 2])]
    rows = [rng.normal(size=(len(ids), hidden_size)).astype(np.float32) for ids in prompts]
    sparse_weight = (rng.normal(size=(1, hidden_size)) / 4).astype(np.float32)
    colbert_weight = (rng.normal(size=(hidden_size, hidden_size)) / 4).astype(np.float32)
    colbert_bias = rng.normal(size=hidden_size).astype(np.float32)
    outputs = [  # each a Part's keywords, and its filters
        ({"method": "cls"}, {}),
        ({"method": "all", "task": "token_classify", "result_dtype": "sparse", "problem": "regression",
          "classifier": seqpool.Dense(sparse_weight, np.array([0.1], np.float32), activation="relu")},
         {"drop_token_ids": special}),
        ({"method": "all", "projector": colbert_weight, "projector_bias": colbert_bias}, {"drop_first": True}),
    ]
    m3 = seqpool.MultiPooler(hidden_size, [seqpool.Part(**part, **filters) for part, filters in outputs])
    alone = [(seqpool.pooler(hidden_size, **part), seqpool.PoolingParams(**filters)) for part, filters in outputs]
    steps = [  # (requests, rows scheduled, rows computed before, hidden states)
        ([0, 1], [6, 4], [0, 0], np.concatenate([rows[0], rows[1][:4]])),
        ([1], [3], [4], rows[1][4:]),
    ]
    found = [[], [], []]
    for requests, scheduled, computed, hidden in steps:
        step = dict(prompt_lens=[len(prompts[r]) for r in requests], num_scheduled=scheduled, num_computed=computed,
                    ids=requests, token_ids=[prompts[r] for r in requests])
        if one_step:
            before = m3.audit()["uploads"]
            parts = seqpool.pool(m3, hidden, **step)
            assert m3.audit()["uploads"] == before + 1
        else:
            parts = [seqpool.pool(dispatcher, hidden, **step, params=params) for dispatcher, params in alone]
        for results, part in zip(found, parts):
            results.extend(result for result in part if result is not None)
    for p, (ids, h) in enumerate(zip(prompts, rows)):
        close(found[0][p], h[0] / np.linalg.norm(h[0]))  # dense_vecs: last_hidden_state[:, 0], normalised
        weights = np.maximum(h @ sparse_weight[0] + 0.1, 0)  # relu(sparse_linear(h))
        wanted = {}
        for token, weight in zip(ids.tolist(), weights.tolist()):  # _process_token_weights
            if token not in special and weight > 0 and weight > wanted.get(token, 0):
                wanted[token] = weight
        listed_ids, listed_weights = found[1][p]
        kept = listed_ids >= 0
        assert listed_ids[kept].tolist() == sorted(wanted)
        close(listed_weights[kept], [wanted[token] for token in sorted(wanted)])
        vectors = h[1:] @ colbert_weight.T + colbert_bias  # colbert_linear(last_hidden_state[:, 1:])
        close(found[2][p], vectors / np.linalg.norm(vectors, axis=1, keepdims=True))


def test_sparse_results_in_torch_tensors():
    torch = pytest.importorskip("torch")
    dispatcher = seqpool.Dispatcher(4, classify="max", problem="regression", result_dtype="sparse")
    hidden = torch.tensor([[0, 2, -1, 0.5], [1, 0, -2, 0.25]], dtype=torch.float32)
    (ids, weights), = seqpool.pool(dispatcher, hidden, [2])
    assert ids.dtype == torch.int32 and weights.dtype == torch.float32
    assert ids.tolist() == [0, 1, 3, -1] and weights.tolist() == [1, 2, 0.5, 0]


def test_quantized_results_are_stored_as_sentence_transformers_stores_them():
    # docs/TESTS.md case 29 (tests/cli/batches.py holds its values): MEAN on ranges and in sign bits; ALL's rows.
    rows, ranges = CASE_29_ROWS, CASE_29_RANGES
    raw = seqpool.PoolingParams(use_activation=False)
    for dtype, (numpy_type, values, row_values) in CASE_29.items():
        ranged = {"ranges": ranges} if dtype in ("int8", "uint8") else {}
        dispatcher = seqpool.Dispatcher(12, embed="mean", token_embed="all", result_dtype=dtype, **ranged)
        assert dispatcher.result_dtype == dtype
        pooled, tokens = seqpool.pool(dispatcher, np.concatenate([rows, rows]), [2, 2],
                                      tasks=["embed", "token_embed"], params=raw)
        assert pooled.dtype == numpy_type and tokens.dtype == numpy_type
        np.testing.assert_array_equal(pooled, values)
        np.testing.assert_array_equal(tokens, row_values)
    # Each column on its own range: column 0 on [-1, 1] (a step of 2/255), whose 0.5 is level 191.25.
    narrow_first = ranges.copy()
    narrow_first[:, 0] = [-1, 1]
    for dtype, first in (("uint8", 191), ("int8", 63)):
        dispatcher = seqpool.Dispatcher(12, embed="mean", result_dtype=dtype, ranges=narrow_first)
        (pooled,) = seqpool.pool(dispatcher, rows, [2], params=raw)
        np.testing.assert_array_equal(pooled, [first] + CASE_29[dtype][1][1:])
    refuses("ranges: int8 results need calibration ranges", seqpool.Dispatcher, 12, embed="mean", result_dtype="int8")
    refuses("ranges: only int8 and uint8 results take calibration ranges", seqpool.Dispatcher, 12, embed="mean",
            result_dtype="binary", ranges=ranges)
    refuses("ranges: must have shape [2, D] (lower bounds, then upper bounds), got [12]", seqpool.Dispatcher, 12,
            embed="mean", result_dtype="uint8", ranges=ranges[0])
    refuses("ranges: must have shape [2, D] (lower bounds, then upper bounds), got 3 rows", seqpool.Dispatcher, 12,
            embed="mean", result_dtype="uint8", ranges=np.vstack([ranges, ranges[:1]]))
    refuses("each column needs lower < upper", seqpool.Dispatcher, 12, embed="mean", result_dtype="uint8",
            ranges=ranges[::-1].copy())
