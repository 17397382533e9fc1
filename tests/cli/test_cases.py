"""docs/TESTS.md cases 1-24 as recorded batches replayed by seqpool-run, on both spaces."""
import math
import pathlib
import re
import subprocess
import tempfile
import unittest

import numpy as np

from batches import CASE_29, CASE_29_RANGES, CASE_29_ROWS, TOOL, Batch, expected, request

H10 = np.arange(1, 11, dtype=np.float32).reshape(5, 2)  # rows [1,2] ... [9,10]
RAW = {"use_activation": False}
SPEC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "SPEC.md"


def listed_methods():
    """The built-in methods by kind, as `seqpool-run --methods` lists them (seqpool/method/builtin.hpp), and
    under "sequence concat" how the concats of sequence methods are named."""
    run = subprocess.run([TOOL, "--methods"], capture_output=True, text=True, check=True)
    lines = dict(line.split(": ", 1) for line in run.stdout.splitlines())
    return {kind: text if kind == "sequence concat" else text.split() for kind, text in lines.items()}


class MethodList(unittest.TestCase):
    def test_spec_lists_the_built_in_methods(self):
        # SPEC section 9 names every method `poolers` takes, in the registry's order.
        text = SPEC.read_text()
        listing = text[text.index("- `poolers` names a method per task:"):text.index("for `token_embed`/`token_classify`")]
        sequence, token = listing.split("for `embed`/`classify`;")
        names = listed_methods()
        self.assertEqual(re.findall(r"`(\w+)`", sequence.split(":", 1)[1]), names["sequence"])
        self.assertEqual(re.findall(r"`(\w+)`", token), names["token"])
        # And how a concat of them is named, in the words seqpool-run lists.
        self.assertIn(names["sequence concat"], " ".join(sequence.split()))


class Cases:
    space = "host"

    def replay(self, batch):
        run = batch.run(self.space)
        self.assertEqual(run.returncode, 0, run.stderr)
        batch.check_sync_contract(self)
        return batch

    def whole(self, method, hidden, lengths, dtype="float32"):
        task = "token_embed" if method in ("all", "step") else "embed"
        batch = Batch(hidden.shape[1], {task: method}, dtype=dtype)
        batch.step(hidden, [request(f"r{i}", task, n, **RAW) for i, n in enumerate(lengths)])
        self.replay(batch)
        return [batch.result(f"r{i}") for i in range(len(lengths))]

    def test_case_1_to_3_cls_last_mean(self):
        for method, rows in (("cls", [[1, 2], [5, 6]]), ("last", [[3, 4], [9, 10]]), ("mean", [[2, 3], [7, 8]])):
            with self.subTest(method):
                first, second = self.whole(method, H10, [2, 3])
                np.testing.assert_array_equal(first, rows[0])
                np.testing.assert_array_equal(second, rows[1])
                self.assertEqual(first.dtype, np.float32)

    def test_case_4_max(self):
        first, second = self.whole("max", np.array([[1, -5], [3, -4], [0, 9]], np.float32), [2, 1])
        np.testing.assert_array_equal(first, [3, -4])
        np.testing.assert_array_equal(second, [0, 9])

    def test_case_23_weighted_mean(self):
        # ([6, 0] + 2·[0, 3] + 3·[2, 1]) / 6, whole and in chunks of 2 and 1 rows.
        rows = np.array([[6, 0], [0, 3], [2, 1]], np.float32)
        np.testing.assert_array_equal(self.whole("weighted_mean", rows, [3])[0], [2, 1.5])
        batch = Batch(2, {"embed": "weighted_mean"})
        batch.step(rows[:2], [request("w", "embed", 3, 2, **RAW)])
        batch.step(rows[2:], [request("w", "embed", 3, 1, 2, **RAW)])
        self.replay(batch)
        np.testing.assert_array_equal(batch.result("w"), [2, 1.5])

    def test_case_35_concat_named(self):
        # Case 1's five rows as one prompt, whole and in chunks 1+3+1: CLS ‖ MAX ‖ MEAN in
        # sentence-transformers' order, and MAX ‖ MEAN after an instruction of two rows.
        for method, instruction_len, want in (("cls+max+mean", 0, [1, 2, 9, 10, 5, 6]),
                                              ("max+mean", 2, [9, 10, 7, 8]),
                                              ("mean+last", 0, [5, 6, 9, 10])):
            with self.subTest(method):
                batch = Batch(2, {"embed": method})
                batch.step(H10, [request("w", "embed", 5, instruction_len=instruction_len, **RAW)])
                for size, done in ((1, 0), (3, 1), (1, 4)):
                    batch.step(H10[done:done + size],
                               [request("c", "embed", 5, size, done, instruction_len=instruction_len, **RAW)])
                self.replay(batch)
                np.testing.assert_array_equal(batch.result("w"), want)
                np.testing.assert_array_equal(batch.result("c"), want)

    def test_case_27_instruction(self):
        # Case 1's five rows as one prompt whose first two rows are an instruction, whole and in chunks 1+3+1.
        for method, want in (("mean", [7, 8]), ("max", [9, 10]), ("cls", [1, 2]), ("last", [9, 10])):
            with self.subTest(method):
                batch = Batch(2, {"embed": method})
                batch.step(H10, [request("i", "embed", 5, instruction_len=2, **RAW)])
                batch.step(H10[:1], [request("c", "embed", 5, 1, instruction_len=2, **RAW)])
                batch.step(H10[1:4], [request("c", "embed", 5, 3, 1, instruction_len=2, **RAW)])
                batch.step(H10[4:], [request("c", "embed", 5, 1, 4, instruction_len=2, **RAW)])
                self.replay(batch)
                np.testing.assert_array_equal(batch.result("i"), want)
                np.testing.assert_array_equal(batch.result("c"), want)
        # An instruction of one row: ([3,4] + [5,6] + [7,8] + [9,10]) / √4.
        batch = Batch(2, {"embed": "mean_sqrt_len"})
        batch.step(H10, [request("s", "embed", 5, instruction_len=1, **RAW)])
        self.replay(batch)
        np.testing.assert_array_equal(batch.result("s"), [12, 14])

    def test_case_28_token_filters(self):
        # Case 1's five rows as one prompt of ids [101, 7, 1012, 7, 102], whole and in chunks 1+3+1.
        ids = [101, 7, 1012, 7, 102]
        for method, params, want in (("all", {"drop_first": True, "drop_last": True}, H10[1:4]),
                                     ("all", {"drop_token_ids": [1012]}, H10[[0, 1, 3, 4]]),
                                     ("all", {"drop_first": True, "drop_token_ids": [7, 1012]}, H10[4:]),
                                     ("step", {"step_tag_id": 7, "drop_last": True}, H10[[1, 3]]),
                                     ("step", {"step_tag_id": 7, "drop_token_ids": [7]}, H10[:0])):
            with self.subTest(method=method, params=params):
                batch = Batch(2, {"token_embed": method})
                batch.step(H10, [request("w", "token_embed", 5, token_ids=ids, **params, **RAW)])
                batch.step(H10[:1], [request("c", "token_embed", 5, 1, token_ids=ids, **params, **RAW)])
                batch.step(H10[1:4], [request("c", "token_embed", 5, 3, 1, token_ids=ids, **params, **RAW)])
                batch.step(H10[4:], [request("c", "token_embed", 5, 1, 4, token_ids=ids, **params, **RAW)])
                self.replay(batch)
                np.testing.assert_array_equal(batch.result("w"), want.reshape(-1, 2))
                np.testing.assert_array_equal(batch.result("c"), want.reshape(-1, 2))

    def test_case_26_mean_sqrt_len(self):
        # [16, 20] / √4, whole and in chunks of 1 and 3 rows; one row is itself.
        rows = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32)
        np.testing.assert_array_equal(self.whole("mean_sqrt_len", rows, [4])[0], [8, 10])
        np.testing.assert_array_equal(self.whole("mean_sqrt_len", np.array([[3, -4]], np.float32), [1])[0], [3, -4])
        batch = Batch(2, {"embed": "mean_sqrt_len"})
        batch.step(rows[:1], [request("s", "embed", 4, 1, **RAW)])
        batch.step(rows[1:], [request("s", "embed", 4, 3, 1, **RAW)])
        self.replay(batch)
        np.testing.assert_array_equal(batch.result("s"), [8, 10])

    def test_case_5_mean_of_one_and_of_equal_rows(self):
        np.testing.assert_array_equal(self.whole("mean", np.array([[0.25, -3]], np.float32), [1])[0], [0.25, -3])
        np.testing.assert_allclose(self.whole("mean", np.full((3, 2), 0.1, np.float32), [3])[0], [0.1, 0.1], rtol=1e-6)

    def test_case_6_empty_step(self):
        batch = Batch(4, {"embed": "mean"})
        batch.step(np.zeros((0, 4), np.float32), [])
        self.replay(batch)
        self.assertEqual(sorted(p.name for p in batch.out.iterdir()), ["audit.jsonl"])

    def test_case_7_half_and_bfloat16(self):
        for dtype in ("float16", "bfloat16"):
            with self.subTest(dtype):
                result = self.whole("mean", np.array([[1, 2], [3, 4]], np.float32), [2], dtype)[0]
                np.testing.assert_array_equal(result, [2, 3])

    def test_padded_steps(self):
        # [B, S, H] with NaN padding on either side, through the dispatcher: the padding is never read.
        for side in ("right", "left"):
            with self.subTest(side):
                batch = Batch(2, {"embed": "mean", "token_embed": "all"})
                batch.padded_step([H10[:2], H10[2:]], [request("a", "embed", 2, **RAW),
                                                       request("b", "token_embed", 3, **RAW)], side, length=4)
                self.replay(batch)
                np.testing.assert_array_equal(batch.result("a"), [2, 3])
                np.testing.assert_array_equal(batch.result("b"), H10[2:])

    def test_chunks_of_one_request_may_switch_layout(self):
        # The layout belongs to a step: the state holds floats, whatever layout a step's rows had. A
        # request chunked over a packed then a padded step, or the reverse, pools as it does whole.
        rng = np.random.default_rng(26)
        prompt = rng.normal(size=(5, 3)).astype(np.float32)
        other = rng.normal(size=(4, 3)).astype(np.float32)  # a second sequence, so that padding shows
        for task, method in (("embed", "cls"), ("embed", "last"), ("embed", "mean"), ("embed", "max"),
                             ("embed", "weighted_mean"), ("token_embed", "all")):
            for first_padded in (False, True):
                for side in ("right", "left"):
                    with self.subTest(method=method, first_padded=first_padded, side=side):
                        batch = Batch(3, {task: method})
                        for done, size in ((0, 2), (2, 3)):
                            chunk = request("p", task, 5, size, done, **RAW)
                            neighbour = request(f"n{done}", task, 4, **RAW)
                            if first_padded == (done == 0):
                                batch.padded_step([prompt[done:done + size], other], [chunk, neighbour], side)
                            else:
                                batch.step(np.concatenate([prompt[done:done + size], other]), [chunk, neighbour])
                        batch.step(prompt, [request("whole", task, 5, **RAW)])
                        self.replay(batch)
                        np.testing.assert_allclose(batch.result("p"), batch.result("whole"), rtol=1e-5, atol=1e-6)

    def test_case_7_bfloat16_bits_saved_as_int16(self):
        # tensor.view(torch.int16) on PyTorch without uint16, with the batch saying bfloat16.
        batch = Batch(2, {"embed": "mean"}, dtype="bfloat16")
        batch.spec["hidden_dtype"] = "bfloat16"
        batch.step(np.array([[1, 2], [3, 4]], np.float32), [request("r", "embed", 2, **RAW)])
        step_file = batch.folder / batch.spec["steps"][0]["hidden_states"]
        np.save(step_file, np.load(step_file).view("<i2"))
        self.replay(batch)
        np.testing.assert_array_equal(batch.result("r"), [2, 3])

    def test_case_24_16_bit_results(self):
        # Halfway cases round to even; bfloat16 results are saved as their bits (<u2), float16 ones as <f2.
        b, h = 2.0**-7, 2.0**-10
        batch = Batch(2, {"embed": "mean"})
        batch.spec["result_dtype"] = "bfloat16"
        batch.step(np.array([[1, 1], [1 + b, 1 + 3 * b]], np.float32), [request("r", "embed", 2, **RAW)])
        self.replay(batch)
        self.assertEqual(batch.result("r").dtype, np.uint16)
        self.assertEqual([hex(bits) for bits in batch.result("r")], ["0x3f80", "0x3f82"])

        batch = Batch(2, {"embed": "mean", "token_embed": "all"})
        batch.spec["result_dtype"] = "float16"
        batch.step(np.array([[1, 1], [1 + h, 1 + 3 * h], [65519, 65520]], np.float32),
                   [request("m", "embed", 2, **RAW), request("a", "token_embed", 1, **RAW)])
        self.replay(batch)
        self.assertEqual(batch.result("m").dtype, np.float16)
        np.testing.assert_array_equal(batch.result("m").view(np.uint16), [0x3C00, 0x3C02])
        np.testing.assert_array_equal(batch.result("a").view(np.uint16), [[0x7BFF, 0x7C00]])

    def test_case_29_quantized_results(self):
        # MEAN of two rows on ranges of a step of 1/64, and in sign bits; ALL's rows (batches.CASE_29).
        for dtype, (numpy_type, values, rows_values) in CASE_29.items():
            with self.subTest(dtype=dtype):
                batch = Batch(12, {"embed": "mean", "token_embed": "all"})
                batch.spec["result_dtype"] = dtype
                if dtype in ("int8", "uint8"):
                    np.save(batch.folder / "ranges.npy", CASE_29_RANGES)
                    batch.spec["ranges"] = "ranges.npy"
                batch.step(np.concatenate([CASE_29_ROWS, CASE_29_ROWS]),
                           [request("m", "embed", 2, **RAW), request("a", "token_embed", 2, **RAW)])
                self.replay(batch)
                self.assertEqual(batch.result("m").dtype, numpy_type)
                np.testing.assert_array_equal(batch.result("m"), values)
                self.assertEqual(batch.result("a").dtype, numpy_type)
                np.testing.assert_array_equal(batch.result("a"), rows_values)

    def sparse_batch(self, poolers, floor=None, classifier=None):
        """A batch of sparse results through the regression head (and its classifier)."""
        batch = Batch(2 if classifier else 4, poolers, classifier=classifier)
        batch.spec["result_dtype"] = "sparse"
        batch.spec.setdefault("classifier", {})["problem_type"] = "regression"
        if floor is not None:
            batch.spec["weight_floor"] = floor
        return batch

    def check_pairs(self, batch, request_id, pairs):
        result = batch.result(request_id)
        self.assertEqual(result.dtype.names, ("id", "weight"))
        self.assertEqual([(int(i), float(w)) for i, w in result], pairs)

    def test_case_32_sparse_token_weights(self):
        # w = relu(h0 - h1 - 0.5) of each row, the largest of each token id, ids above the floor; a whole,
        # a in chunks 2+3+1 beside b whole, and with top_k.
        ids_a, ids_b = [0, 7, 5, 7, 9, 2], [9, 9, 4]
        rows_a = np.array([[3, 0], [2, 0], [0, 1], [4, 0.5], [1, 0.25], [5, 0]], np.float32)
        rows_b = np.array([[1, 0], [2, 0], [0, 0]], np.float32)
        layer = ([[1, -1]], [-0.5], {"activation": "relu"})
        for floor, top_k, want_a, want_b in ((None, None, [(7, 3), (9, 0.25)], [(9, 1.5)]),
                                             (0.5, None, [(7, 3)], [(9, 1.5)]),
                                             (-1, None, [(5, 0), (7, 3), (9, 0.25)], [(4, 0), (9, 1.5)]),
                                             (-1, 2, [(7, 3), (9, 0.25)], [(4, 0), (9, 1.5)])):
            with self.subTest(floor=floor, top_k=top_k):
                batch = self.sparse_batch({"token_classify": "all"}, floor, classifier=layer)
                params = {"drop_token_ids": [0, 2]} if top_k is None else {"drop_token_ids": [0, 2], "top_k": top_k}
                whole = [request("a", "token_classify", 6, token_ids=ids_a, **params),
                         request("b", "token_classify", 3, token_ids=ids_b, **params)]
                batch.step(np.concatenate([rows_a, rows_b]), whole)
                for begin, end in ((0, 2), (2, 5)):
                    batch.step(rows_a[begin:end], [request("c", "token_classify", 6, end - begin, begin,
                                                           token_ids=ids_a, **params)])
                batch.step(np.concatenate([rows_a[5:], rows_b]),
                           [request("c", "token_classify", 6, 1, 5, token_ids=ids_a, **params),
                            request("d", "token_classify", 3, token_ids=ids_b, **params)])
                self.replay(batch)
                for request_id, want in (("a", want_a), ("b", want_b), ("c", want_a), ("d", want_b)):
                    self.check_pairs(batch, request_id, want)

    def test_case_33_sparse_columns(self):
        # MAX of two rows, [1, 2, -1, 0.5], listed by column above 0; top_k 2; whole and in chunks 1+1.
        rows = np.array([[0, 2, -1, 0.5], [1, 0, -2, 0.25]], np.float32)
        for params, want in (({}, [(0, 1), (1, 2), (3, 0.5)]), ({"top_k": 2}, [(0, 1), (1, 2)])):
            with self.subTest(params=params):
                batch = self.sparse_batch({"classify": "max"})
                batch.step(rows, [request("w", "classify", 2, **params)])
                batch.step(rows[:1], [request("c", "classify", 2, 1, **params)])
                batch.step(rows[1:], [request("c", "classify", 2, 1, 1, **params)])
                self.replay(batch)
                self.check_pairs(batch, "w", want)
                self.check_pairs(batch, "c", want)

    def test_case_25_spans(self):
        # One prompt with spans [0, 2) and [2, 5) gives case 3's two means as two rows, whole and in chunks 1+3+1.
        rows = H10
        batch = Batch(2, {"embed": "mean"})
        batch.step(rows, [request("s", "embed", 5, spans=[[0, 2], [2, 5]], **RAW)])
        self.replay(batch)
        np.testing.assert_array_equal(batch.result("s"), [[2, 3], [7, 8]])
        batch = Batch(2, {"embed": "mean"})
        spans = [[0, 2], [2, 5]]
        batch.step(rows[:1], [request("s", "embed", 5, 1, spans=spans, **RAW)])
        batch.step(rows[1:4], [request("s", "embed", 5, 3, 1, spans=spans, **RAW)])
        batch.step(rows[4:], [request("s", "embed", 5, 1, 4, spans=spans, **RAW)])
        self.replay(batch)
        np.testing.assert_array_equal(batch.result("s"), [[2, 3], [7, 8]])

    def test_an_empty_list_of_spans_is_no_spans(self):
        # "spans": [] is the C++ API's empty params.spans: the whole prompt, one row, shape [D], whole or chunked.
        batch = Batch(2, {"embed": "mean"})
        batch.step(np.concatenate([H10, H10]), [request("listed", "embed", 5, spans=[], **RAW),
                                                 request("omitted", "embed", 5, **RAW)])
        batch.step(H10[:2], [request("chunked", "embed", 5, 2, spans=[], **RAW)])
        batch.step(H10[2:], [request("chunked", "embed", 5, 3, 2, spans=[], **RAW)])
        self.replay(batch)
        for name in ("listed", "omitted", "chunked"):
            self.assertEqual(batch.result(name).shape, (2,), name)
            np.testing.assert_array_equal(batch.result(name), [5, 6], err_msg=name)

    def test_case_8_all(self):
        first, second = self.whole("all", H10, [2, 3])
        np.testing.assert_array_equal(first, H10[:2])
        np.testing.assert_array_equal(second, H10[2:])

    def test_case_9_all_chunked(self):
        batch = Batch(1, {"token_embed": "all"})
        batch.step([[1], [2], [9]], [request("p", "token_embed", 4, 2, **RAW), request("q", "token_embed", 1, **RAW)])
        batch.step([[3], [4]], [request("p", "token_embed", 4, 2, num_computed=2, **RAW)])
        self.replay(batch)
        np.testing.assert_array_equal(batch.result("p"), [[1], [2], [3], [4]])
        np.testing.assert_array_equal(batch.result("q"), [[9]])

    def test_case_10_step(self):
        hidden = np.arange(1, 13, dtype=np.float32).reshape(4, 3)
        ids = [10, 99, 10, 20]
        variants = {
            "tag": ({"step_tag_id": 10}, [[1, 2, 3], [7, 8, 9]]),
            "tag_columns": ({"step_tag_id": 10, "returned_token_ids": [0, 2]}, [[1, 3], [7, 9]]),
            "columns": ({"returned_token_ids": [0, 2]}, hidden[:, [0, 2]]),
            "no_match": ({"step_tag_id": 5}, np.zeros((0, 3))),
            "neither": ({}, hidden),
        }
        batch = Batch(3, {"token_embed": "step"})
        for name, (params, _) in variants.items():
            batch.step(hidden, [request(name, "token_embed", 4, token_ids=ids, use_activation=False, **params)])
        self.replay(batch)
        for name, (_, rows) in variants.items():
            with self.subTest(name):
                result = batch.result(name)
                self.assertEqual(result.shape, np.asarray(rows).shape)
                np.testing.assert_array_equal(result, rows)

    def test_case_11_chunked_equals_one_shot(self):
        prompt = np.array([[3, -1], [4, 1], [-5, 9], [2, 6], [5, -3]], np.float32)
        for method in ("cls", "mean", "max", "last"):
            for chunks in ([2, 3], [1, 1, 3]):
                with self.subTest(method=method, chunks=chunks):
                    batch = Batch(2, {"embed": method})
                    done = 0
                    for size in chunks:
                        batch.step(prompt[done:done + size], [request("p", "embed", 5, size, done, **RAW)])
                        done += size
                    batch.step(prompt, [request("whole", "embed", 5, **RAW)])
                    self.replay(batch)
                    np.testing.assert_allclose(batch.result("p"), batch.result("whole"), rtol=1e-6)

    def test_cases_12_to_14_embed_head(self):
        batch = Batch(3, {"embed": "cls"})
        row = [3, 4, 12]
        batch.step([row, [0, 0, 0], row, row, row], [
            request("normalised", "embed", 1), request("zero", "embed", 1),
            request("truncated", "embed", 1, dimensions=2),
            request("raw", "embed", 1, use_activation=False),
            request("raw_truncated", "embed", 1, use_activation=False, dimensions=2)])
        self.replay(batch)
        np.testing.assert_allclose(batch.result("normalised"), np.array(row) / 13, rtol=1e-6)
        np.testing.assert_array_equal(batch.result("zero"), [0, 0, 0])
        np.testing.assert_allclose(batch.result("truncated"), [0.6, 0.8], rtol=1e-6)
        np.testing.assert_array_equal(batch.result("raw"), row)
        np.testing.assert_array_equal(batch.result("raw_truncated"), [3, 4])

    def test_case_30_dense_stacks(self):
        # Each head's "layers", one after another, each output through its activation function.
        batch = Batch(2, {"embed": "cls", "token_embed": "all", "classify": "cls"})
        arrays = {"w0": [[1, 0], [0, 1], [1, 1]], "b0": [0, 0, -4], "w1": [[1, 1, 1], [2, 0, -1]], "b1": [1, 0],
                  "identity": [[1, 0], [0, 1]], "difference": [[1, -1]]}
        for name, values in arrays.items():
            np.save(batch.folder / f"{name}.npy", np.asarray(values, "<f4"))
        batch.spec["projector"] = {"layers": [{"weight": "w0.npy", "bias": "b0.npy", "activation": "relu"},
                                              {"weight": "w1.npy", "bias": "b1.npy", "activation": "identity"}]}
        batch.spec["classifier"] = {"layers": [{"weight": "identity.npy", "activation": "tanh"},
                                               {"weight": "difference.npy"}], "problem_type": "single_label"}
        batch.step([[1, 2], [1, 2], [3, -1], [1, 2], [1, 2]], [
            request("e", "embed", 1, **RAW), request("all", "token_embed", 2, **RAW),
            request("scored", "classify", 1, **RAW), request("normalised", "embed", 1)])
        self.replay(batch)
        np.testing.assert_array_equal(batch.result("e"), [4, 2])
        np.testing.assert_array_equal(batch.result("all"), [[4, 2], [4, 6]])
        np.testing.assert_allclose(batch.result("scored"), [np.tanh(1) - np.tanh(2)], rtol=1e-6)
        np.testing.assert_allclose(batch.result("normalised"), np.array([4, 2]) / np.sqrt(20), rtol=1e-6)

        gelu = Batch(2, {"embed": "cls"})
        np.save(gelu.folder / "identity.npy", np.eye(2, dtype="<f4"))
        gelu.spec["projector"] = {"weight": "identity.npy", "activation": "gelu"}
        gelu.step([[1, 2]], [request("g", "embed", 1, **RAW)])
        self.replay(gelu)
        phi = np.array([0.5 * (1 + math.erf(x / math.sqrt(2))) for x in (1, 2)])
        np.testing.assert_allclose(gelu.result("g"), np.array([1, 2]) * phi, rtol=1e-6)

    def classify(self, logits, problem_type="single_label", use_activation=True, **platt):
        logits = np.atleast_2d(np.asarray(logits, np.float32))
        extra = {"problem_type": problem_type, **platt}
        batch = Batch(logits.shape[1], {"classify": "cls"}, classifier=(None, None, extra))
        batch.step(logits, [request("c", "classify", 1, use_activation=use_activation)])
        self.replay(batch)
        return batch.result("c")

    def test_cases_15_to_19_classify_head(self):
        np.testing.assert_allclose(self.classify([0]), [0.5], rtol=1e-6)
        np.testing.assert_allclose(self.classify([100]), [1], atol=1e-4)
        np.testing.assert_allclose(self.classify([-100]), [0], atol=1e-4)
        np.testing.assert_allclose(self.classify([0, 0, 0, 0]), [0.25] * 4, rtol=1e-6)
        self.assertAlmostEqual(float(self.classify([1, -2, 3, 0.5]).sum()), 1.0, places=6)
        np.testing.assert_allclose(self.classify([3, -1], use_activation=False, logit_mean=2), [1, -3], rtol=1e-6)
        np.testing.assert_allclose(self.classify([3, -1], use_activation=False, logit_sigma=0.5), [6, -2], rtol=1e-6)
        np.testing.assert_allclose(self.classify([3, -1], use_activation=False, logit_mean=1, logit_sigma=2), [1, -1])
        np.testing.assert_allclose(self.classify([3], logit_mean=1, logit_sigma=2), [1 / (1 + np.exp(-1))], rtol=1e-6)
        np.testing.assert_allclose(self.classify([2.5, -7], "regression"), [2.5, -7])
        np.testing.assert_allclose(self.classify([0, 2], "multi_label"), 1 / (1 + np.exp([0, -2])), rtol=1e-6)

    def test_platt_scaling_without_a_classifier(self):
        # The classify head scales the logits it is given (SPEC section 4): with no classifier weight the
        # pooled rows are the logits, for token_classify's rows as for classify's one row.
        rows = np.array([[0.5, -1, 2], [3, 0, -2]], np.float32)
        mean, sigma = 0.5, 2.0
        scaled = (rows.astype(np.float64) - mean) / sigma
        softmax = np.exp(scaled - scaled.max(axis=1, keepdims=True))
        activated = {"single_label": softmax / softmax.sum(axis=1, keepdims=True),
                     "multi_label": 1 / (1 + np.exp(-scaled))}
        for problem_type, want in activated.items():
            with self.subTest(problem_type):
                platt = {"logit_mean": mean, "logit_sigma": sigma, "problem_type": problem_type}
                batch = Batch(3, {"classify": "last", "token_classify": "all"}, classifier=(None, None, platt))
                batch.step(np.concatenate([rows, rows]), [request("t", "token_classify", 2),
                                                          request("c", "classify", 2)])
                self.replay(batch)
                np.testing.assert_allclose(batch.result("t"), want, rtol=1e-6)
                np.testing.assert_allclose(batch.result("c"), want[-1], rtol=1e-6)

    def test_every_method_name_serves_its_tasks(self):
        # The built-in methods, as seqpool-run lists them, each accepted by the reader and run by the pooler it names.
        names = listed_methods()
        for poolers in ([{"embed": name, "classify": name} for name in names["sequence"] + ["cls+max", "max+mean+last"]]
                        + [{"token_embed": name, "token_classify": name} for name in names["token"]]):
            with self.subTest(poolers):
                batch = Batch(2, poolers)
                batch.step(H10[:4], [request(task, task, 2, token_ids=[1, 2], **RAW) for task in poolers])
                self.replay(batch)
                for task in poolers:
                    self.assertTrue((batch.out / f"{task}.npy").exists(), task)

    def test_cases_20_and_21_mixed_tasks(self):
        rng = np.random.default_rng(20)
        weight, bias = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=3).astype(np.float32)
        batch = Batch(4, {"embed": "mean", "classify": "last", "token_embed": "all", "token_classify": "all"},
                      classifier=(weight, bias))
        lengths = {"a": ("embed", 2), "b": ("embed", 1), "c": ("token_embed", 3), "d": ("embed", 2),
                   "e": ("classify", 3), "f": ("token_classify", 2)}
        hidden = rng.normal(size=(13, 4)).astype(np.float32)
        batch.step(hidden, [request(name, task, n) for name, (task, n) in lengths.items()])
        self.replay(batch)
        row = 0
        for name, (task, n) in lengths.items():
            method = {"embed": "mean", "classify": "last"}.get(task, "all")
            layer = {"classifier": (weight, bias)} if "classify" in task else {}
            want = expected(method, task, hidden[row:row + n], {}, **layer)
            np.testing.assert_allclose(batch.result(name), want, rtol=1e-5, atol=1e-6, err_msg=name)
            row += n

    def test_case_22_task_without_pooler(self):
        batch = Batch(1, {"embed": "mean"})
        batch.step([[1], [2]], [request("c", "embed", 4, 2, **RAW)])
        batch.step([[3], [4], [5]], [request("c", "embed", 4, 2, 2, **RAW), request("x", "classify", 1)])
        run = batch.run(self.space)
        self.assertEqual(run.returncode, 2)
        self.assertEqual(run.stderr, 'seqpool: error: step 1: request 1 (id "x"): task: classify has no pooler in the '
                                     'dispatch table\n')
        self.assertFalse((batch.out / "c.npy").exists())

    def test_case_34_parts(self):
        # BGE-M3's dense CLS embedding, sparse weights and ColBERT vectors of one prompt, each a part's
        # output in its folder: whole, and in chunks 2+2+1 beside a second request.
        ids = [0, 7, 9, 7, 2]
        rows = np.array([[3, 4], [0, 1], [1, 1], [2, 0], [0, 3]], np.float32)
        half = math.sqrt(0.5)
        batch = Batch(2, None)
        batch.parts({"name": "dense", "task": "embed", "method": "cls"},
                    {"name": "sparse", "task": "token_classify", "method": "all", "result_dtype": "sparse",
                     "classifier": ([[1, -1]], [0.5], {"activation": "relu", "problem_type": "regression"}),
                     "drop_token_ids": [0, 2]},
                    {"name": "colbert", "task": "token_embed", "method": "all",
                     "projector": ([[1, 1], [1, -1]], None), "drop_first": True})
        batch.step(rows, [request("q", "embed", 5, token_ids=ids)])
        done = 0
        for size in (2, 2, 1):
            batch.step(np.concatenate([rows[done:done + size], rows[:1]]),
                       [request("c", "embed", 5, size, done, token_ids=ids),
                        request(f"one{done}", "token_embed", 1, token_ids=ids[:1])])
            done += size
        self.replay(batch)
        for request_id in ("q", "c"):
            np.testing.assert_allclose(batch.result(request_id, "dense"), [0.6, 0.8], rtol=1e-6)
            pairs = batch.result(request_id, "sparse")
            self.assertEqual([(int(i), float(w)) for i, w in pairs], [(7, 2.5), (9, 0.5)])
            np.testing.assert_allclose(batch.result(request_id, "colbert"),
                                       [[half, -half], [1, 0], [half, half], [half, -half]], rtol=1e-6)
        # A one-row prompt: its CLS row, no sparse weight (id 0 dropped), no ColBERT vector (the first dropped).
        np.testing.assert_allclose(batch.result("one0", "dense"), [0.6, 0.8], rtol=1e-6)
        self.assertEqual(len(batch.result("one0", "sparse")), 0)
        self.assertEqual(batch.result("one0", "colbert").shape, (0, 2))
        self.assertEqual(sorted(p.name for p in (batch.out / "dense").iterdir()),
                         ["c.npy", "one0.npy", "one2.npy", "one4.npy", "q.npy"])

    def test_parts_equal_their_poolers_alone(self):
        # Parts of several result types and methods: each part's results those of a batch that pools
        # every request with that part's pooler alone (its filters as the requests' own knobs).
        rng = np.random.default_rng(34)
        hidden = rng.normal(size=(9, 6)).astype(np.float32)
        ids = [[1, 4, 2, 4], [3, 1, 1, 2, 4]]
        weight = rng.normal(size=(3, 6)).astype(np.float32)
        parts = [({"name": "concat", "task": "embed", "method": "cls+mean", "result_dtype": "float16"}, {}),
                 ({"name": "bits", "task": "token_embed", "method": "all", "result_dtype": "binary",
                   "drop_last": True}, {"drop_last": True}),
                 ({"name": "scores", "task": "classify", "method": "mean_sqrt_len",
                   "classifier": (weight, None, {"problem_type": "multi_label"})}, {}),
                 ({"name": "tokens", "task": "token_embed", "method": "all", "result_dtype": "bfloat16",
                   "projector": (weight, None), "drop_token_ids": [2]}, {"drop_token_ids": [2]})]
        batch = Batch(6, None)
        batch.parts(*(part for part, _ in parts))
        batch.step(hidden, [request("a", "embed", 4, token_ids=ids[0]), request("b", "embed", 5, token_ids=ids[1])])
        self.replay(batch)
        for part, knobs in parts:
            with self.subTest(part["name"]):
                alone = Batch(6, {part["task"]: part["method"]})
                alone.spec["result_dtype"] = part.get("result_dtype", "float32")
                for head in ("projector", "classifier"):
                    if head in part:
                        weight_of, bias_of, *extra = part[head]
                        alone.spec[head] = alone.layer(head, weight_of, bias_of)
                        if extra:
                            alone.spec[head].update(extra[0])
                alone.step(hidden, [request("a", part["task"], 4, token_ids=ids[0], **knobs),
                                    request("b", part["task"], 5, token_ids=ids[1], **knobs)])
                self.replay(alone)
                for request_id in ("a", "b"):
                    got, want = batch.result(request_id, part["name"]), alone.result(request_id)
                    self.assertEqual(got.dtype, want.dtype)
                    np.testing.assert_array_equal(got, want)

    def test_the_example_batch_replays(self):
        example = pathlib.Path(__file__).resolve().parents[2] / "examples" / "data" / "batch.json"
        directory = tempfile.TemporaryDirectory(prefix="seqpool-example-")
        self.addCleanup(directory.cleanup)
        out = pathlib.Path(directory.name)
        run = subprocess.run([TOOL, str(example), "--out", str(out), "--space", self.space, "--audit"],
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(sorted(p.name for p in out.iterdir()),
                         ["audit.jsonl", "doc-1.npy", "pair-1.npy", "pair-2.npy", "query-1.npy", "reward-1.npy",
                          "tokens-1.npy"])
        self.assertEqual(np.load(out / "doc-1.npy").shape, (4,))
        self.assertEqual(np.load(out / "reward-1.npy").shape, (3, 2))
        self.assertEqual(len((out / "audit.jsonl").read_text().splitlines()), 3)


class HostSpace(Cases, unittest.TestCase):
    space = "host"


class DeviceSpace(Cases, unittest.TestCase):
    space = "device"


if __name__ == "__main__":
    unittest.main()
