"""Every kind of bad input seqpool-run must refuse: exit status 2, one line on standard
error that begins `seqpool: error:` and names the step, the request and the field;
earlier steps' outputs stay, the failing step writes nothing, later steps never run."""
import json
import pathlib
import tempfile
import unittest

import numpy as np

from batches import Batch, request

H = 4
ROWS = np.arange(12, dtype=np.float32).reshape(3, H)


def good_step(batch, name):
    batch.step(ROWS[:1], [request(name, "embed", 1)])


class Errors(unittest.TestCase):
    def check_refused(self, batch, message, written=(), space="host"):
        run = batch.run(space)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertTrue(run.stderr.startswith("seqpool: error: "), run.stderr)
        self.assertEqual(run.stderr.count("\n"), 1, run.stderr)
        self.assertIn(message, run.stderr)
        files = sorted(p.name for p in batch.out.iterdir()) if batch.out.exists() else []
        self.assertEqual([f for f in files if f != "audit.jsonl"], sorted(f"{name}.npy" for name in written))

    def step_error(self, requests, message, hidden=ROWS, poolers=None, **batch_args):
        """A batch whose step 1 is bad, between two good steps."""
        for space in ("host", "device"):
            with self.subTest(space=space):
                batch = Batch(H, poolers or {"embed": "mean", "classify": "cls", "token_classify": "step"},
                              **batch_args)
                good_step(batch, "before")
                batch.step(hidden, requests)
                good_step(batch, "after")
                self.check_refused(batch, "step 1: " + message, written=["before"], space=space)

    # SPEC section 8

    def test_rows_do_not_add_up(self):
        self.step_error([request("a", "embed", 2)], "num_scheduled: the requests schedule 2 rows but hidden_states has 3")

    def test_chunk_past_the_prompt(self):
        self.step_error([request("a", "embed", 3, 3, 1)],
                        'request 0 (id "a"): num_computed + num_scheduled: 1 + 3 exceeds prompt_len 3')

    def test_nothing_scheduled(self):
        self.step_error([request("a", "embed", 3, 3), request("b", "embed", 2, 0)],
                        'request 1 (id "b"): num_scheduled: must be at least 1, got 0')

    def test_empty_prompt(self):
        self.step_error([request("a", "embed", 0, 3)], 'request 0 (id "a"): prompt_len: must be at least 1, got 0')

    def test_negative_progress(self):
        self.step_error([request("a", "embed", 3, 3, -1)], 'request 0 (id "a"): num_computed: must not be negative')

    def test_token_ids_missing_or_short(self):
        self.step_error([request("s", "token_classify", 3, step_tag_id=1)],
                        'request 0 (id "s"): prompt_token_ids: the method reads all 3 ids of the prompt, got 0')
        self.step_error([request("s", "token_classify", 3, token_ids=[1, 2], step_tag_id=1)],
                        'request 0 (id "s"): prompt_token_ids: the method reads all 3 ids of the prompt, got 2')

    def test_returned_column_outside_the_row(self):
        self.step_error([request("s", "token_classify", 3, token_ids=[1, 2, 3], returned_token_ids=[0, 4])],
                        'request 0 (id "s"): returned_token_ids: column 4 is outside [0, 4)')

    def test_spans(self):
        self.step_error([request("a", "embed", 3, spans=[[0, 2], [1, 3]])],
                        'request 0 (id "a"): spans: span 1 is [1, 3); spans must be non-empty, within '
                        '[0, prompt_len = 3), in order and not overlapping (the one before ends at 2)')
        for empty in ([2, 2], [2, 1]):  # "spans": [] is no spans (test_cases); a span [b, e) with b >= e is refused
            with self.subTest(empty):
                self.step_error([request("a", "embed", 3, spans=[[0, 1], empty])],
                                f'request 0 (id "a"): spans: span 1 is [{empty[0]}, {empty[1]}); spans must be '
                                'non-empty, within [0, prompt_len = 3), in order and not overlapping')

    def test_instruction(self):
        self.step_error([request("a", "embed", 3, instruction_len=3)],
                        'request 0 (id "a"): instruction_len: must be in [0, prompt_len = 3): at least one row '
                        'follows the instruction; got 3')
        self.step_error([request("a", "embed", 3, instruction_len=1, spans=[[0, 2]])],
                        'request 0 (id "a"): instruction_len: spans choose the rows a request pools: give spans or an '
                        'instruction_len, not both')
        self.step_error([request("a", "embed", 3, instruction_len=1)],
                        'request 0 (id "a"): instruction_len: weighted_mean does not leave out an instruction: give 0 '
                        '(a method that can says so with `static constexpr seqpool::instruction_rule instruction`)',
                        poolers={"embed": "weighted_mean"})

    def test_token_filters(self):
        token = {"embed": "mean", "token_classify": "step"}
        self.step_error([request("a", "token_classify", 3, token_ids=[1, 2, 3], drop_token_ids=[3, 2])],
                        'request 0 (id "a"): drop_token_ids: id 1 is 2 after 3; the ids must be strictly ascending',
                        poolers=token)
        self.step_error([request("a", "token_classify", 3, token_ids=[1, 2, 3], drop_token_ids=[-2])],
                        'request 0 (id "a"): drop_token_ids: id 0 is -2; token ids are ≥ 0', poolers=token)
        self.step_error([request("a", "token_classify", 3, token_ids=[1, 2, 3], drop_token_ids=list(range(1025)))],
                        'request 0 (id "a"): drop_token_ids: holds 1025 ids; at most 1024 may be dropped',
                        poolers=token)
        self.step_error([request("a", "token_embed", 3, token_ids=[1, 2], drop_token_ids=[2])],
                        'request 0 (id "a"): prompt_token_ids: drop_token_ids are looked up in all 3 ids of the '
                        'prompt, got 2', poolers={"embed": "mean", "token_embed": "all"})
        self.step_error([request("a", "embed", 3, drop_last=True)],
                        'request 0 (id "a"): drop_last: only token methods drop rows; a sequence method leaves out '
                        'an instruction with instruction_len')

    def test_dimensions_outside_the_width(self):
        self.step_error([request("a", "embed", 3, dimensions=5)], 'request 0 (id "a"): dimensions: must be in [1, 4]')
        self.step_error([request("a", "embed", 3, dimensions=0)], 'request 0 (id "a"): dimensions: must be in [1, 4]')

    def test_classifier_of_another_width(self):
        self.step_error([request("c", "classify", 3)],
                        'request 0 (id "c"): classifier: takes 3 columns but the method returns 4',
                        classifier=(np.ones((2, 3), np.float32), None))

    def test_task_without_pooler(self):
        self.step_error([request("t", "token_embed", 3)],
                        'request 0 (id "t"): task: token_embed has no pooler in the dispatch table')

    def test_duplicate_id(self):
        self.step_error([request("a", "embed", 1), request("a", "embed", 2)],
                        'request 1 (id "a"): id: appears twice in one step (first as request 0)')

    def test_hidden_states_of_another_width(self):
        self.step_error([request("a", "embed", 2)], "hidden_states:", hidden=np.zeros((2, H + 1), np.float32))

    # Chunks that disagree with the state the earlier steps left.

    def chunk_error(self, continuation, message):
        batch = Batch(H, {"embed": "mean", "classify": "mean"})
        batch.step(ROWS[:2], [request("c", "embed", 5, 2)])
        batch.step(ROWS[:1], [continuation])
        self.check_refused(batch, "step 1: " + message)

    def test_continuing_with_no_state(self):
        self.chunk_error(request("z", "embed", 5, 1, 2),
                         'request 0 (id "z"): num_computed: 2 continues a request that has no state')

    def test_continuing_from_another_point(self):
        self.chunk_error(request("c", "embed", 5, 1, 3),
                         'request 0 (id "c"): num_computed: 3 disagrees with the state, which holds 2 tokens')

    def test_continuing_as_another_task(self):
        self.chunk_error(request("c", "classify", 5, 1, 2),
                         'request 0 (id "c"): task: continues as classify but began as embed')

    def test_continuing_with_another_prompt_len(self):
        self.chunk_error(request("c", "embed", 6, 1, 2),
                         'request 0 (id "c"): prompt_len: 6 differs from 5 given at the first chunk')

    def test_restarting_a_request_in_progress(self):
        # Said in the batch file's terms, not the library's release().
        self.chunk_error(request("c", "embed", 5, 1, 0),
                         'request 0 (id "c"): num_computed: 0 starts over a prompt whose earlier steps pooled 2 tokens; '
                         'continue it with num_computed 2, or give the new prompt another id')

    # The batch file itself

    def file_error(self, edit, message):
        """Step 1 of the file is bad: step 0 ran and keeps its output."""
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "before")
        edit(batch)
        self.check_refused(batch, message, written=["before"])

    def test_wrong_json_types(self):
        for field, value in (("prompt_len", "3"), ("num_scheduled", 1.5), ("id", 7), ("task", None),
                             ("num_computed", 2**64)):
            with self.subTest(field):
                def edit(batch, field=field, value=value):
                    batch.step(ROWS[:1], [dict(request("a", "embed", 1), **{field: value})])
                self.file_error(edit, f"step 1: request 0")
        self.file_error(lambda b: b.step(ROWS[:1], [request("a", "embed", 1, use_activation=1)]),
                        'step 1: request 0 (id "a"): params.use_activation: expected true or false')
        self.file_error(lambda b: b.step(ROWS[:1], [request("a", "embed", 1, dimensions="2")]),
                        'step 1: request 0 (id "a"): params.dimensions: expected an integer')
        self.file_error(lambda b: b.step(ROWS[:1], [request("a", "embed", 1, instruction_len=0.5)]),
                        'step 1: request 0 (id "a"): params.instruction_len: expected an integer')
        self.file_error(lambda b: b.step(ROWS[:1], [request("a", "embed", 1, drop_first="yes")]),
                        'step 1: request 0 (id "a"): params.drop_first: expected true or false')
        self.file_error(lambda b: b.step(ROWS[:1], [request("a", "embed", 1, drop_token_ids=[0.5])]),
                        'step 1: request 0 (id "a"): params.drop_token_ids: expected an integer')
        self.file_error(lambda b: b.step(ROWS[:1], [request("a", "embed", 1, spans=[[0]])]),
                        'step 1: request 0 (id "a"): params.spans: expected an array of [begin, end] pairs')
        self.file_error(lambda b: b.step(ROWS[:1], [request("a", "embed", 1, token_ids=[1.5])]),
                        'step 1: request 0 (id "a"): prompt_token_ids: expected an integer')
        self.file_error(lambda b: b.step(ROWS[:1], [dict(request("a", "embed", 1), num_scheduled=None)]),
                        'step 1: request 0 (id "a"): num_scheduled:')
        self.file_error(lambda b: b.spec["steps"].append([1, 2]), "step 1: expected an object")

    def test_unknown_and_missing_fields(self):
        self.file_error(lambda b: b.step(ROWS[:1], [dict(request("a", "embed", 1), num_schedueld=1)]),
                        'step 1: request 0 (id "a"): unknown field "num_schedueld"')
        self.file_error(lambda b: b.spec["steps"].append({"requests": []}), "step 1: hidden_states: missing")
        # A name the file gives is quoted (SPEC section 8): a NUL or an escape in it cuts nothing short.
        for key in ("x\u0000y", "x\u001b[31my", 'x"y'):
            with self.subTest(key=key):
                self.config_error(lambda s, key=key: s.update({key: 1}), f"unknown field {json.dumps(key)}")
                self.config_error(lambda s, key=key: s["poolers"].update({key: "mean"}),
                                  f"poolers: unknown task {json.dumps(key)} (expected embed")
                self.file_error(lambda b, key=key: b.step(ROWS[:1], [request("a", "embed", 1, **{key: 1})]),
                                f'step 1: request 0 (id "a"): params: unknown field {json.dumps(key)}')

    def test_unknown_task_name(self):
        self.file_error(lambda b: b.step(ROWS[:1], [request("a", "rerank", 1)]),
                        'step 1: request 0 (id "a"): task: unknown task "rerank"')

    def test_ids_that_are_not_file_names(self):
        for bad in ("../escape", "a/b", "", ".."):
            with self.subTest(bad):
                self.file_error(lambda b, bad=bad: b.step(ROWS[:1], [request(bad, "embed", 1)]),
                                "step 1: request 0")

    def test_an_id_is_quoted_escaped(self):
        # A NUL written as it is would end the error line where it is read as a C string.
        self.file_error(lambda b: b.step(ROWS[:1], [request("a\0b", "embed", 1)]),
                        'step 1: request 0 (id "a\\u0000b"): id: must be a plain file name')
        self.file_error(lambda b: b.step(ROWS[:1], [request('say "hi"', "embed", 1, 0)]),
                        'step 1: request 0 (id "say \\"hi\\""): num_scheduled: must be at least 1')

    def test_ids_too_long_for_a_file_name(self):
        self.file_error(lambda b: b.step(ROWS[:1], [request("x" * 201, "embed", 1)]),
                        'step 1: request 0 (id "' + "x" * 201 + '"): id: at most 200 bytes')

    def test_line_breaks_in_ids_stay_on_one_line(self):
        for breaker in ("\r", "\u0085", "\u2028", "\u2029", "\v", "\f"):
            with self.subTest(repr(breaker)):
                batch = Batch(H, {"embed": "mean"})
                batch.step(ROWS[:1], [request("a" + breaker + "b", "embed", 1, 0)])
                run = batch.run()
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertIn("num_scheduled: must be at least 1", run.stderr)
                self.assertEqual(run.stderr.count("\n"), 1, repr(run.stderr))
                for other in ("\r", "\u0085", "\u2028", "\u2029", "\v", "\f"):
                    self.assertNotIn(other, run.stderr)

    def test_a_step_whose_results_cannot_all_be_written_writes_none(self):
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "before")
        batch.step(ROWS[:2], [request("first", "embed", 1), request("blocked", "embed", 1)])
        batch.run()
        (batch.out / "blocked.npy").unlink()
        (batch.out / "first.npy").unlink()
        (batch.out / "blocked.npy").mkdir()  # a folder where the result must go
        run = batch.run()
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn('step 1: request 1 (id "blocked"): cannot write', run.stderr)
        self.assertFalse((batch.out / "first.npy").exists())
        self.assertEqual(sorted(p.name for p in batch.out.iterdir()), ["audit.jsonl", "before.npy", "blocked.npy"])

    def test_chunked_step_requests_keep_their_knobs(self):
        ids = [7, 1, 7, 1, 7, 1]
        for change in ({"step_tag_id": 1}, {"returned_token_ids": [0]}, {"token_ids": [1] * 6}):
            with self.subTest(change):
                batch = Batch(H, {"token_classify": "step"})
                batch.step(ROWS[:2], [request("s", "token_classify", 6, 2, token_ids=ids, step_tag_id=7)])
                later = {"token_ids": ids, "step_tag_id": 7}
                later.update(change)
                batch.step(ROWS[:3], [request("s", "token_classify", 6, 3, 2, **later)])
                self.check_refused(batch, 'step 1: request 0 (id "s"): ')

    def test_deep_nesting_is_refused(self):
        # The top object is the first level: 31 arrays in it reach the 32nd, 32 the 33rd, whatever
        # the innermost holds (an unknown field "deep" is refused as well, but not for its depth).
        for arrays, too_deep in ((31, False), (32, True), (200000, True)):
            for innermost in ("", "1"):
                with self.subTest(arrays=arrays, innermost=innermost):
                    batch = Batch(H, {"embed": "mean"})
                    good_step(batch, "before")
                    batch.run()
                    deep = "[" * arrays + innermost + "]" * arrays
                    text = (batch.folder / "batch.json").read_text()
                    (batch.folder / "batch.json").write_text(text[:-1] + ', "deep": ' + deep + "}")
                    import subprocess
                    from batches import TOOL
                    run = subprocess.run([TOOL, str(batch.folder / "batch.json"), "--out", str(batch.folder / "fresh")],
                                         capture_output=True, text=True)
                    self.assertEqual(run.returncode, 2, run.stderr)
                    self.assertEqual("nested more than 32 deep" in run.stderr, too_deep, run.stderr)

    def test_a_result_that_cannot_be_written_exits_2(self):
        # Files may hold no byte (a file size limit of 0, whose signal seqpool-run ignores): a write
        # refused (EFBIG) fails the result, small or large, and what was made is removed.
        import resource

        def no_file_bytes():
            resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))

        for audit in (False, True):
            with self.subTest(audit=audit):
                batch = Batch(H, {"embed": "mean"})
                good_step(batch, "small")
                run = batch.run(audit=audit, preexec_fn=no_file_bytes)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertTrue(run.stderr.startswith("seqpool: error: "), run.stderr)
                self.assertIn(": cannot write", run.stderr)
                self.assertFalse((batch.out / "small.npy").exists())

    def test_a_step_whose_audit_line_cannot_be_written_publishes_nothing(self):
        # Files of at most 150 bytes: each result file (144) fits, and the first audit line, but not the second,
        # of which a part is written and cut off again; step 1's result is not published.
        import resource

        def small_files():
            resource.setrlimit(resource.RLIMIT_FSIZE, (150, 150))

        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "first")
        good_step(batch, "second")
        run = batch.run(preexec_fn=small_files)
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn(f"seqpool: error: step 1: {batch.out / 'audit.jsonl'}: cannot write: File too large", run.stderr)
        self.assertEqual(sorted(path.name for path in batch.out.iterdir()), ["audit.jsonl", "first.npy"])
        lines = (batch.out / "audit.jsonl").read_text().splitlines()
        self.assertEqual([json.loads(line)["step"] for line in lines], [0])

    def preloaded_faults(self, built):
        """LD_PRELOAD's value with file_system_faults.c, built in the folder `built`, first."""
        import os
        import shutil
        import subprocess

        compiler = shutil.which("cc") or shutil.which("gcc")
        self.assertIsNotNone(compiler, "a C compiler builds the preloaded faults")
        preload = pathlib.Path(built) / "file_system_faults.so"
        subprocess.run([compiler, "-shared", "-fPIC", "-o", str(preload),
                        str(pathlib.Path(__file__).parent / "file_system_faults.c"), "-ldl"], check=True)
        return ":".join(filter(None, [str(preload), os.environ.get("LD_PRELOAD")]))

    def test_a_step_whose_files_cannot_all_be_published_publishes_none(self):
        # Renames that fail (file_system_faults.c, preloaded: the one to a name, or every one from the n-th) take
        # back the step's files published before them, and give back what an earlier run left under their names.
        import os

        with tempfile.TemporaryDirectory() as built:
            preloaded = self.preloaded_faults(built)
            earlier = np.array([7.0, 7.0], np.float32)

            def run_failing(earlier_files, **failing):
                batch = Batch(H, {"embed": "mean"})
                batch.step(ROWS[:2], [request("first", "embed", 1), request("second", "embed", 1)])
                (batch.folder / "out").mkdir()
                for name in earlier_files:
                    np.save(batch.folder / "out" / name, earlier)
                run = batch.run(audit=False, env=dict(os.environ, LD_PRELOAD=preloaded, **failing))
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertTrue(run.stderr.startswith("seqpool: error: step 0: "), run.stderr)
                return batch, run

            # The second rename fails: the first is taken back, and first.npy holds the earlier run's file.
            batch, _ = run_failing(["first.npy"], FAILING_RENAME="/second.npy")
            self.assertEqual(sorted(path.name for path in batch.out.iterdir()), ["first.npy"])
            np.testing.assert_array_equal(np.load(batch.out / "first.npy"), earlier)
            # The first fails: nothing was published, and the earlier files are as they were.
            batch, _ = run_failing(["first.npy", "second.npy"], FAILING_RENAME="/first.npy")
            self.assertEqual(sorted(path.name for path in batch.out.iterdir()), ["first.npy", "second.npy"])
            for name in ("first.npy", "second.npy"):
                np.testing.assert_array_equal(np.load(batch.out / name), earlier)
            # Every rename from the second fails, giving first.npy back too: the error says where its file is.
            batch, run = run_failing(["first.npy", "second.npy"], FAILING_RENAME_FROM="2")
            self.assertIn(f"what {batch.out / 'first.npy'} held is left at {batch.out / '.first.npy.previous'}",
                          run.stderr)
            np.testing.assert_array_equal(np.load(batch.out / ".first.npy.previous"), earlier)
            np.testing.assert_array_equal(np.load(batch.out / "second.npy"), earlier)
            # A symbolic link left under a final name, dangling, is a file too.
            batch = Batch(H, {"embed": "mean"})
            batch.step(ROWS[:2], [request("first", "embed", 1), request("second", "embed", 1)])
            (batch.folder / "out").mkdir()
            (batch.folder / "out" / "first.npy").symlink_to("nowhere")
            run = batch.run(audit=False, env=dict(os.environ, LD_PRELOAD=preloaded, FAILING_RENAME="/second.npy"))
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertEqual([path.name for path in batch.out.iterdir()], ["first.npy"])
            self.assertEqual(os.readlink(batch.out / "first.npy"), "nowhere")
            # A batch with parts: neither part's file is published where the other's cannot be.
            parts = Batch(H, None)
            parts.parts({"name": "d", "task": "embed", "method": "mean"},
                        {"name": "t", "task": "token_embed", "method": "all"})
            parts.step(ROWS[:2], [request("a", "embed", 2)])
            run = parts.run(audit=False, env=dict(os.environ, LD_PRELOAD=preloaded, FAILING_RENAME="/t/a.npy"))
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertEqual(sorted(str(path.relative_to(parts.out)) for path in parts.out.rglob("*")), ["d", "t"])

    def test_a_link_made_at_a_hidden_name_after_its_removal_is_not_followed(self):
        # A symbolic link that appears at a result's hidden name between the tool's removal of what the name held
        # and its write (file_system_faults.c makes one there, as a process racing for the name might) is refused:
        # the step fails naming the request, and the file the link names is not written.
        import os

        with tempfile.TemporaryDirectory() as built:
            preloaded = self.preloaded_faults(built)
            batch = Batch(H, {"embed": "mean"})
            good_step(batch, "a")
            victim = batch.folder / "victim.txt"
            victim.write_text("untouched")
            run = batch.run(audit=False, env=dict(os.environ, LD_PRELOAD=preloaded, LINK_AFTER_REMOVE="/.a.npy.partial",
                                                  LINK_TARGET=str(victim)))
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn('step 0: request 0 (id "a"): cannot write its result: ', run.stderr)
            self.assertIn(".a.npy.partial: cannot make it: File exists", run.stderr)
            self.assertEqual(victim.read_text(), "untouched")
            self.assertFalse((batch.out / "a.npy").exists())

    def test_a_link_under_a_hidden_name_is_not_followed(self):
        # What an earlier run left at a result's hidden name, a symbolic link out of the folder among
        # them, is replaced: the file the link names is not written.
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "a")
        victim = batch.folder / "victim.txt"
        victim.write_text("untouched")
        (batch.folder / "out").mkdir()
        (batch.folder / "out" / ".a.npy.partial").symlink_to(victim)
        run = batch.run()
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertEqual(victim.read_text(), "untouched")
        self.assertFalse((batch.out / "a.npy").is_symlink())
        np.testing.assert_allclose(batch.result("a"), ROWS[0] / np.linalg.norm(ROWS[0]), rtol=1e-6)
        # A link to a folder under the result's own name is replaced by the rename, not taken for the folder.
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "a")
        (batch.folder / "elsewhere").mkdir()
        (batch.folder / "out").mkdir()
        (batch.folder / "out" / "a.npy").symlink_to(batch.folder / "elsewhere")
        run = batch.run()
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertFalse((batch.out / "a.npy").is_symlink())
        self.assertEqual(list((batch.folder / "elsewhere").iterdir()), [])
        np.testing.assert_allclose(batch.result("a"), ROWS[0] / np.linalg.norm(ROWS[0]), rtol=1e-6)
        # A folder there, empty or not, is not removed: the step names the request and the folder.
        for inside in ((), ("inside",)):
            batch = Batch(H, {"embed": "mean"})
            good_step(batch, "a")
            (batch.folder / "out" / ".a.npy.partial" / pathlib.Path(*inside)).mkdir(parents=True)
            run = batch.run()
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn(f'step 0: request 0 (id "a"): cannot write its result: {batch.out / ".a.npy.partial"} '
                          'is a folder', run.stderr)
            self.assertTrue((batch.out / ".a.npy.partial").is_dir())

    def test_an_audit_that_cannot_be_written_exits_2(self):
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "a")
        (batch.folder / "out" / "audit.jsonl").mkdir(parents=True)  # a folder where the audit must go
        run = batch.run()
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn(f"--audit: {batch.out / 'audit.jsonl'} is a folder", run.stderr)
        self.assertFalse((batch.out / "a.npy").exists())

    def test_a_step_that_cannot_be_published_leaves_no_audit_line(self):
        # The step's line is written before its files are published (a step that cannot be audited publishes
        # nothing) and cut off again where they cannot all be published; the error names the request.
        import os

        with tempfile.TemporaryDirectory() as built:
            preloaded = self.preloaded_faults(built)
            batch = Batch(H, {"embed": "mean"})
            good_step(batch, "before")
            batch.step(ROWS[:2], [request("first", "embed", 1), request("second", "embed", 1)])
            run = batch.run(env=dict(os.environ, LD_PRELOAD=preloaded, FAILING_RENAME="/second.npy"))
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertIn('seqpool: error: step 1: request 1 (id "second"): cannot publish its result: ', run.stderr)
            self.assertEqual(sorted(path.name for path in batch.out.iterdir()), ["audit.jsonl", "before.npy"])
            lines = (batch.out / "audit.jsonl").read_text().splitlines()
            self.assertEqual([json.loads(line)["step"] for line in lines], [0])

    def test_the_audit_is_made_new_not_through_what_its_name_held(self):
        # A symbolic link left at DIR/audit.jsonl is replaced, not followed out of the folder; a FIFO there,
        # whose open would wait for a reader, is replaced too.
        import os

        for kind in ("link", "fifo"):
            with self.subTest(kind=kind):
                batch = Batch(H, {"embed": "mean"})
                good_step(batch, "a")
                victim = batch.folder / "victim.txt"
                victim.write_text("untouched")
                (batch.folder / "out").mkdir()
                if kind == "link":
                    (batch.folder / "out" / "audit.jsonl").symlink_to(victim)
                else:
                    os.mkfifo(batch.folder / "out" / "audit.jsonl")
                run = batch.run()
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertEqual(victim.read_text(), "untouched")
                audit = batch.out / "audit.jsonl"
                self.assertTrue(audit.is_file() and not audit.is_symlink())
                self.assertEqual([json.loads(line)["step"] for line in audit.read_text().splitlines()], [0])

    def test_a_file_name_holding_a_nul_names_no_file(self):
        # The system would read the name up to the NUL: another file, silently.
        def edit(batch):
            batch.step(ROWS[:1], [request("a", "embed", 1)])
            batch.spec["steps"][-1]["hidden_states"] += "\u0000.npy"
        self.file_error(edit, 'step 1: hidden_states: "step1.npy\\u0000.npy" holds a NUL: no file has that name')
        def write(folder):
            np.save(folder / "w.npy", np.ones((2, H), np.float32))
        self.config_error(lambda s: s.update(projector={"weight": "w.npy\u0000"}),
                          'projector.weight: "w.npy\\u0000" holds a NUL: no file has that name', write)

    def test_a_file_field_that_is_no_string_is_named_once(self):
        for edit, field in ((lambda s: s.update(result_dtype="int8", ranges=5), "ranges"),
                            (lambda s: s.update(projector={"weight": 5}), "projector.weight"),
                            (lambda s: s.update(classifier={"layers": [{"weight": ["w.npy"]}]}),
                             "classifier.layers[0].weight")):
            with self.subTest(field=field):
                batch = Batch(H, {"embed": "mean"})
                good_step(batch, "before")
                edit(batch.spec)
                run = batch.run()
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(run.stderr, f"seqpool: error: batch.json: {field}: expected a string\n")

    def test_missing_hidden_states(self):
        def edit(batch):
            batch.step(ROWS[:1], [request("a", "embed", 1)])
            batch.spec["steps"][-1]["hidden_states"] = "nowhere.npy"
        self.file_error(edit, "step 1: hidden_states: ")

    def bad_npy(self, write, message):
        def edit(batch):
            batch.step(ROWS[:1], [request("a", "embed", 1)])
            write(batch.folder / batch.spec["steps"][-1]["hidden_states"])
        self.file_error(edit, "step 1: hidden_states: " )
        batch = Batch(H, {"embed": "mean"})
        edit(batch)
        run = batch.run()
        self.assertIn(message, run.stderr)

    def test_malformed_npy(self):
        self.bad_npy(lambda path: path.write_bytes(b"not an array"), "not an .npy file")
        self.bad_npy(lambda path: np.save(path, np.asfortranarray(np.ones((3, H), np.float32))[:, :].T.T.copy(order="F")),
                     "Fortran-order")
        self.bad_npy(lambda path: np.save(path, np.ones((1, H), np.float64)),
                     'dtype "<f8" is not supported (hidden states are <f4, <f2, or bfloat16 bits as <u2 or <i2)')
        self.bad_npy(lambda path: np.save(path, np.ones((1, H), ">f4")), 'dtype ">f4" is not supported')
        self.bad_npy(lambda path: path.write_bytes(path.read_bytes()[:-3]), "the shape needs 16 bytes of data")
        self.bad_npy(lambda path: np.save(path, np.ones((2, 1, H), np.float32)),
                     'has shape [2, 1, 4]; it must have shape [T, 4] (rows of all requests, packed), or the step must '
                     'say "padding": "right" or "left"')
        def with_header(text):
            def write(path):
                data = path.read_bytes()
                length = int.from_bytes(data[8:10], "little")
                header = text.encode() + b"\n"
                path.write_bytes(data[:8] + len(header).to_bytes(2, "little") + header + data[10 + length:])
            return write
        # NumPy reads a dict of its three keys, each once: the last of two alike would win there.
        for text, message in (
                ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), 'shape': (4, 1), }",
                 "the .npy header has 'shape' twice"),
                ("'descr': '<f4', 'fortran_order': False, 'shape': (1, 4)", "malformed .npy header"),
                ("{'descr': \"<f4', 'fortran_order': False, 'shape': (1, 4), }", "malformed descr in the .npy header"),
                ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), 'extra': 1, }",
                 'the .npy header has a key "extra" NumPy does not write'),
                ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), } and more", "malformed .npy header"),
                ("{'descr': '<f4', 'fortran_order': false, 'shape': (1, 4), }",
                 "malformed fortran_order in the .npy header"),
                ("{'descr': '<f4', 'shape': (1, 4), }", "the .npy header has no 'fortran_order'"),
                # A shape is a tuple of ints as Python writes one: (4) is an int, 04 no literal.
                ("{'descr': '<f4', 'fortran_order': False, 'shape': (4), }", "malformed shape in the .npy header"),
                ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 04), }", "malformed shape in the .npy header"),
                ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 9223372036854775808), }",
                 "the .npy header's shape has an extent past int64: 9223372036854775808"),
                ("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4611686018427387904), }",
                 "the shape is too large")):
            with self.subTest(text):
                self.bad_npy(with_header(text), message)
        # NumPy reads format versions 1.0, 2.0 and 3.0 alone.
        def version(minor):
            def write(path):
                data = bytearray(path.read_bytes())
                data[7] = minor
                path.write_bytes(bytes(data))
            return write
        self.bad_npy(version(7), "unsupported .npy format version 1.7 (1.0, 2.0 and 3.0 are read)")
        # Either quote, the keys in any order, no comma after the last, a comma after a shape's last
        # extent, whitespace as Python's tokenizer skips it (a header written with "\r\n", a form feed):
        # as NumPy reads them.
        for header in ('{"shape": (1, 4), "fortran_order": False, "descr": "<f4"}',
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4,), }",
                       "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 4), }\r",
                       "{'descr':\f'<f4', 'fortran_order': False, 'shape': (1,\r\n4), }"):
            batch = Batch(H, {"embed": "mean"})
            good_step(batch, "reordered")
            with_header(header)(batch.folder / batch.spec["steps"][-1]["hidden_states"])
            run = batch.run()
            self.assertEqual(run.returncode, 0, run.stderr)
            np.testing.assert_allclose(batch.result("reordered"), ROWS[0] / np.linalg.norm(ROWS[0]), rtol=1e-6)
        for ending in (b"'shape':", b"'shape':   "):
            def cut(path, ending=ending):
                data = path.read_bytes()
                header_end = data.index(b"'shape':") + len(b"'shape':")
                header = data[10:header_end - len(b"'shape':")] + ending
                path.write_bytes(data[:8] + len(header).to_bytes(2, "little") + header)
            self.bad_npy(cut, "malformed .npy header")

    def test_python2_long_extents_are_read_where_numpy_reads_them(self):
        # NumPy drops Python 2's L after an extent in formats 1.0 and 2.0, which Python 2 wrote.
        header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': (1L, {H}L), }}\n".encode()
        for major in (1, 2, 3):
            with self.subTest(major=major):
                batch = Batch(H, {"embed": "mean"})
                good_step(batch, "longs")
                path = batch.folder / batch.spec["steps"][-1]["hidden_states"]
                length = len(header).to_bytes(2 if major == 1 else 4, "little")
                path.write_bytes(b"\x93NUMPY" + bytes([major, 0]) + length + header + ROWS[:1].tobytes())
                run = batch.run()
                if major == 3:
                    self.assertEqual(run.returncode, 2, run.stderr)
                    self.assertIn("malformed shape in the .npy header", run.stderr)
                    continue
                self.assertEqual(run.returncode, 0, run.stderr)
                np.testing.assert_allclose(batch.result("longs"), ROWS[0] / np.linalg.norm(ROWS[0]), rtol=1e-6)

    def test_control_characters_in_a_path_are_escaped(self):
        # A terminal acts on them (an escape sequence recolours, BEL rings): the line holds
        # each as \u00XX, as section 8 quotes names, C1's CSI among them; line breaks are spaces.
        def edit(batch):
            batch.step(ROWS[:1], [request("a", "embed", 1)])
            batch.spec["steps"][-1]["hidden_states"] = "in\u001b[31mred\u0007\u009b\t\u007f\u2028x.npy"
        self.file_error(edit, "in\\u001b[31mred\\u0007\\u009b\\u0009\\u007f x.npy: cannot open")

    def config_error(self, spec_edit, message, write=None):
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "before")
        spec_edit(batch.spec)
        if write:
            write(batch.folder)
        self.check_refused(batch, "batch.json: " + message)

    def test_malformed_json(self):
        # Cut short; a number too large for any JSON number type (found by the fuzzer); a NUL after
        # the text or in it (the parser took one for the end of its input); a key given twice (the
        # parser kept the last), in the batch's object, a pooler's and a request's.
        good = Batch(H, {"embed": "mean"})
        good_step(good, "before")
        text = json.dumps(good.spec)
        for malformed, reason in (('{"hidden_size": 4,', ""), ('{"hidden_size": 1e999}', ""),
                                  ('{"hidden_size": 4}' + "1" * 400, ""),
                                  (text + "\0 not JSON ]]]",
                                   f"the byte at offset {len(text)} is a NUL, which no JSON text holds"),
                                  (text + "\0", f"the byte at offset {len(text)} is a NUL, which no JSON text holds"),
                                  ('{"hidden_size": 4\0}', "the byte at offset 17 is a NUL, which no JSON text holds"),
                                  ('{"hidden_size": 4, "hidden_size": 4}',
                                   'key "hidden_size" appears twice in an object'),
                                  (text.replace('"embed": "mean"', '"embed": "none", "embed": "mean"'),
                                   'key "embed" appears twice in an object'),
                                  (text.replace('"id": "before"', '"id": "a", "id": "before"'),
                                   'key "id" appears twice in an object')):
            with self.subTest(text=malformed[:30]):
                self.assertNotEqual(malformed, text)
                batch = Batch(H, {"embed": "mean"})
                good_step(batch, "before")
                batch.run()
                (batch.folder / "batch.json").write_text(malformed)
                import subprocess
                from batches import TOOL
                run = subprocess.run([TOOL, str(batch.folder / "batch.json"), "--out", str(batch.folder / "fresh")],
                                     capture_output=True, text=True)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertTrue(run.stderr.startswith("seqpool: error: "), run.stderr)
                self.assertIn("malformed JSON: " + reason, run.stderr)
                self.assertEqual(run.stderr.count("\n"), 1)

    def test_a_null_is_no_value(self):
        # A null is an absent key: an optional one takes its default, a required one is missing.
        self.file_error(lambda b: b.step(ROWS[:1], [dict(request("a", "embed", 1), num_scheduled=None)]),
                        'step 1: request 0 (id "a"): num_scheduled: missing (null is no value)')
        self.file_error(lambda b: b.step(ROWS[:1], [dict(request("a", "embed", 1), task=None)]),
                        'step 1: request 0 (id "a"): task: missing (null is no value)')
        self.config_error(lambda s: s.update(poolers=None), "poolers: missing (null is no value)")
        results = []
        for null in (False, True):
            batch = Batch(H, {"embed": "mean"})
            if null:
                batch.spec.update(result_dtype=None, ranges=None, hidden_dtype=None)
                batch.step(ROWS[:2], [dict(request("a", "embed", 2, dimensions=None, instruction_len=None),
                                           num_computed=None)])
            else:
                batch.step(ROWS[:2], [request("a", "embed", 2)])
            run = batch.run()
            self.assertEqual(run.returncode, 0, run.stderr)
            results.append(np.load(batch.out / "a.npy"))
        np.testing.assert_array_equal(results[1], results[0])

    def test_methods_that_cannot_serve(self):
        sequence_methods = ("cls, last, mean, max, weighted_mean, mean_sqrt_len or two or three of cls, max, mean, "
                            "mean_sqrt_len, weighted_mean and last, in that order, joined by '+' (\"cls+max+mean\")")
        self.config_error(lambda s: s["poolers"].update(embed="all"),
                          f'poolers.embed: method "all" cannot serve embed (expected {sequence_methods})')
        # A concat's modes in another order than sentence-transformers', repeated, or four of them.
        for name in ("mean+cls", "mean+mean", "cls+max+mean+last", "cls+all"):
            self.config_error(lambda s, name=name: s["poolers"].update(embed=name),
                              f'poolers.embed: method "{name}" cannot serve embed (expected {sequence_methods})')
        self.config_error(lambda s: s["poolers"].update(token_embed="mean"),
                          'poolers.token_embed: method "mean" cannot serve token_embed (expected all or step)')
        self.config_error(lambda s: s["poolers"].update(classify="step"),
                          f'poolers.classify: method "step" cannot serve classify (expected {sequence_methods})')
        self.config_error(lambda s: s["poolers"].update(token_classify="weighted_mean"),
                          'poolers.token_classify: method "weighted_mean" cannot serve token_classify (expected all or '
                          'step)')
        self.config_error(lambda s: s["poolers"].update(embed="median"), 'poolers.embed: method "median" cannot serve')
        self.config_error(lambda s: s["poolers"].update(token_embed="STEP"),
                          'poolers.token_embed: method "STEP" cannot serve token_embed (expected all or step)')
        self.config_error(lambda s: s["poolers"].update(rerank="cls"), 'poolers: unknown task "rerank" (expected embed, classify, token_embed or token_classify)')
        self.config_error(lambda s: s.update(poolers={}), "poolers: name a method for at least one task")

    def test_layers_that_do_not_fit(self):
        def weights(weight, bias):
            def write(folder):
                np.save(folder / "w.npy", weight)
                np.save(folder / "b.npy", bias)
            return write
        self.config_error(lambda s: s.update(projector={"weight": "w.npy", "bias": "b.npy"}),
                          "projector.bias: expected a 1-D <f4 array of 2 values",
                          weights(np.ones((2, H), np.float32), np.ones(3, np.float32)))
        self.config_error(lambda s: s.update(classifier={"weight": "w.npy"}),
                          "classifier.weight: expected a non-empty 2-D <f4 array",
                          weights(np.ones(H, np.float32), np.ones(1, np.float32)))
        self.config_error(lambda s: s.update(classifier={"weight": "missing.npy"}),
                          "classifier.weight: " )
        self.config_error(lambda s: s.update(classifier={"bias": "b.npy"}), "classifier.bias: given without a weight",
                          weights(np.ones(H, np.float32), np.ones(1, np.float32)))

    def test_layers_that_do_not_chain(self):
        def write(folder):
            np.save(folder / "w.npy", np.ones((2, H), np.float32))
            np.save(folder / "v.npy", np.ones((3, 3), np.float32))
        layer = {"weight": "w.npy"}
        self.config_error(lambda s: s.update(projector={"layers": [layer], "weight": "w.npy"}),
                          "projector.weight: given beside layers (each layer names its own)", write)
        self.config_error(lambda s: s.update(classifier={"layers": []}),
                          "classifier.layers: expected a non-empty array of layers", write)
        self.config_error(lambda s: s.update(projector={"layers": [layer] * 5}),
                          "projector.layers: at most 4 layers, got 5", write)
        self.config_error(lambda s: s.update(projector={"layers": [layer, {"bias": "w.npy"}]}),
                          "projector.layers[1].weight: missing", write)
        self.config_error(lambda s: s.update(projector={"layers": [{"weight": "w.npy", "scale": 2}]}),
                          'projector.layers[0]: unknown field "scale"', write)
        self.config_error(lambda s: s.update(projector={"layers": [layer, 1]}),
                          "projector.layers[1]: expected an object", write)
        self.config_error(lambda s: s.update(classifier=3), "classifier: expected an object", write)
        self.config_error(lambda s: s.update(projector={"weight": "w.npy", "activation": "swish"}),
                          'projector.activation: "swish" is not "identity", "tanh", "gelu" or "relu"', write)
        self.config_error(lambda s: s.update(classifier={"activation": "tanh"}),
                          "classifier.activation: given without a weight", write)
        # The library refuses a stack whose layers do not chain: 2 outputs into a layer of 3 inputs.
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "before")
        batch.spec.update(projector={"layers": [{"weight": "w.npy"}, {"weight": "v.npy"}]})
        write(batch.folder)
        self.check_refused(batch, "projector: layer 1 takes 3 inputs but layer 0 gives 2")

    def test_weights_of_another_dtype(self):
        # The hint lists what weights take, not what hidden states take.
        def write(folder):
            np.save(folder / "w.npy", np.ones((2, H), np.float16))
        self.config_error(lambda s: s.update(projector={"weight": "w.npy"}),
                          "projector.weight: ", write)
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "before")
        batch.spec.update(projector={"weight": "w.npy"})
        write(batch.folder)
        run = batch.run()
        self.assertIn('dtype "<f2" is not supported (weights are <f4)', run.stderr)

    def test_padded_steps_that_do_not_fit(self):
        for shape, padding, message in (((2, 3, H), "right", "has shape [2, 3, 4]; a padded step must have shape [1, S, 4] "
                                                             "(a sequence per request)"),
                                        ((1, 3, H), "middle", 'padding: "middle" is not right or left'),
                                        ((1, 1, H), "left", 'request 0 (id "a"): num_scheduled: 2 exceeds the padded '
                                                            'sequence length 1'),
                                        ((1, 0, H), "right", "has shape [1, 0, 4]; a padded step's sequences need "
                                                             "S of at least 1 row")):
            with self.subTest(padding=padding, shape=shape):
                batch = Batch(H, {"embed": "mean"})
                good_step(batch, "before")
                batch.step(ROWS[:2], [request("a", "embed", 2)])
                np.save(batch.folder / batch.spec["steps"][-1]["hidden_states"], np.ones(shape, np.float32))
                batch.spec["steps"][-1]["padding"] = padding
                self.check_refused(batch, message, written=["before"])

    def test_hidden_dtype(self):
        bits = np.zeros((1, H), "<i2")
        self.bad_npy(lambda path: np.save(path, bits),
                     'holds 16-bit integers (<i2); if they are bfloat16 bits (tensor.view(torch.int16)), '
                     'add "hidden_dtype": "bfloat16" to the batch')
        for declared, saved, expected in (("bfloat16", np.ones((1, H), np.float32), "<u2 or <i2 (bfloat16 bits)"),
                                          ("float32", np.ones((1, H), np.float16), "<f4"),
                                          ("float16", bits, "<f2")):
            with self.subTest(declared=declared):
                batch = Batch(H, {"embed": "mean"})
                batch.spec["hidden_dtype"] = declared
                batch.step(ROWS[:1], [request("a", "embed", 1)])
                np.save(batch.folder / batch.spec["steps"][-1]["hidden_states"], saved)
                self.check_refused(batch, f'but hidden_dtype "{declared}" is saved as {expected}')
        self.config_error(lambda s: s.update(hidden_dtype="int8"),
                          'hidden_dtype: "int8" is not float32, float16 or bfloat16')
        self.config_error(lambda s: s.update(result_dtype="float64"),
                          'result_dtype: "float64" is not float32, float16, bfloat16, int8, uint8, binary, ubinary or sparse')
        self.config_error(lambda s: s.update(result_dtype=16), "result_dtype: expected a string")

    def test_quantization_ranges(self):
        def save(array):
            return lambda folder: np.save(folder / "r.npy", array)
        ranges = np.array([[-1.0] * H, [1.0] * H], "<f4")
        self.config_error(lambda s: s.update(result_dtype="int8"), 'result_dtype: int8 results need "ranges"')
        self.config_error(lambda s: s.update(result_dtype="binary", ranges="r.npy"),
                          "ranges: only int8 and uint8 results take calibration ranges", save(ranges))
        for bad in (ranges[0], np.concatenate([ranges, ranges[:1]])):
            with self.subTest(shape=bad.shape):
                self.config_error(lambda s: s.update(result_dtype="uint8", ranges="r.npy"),
                                  "ranges: expected a 2-D <f4 array [2, D]", save(bad))
        wide = Batch(H, {"embed": "mean"})
        wide.spec.update(result_dtype="uint8", ranges="r.npy")
        np.save(wide.folder / "r.npy", ranges.astype("<f8"))
        wide.step(ROWS[:1], [request("a", "embed", 1)])
        self.check_refused(wide, 'r.npy: dtype "<f8" is not supported (calibration ranges are <f4)')
        missing = Batch(H, {"embed": "mean"})
        missing.spec.update(result_dtype="uint8", ranges="missing.npy")
        missing.step(ROWS[:1], [request("a", "embed", 1)])
        self.check_refused(missing, "missing.npy: cannot open")
        # Checked by seqpool: lower below upper at every column, and wide enough for each result.
        crossed = Batch(H, {"embed": "mean"})
        crossed.spec.update(result_dtype="int8", ranges="r.npy")
        np.save(crossed.folder / "r.npy", np.array([[-1, 1, -1, -1], [1, 1, 1, 1]], "<f4"))
        crossed.step(ROWS[:1], [request("a", "embed", 1)])
        self.check_refused(crossed, "batch.json: ranges: each column needs lower < upper, both finite and a step "
                                    "above 0; column 1 has lower 1 and upper 1")
        # A part's ranges are named as the part's field.
        parts = Batch(H, None)
        np.save(parts.folder / "good.npy", ranges)
        np.save(parts.folder / "bad.npy", np.array([[-1, 0, -1, -1], [1, 0, 1, 1]], "<f4"))
        parts.parts({"name": "a", "task": "embed", "method": "mean", "result_dtype": "int8", "ranges": "good.npy"},
                    {"name": "b", "task": "embed", "method": "max", "result_dtype": "int8", "ranges": "bad.npy"})
        parts.step(ROWS[:1], [request("r", "embed", 1)])
        run = parts.run()
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertEqual(run.stderr, "seqpool: error: batch.json: parts[1].ranges: each column needs lower < upper, "
                                     "both finite and a step above 0; column 1 has lower 0 and upper 0\n")
        narrow = Batch(H, {"embed": "mean"})
        narrow.spec.update(result_dtype="int8", ranges="r.npy")
        np.save(narrow.folder / "r.npy", np.array([[-1, -1], [1, 1]], "<f4"))
        narrow.step(ROWS[:1], [request("a", "embed", 1, dimensions=2)])
        narrow.step(ROWS[:1], [request("b", "embed", 1)])
        self.check_refused(narrow, "step 1: request 0 (id \"b\"): ranges: the calibration ranges cover 2 columns",
                           written=["a"])

    def test_sparse_results(self):
        self.config_error(lambda s: s.update(weight_floor=0.5), "weight_floor: only sparse results take a weight floor")
        self.config_error(lambda s: s.update(result_dtype="sparse", weight_floor="high"),
                          "weight_floor: expected a finite number")
        # Checked by seqpool, named by the task: a token pooler weighs rows with a last layer of one output.
        headless = Batch(H, {"token_embed": "all"})
        headless.spec["result_dtype"] = "sparse"
        headless.step(ROWS[:1], [request("a", "token_embed", 1, token_ids=[1])])
        self.check_refused(headless, "poolers.token_embed: head: a sparse result weighs each row with the head's "
                                     "last dense layer, of one output")
        for space in ("host", "device"):
            for params, message in (({"top_k": 0}, 'request 0 (id "a"): top_k: must be at least 1, got 0'),
                                    ({"spans": [[0, 1]]}, 'request 0 (id "a"): spans: a sparse result lists one '
                                                          'row a request: give no spans')):
                with self.subTest(space=space, params=params):
                    batch = Batch(H, {"embed": "max"})
                    batch.spec["result_dtype"] = "sparse"
                    good_step(batch, "before")
                    batch.step(ROWS[:2], [request("a", "embed", 2, **params)])
                    self.check_refused(batch, "step 1: " + message, written=["before"], space=space)
        self.step_error([request("a", "embed", 3, top_k=2)],
                        'request 0 (id "a"): top_k: applies to sparse results only (seqpool::sparse_entry, result_dtype "sparse")')

    def test_parts(self):
        dense = {"name": "d", "task": "embed", "method": "mean"}
        tokens = {"name": "t", "task": "token_embed", "method": "all"}

        def with_parts(*parts, **top):
            return lambda spec: (spec.pop("poolers"), spec.update(parts=list(parts), **top))

        self.config_error(lambda s: s.update(parts=[dense]), "poolers: given beside parts (each part names its own)")
        self.config_error(with_parts(dense, result_dtype="float16"),
                          "result_dtype: given beside parts (each part names its own)")
        self.config_error(with_parts(), "parts: expected a non-empty array of parts")
        self.config_error(with_parts(dense, dict(dense)), 'parts[1].name: "d" names an earlier part too')
        self.config_error(with_parts(dict(dense, name="a/b")), "parts[0].name: must be a plain file name")
        self.config_error(with_parts(dict(dense, task="pool")), 'parts[0].task: unknown task "pool"')
        self.config_error(with_parts(dict(dense, method="all")), 'parts[0].method: method "all" cannot serve embed')
        self.config_error(with_parts(dict(dense, result_dtype="int8")),
                          'parts[0].result_dtype: int8 results need "ranges"')
        self.config_error(with_parts(dict(dense, pooler="x")), 'parts[0]: unknown field "pooler"')
        self.config_error(with_parts(dict(dense, name="audit.jsonl")),
                          'parts[0].name: "audit.jsonl" names --audit\'s file')
        self.config_error(with_parts(dict(dense, classifier={})),
                          "parts[0].classifier: a part of task embed has no classifier (its head is its projector)")
        self.config_error(with_parts(dict(tokens, task="token_classify", projector={})),
                          "parts[0].projector: a part of task token_classify has no projector (its head is its "
                          "classifier)")
        # Filters the library refuses, named as the parts' (before any step runs).
        for part, message in ((dict(dense, drop_first=True),
                               "part_filters: part 0 pools a sequence method; only token parts drop rows"),
                              (dict(tokens, drop_token_ids=[3, 1]), "part_filters: part 0's drop_token_ids: id 1 is "
                                                                     "1 after 3; the ids must be strictly ascending")):
            batch = Batch(H, None)
            batch.parts(part)
            good_step(batch, "before")
            self.check_refused(batch, "seqpool: error: parts: " + message)
        # Knobs no part takes, per step, after the steps before it wrote their parts' results.
        for space in ("host", "device"):
            with self.subTest(space=space):
                batch = Batch(H, None)
                batch.parts(dense, tokens)
                good_step(batch, "before")
                batch.step(ROWS[:2], [request("a", "embed", 2, token_ids=[1, 2], top_k=1)])
                run = batch.run(space)
                self.assertEqual(run.returncode, 2, run.stderr)
                self.assertEqual(run.stderr, 'seqpool: error: step 1: request 0 (id "a"): top_k: no part of this '
                                             'multi_pooler takes it (sparse parts do)\n')
                self.assertEqual(sorted(p.name for p in (batch.out / "d").iterdir()), ["before.npy"])
                self.assertEqual(sorted(p.name for p in (batch.out / "t").iterdir()), ["before.npy"])

    def test_platt_and_problem_type(self):
        self.config_error(lambda s: s.update(classifier={"logit_sigma": 0}),
                          "classifier.logit_sigma: must not be 0 as a float")
        # Within float's range, but below its smallest subnormal: 0 once read as the float it is used as.
        self.config_error(lambda s: s.update(classifier={"logit_sigma": 1e-50}),
                          "classifier.logit_sigma: must not be 0 as a float")
        self.config_error(lambda s: s.update(classifier={"logit_mean": "1"}),
                          "classifier.logit_mean: expected a finite number")
        self.config_error(lambda s: s.update(classifier={"logit_mean": 1e39}),
                          "classifier.logit_mean: expected a finite number within float's range")
        self.config_error(lambda s: s.update(classifier={"problem_type": "ranking"}),
                          'classifier.problem_type: "ranking" is not single_label, multi_label or regression')

    def test_hidden_size(self):
        self.config_error(lambda s: s.update(hidden_size=0), "hidden_size: must be in [1, 2147483647], got 0")
        # Too wide for any pooler: the batch's field is named, not the first pooler's.
        self.config_error(lambda s: s.update(hidden_size=10**18),
                          "hidden_size: must be in [1, 2147483647], got 1000000000000000000")
        self.config_error(lambda s: s.update(hidden_size="4"), "hidden_size: expected an integer")
        self.config_error(lambda s: s.pop("hidden_size"), "hidden_size: missing")

    def test_command_line_misuse(self):
        import subprocess
        from batches import TOOL
        for args in ([], ["batch.json"], ["batch.json", "--out", "x", "--space", "gpu"]):
            run = subprocess.run([TOOL, *args], capture_output=True, text=True)
            self.assertEqual(run.returncode, 2, args)
            self.assertTrue(run.stderr.startswith("seqpool: error: "), run.stderr)
        # A folder where a file is named: the error names it.
        with tempfile.TemporaryDirectory() as folder:
            run = subprocess.run([TOOL, folder, "--out", folder + "/out"], capture_output=True, text=True)
            self.assertEqual(run.returncode, 2)
            self.assertEqual(run.stderr, f"seqpool: error: {folder}: is a folder, not a batch file\n")
        # --out that cannot be made a folder: the error names --out.
        batch = Batch(H, {"embed": "mean"})
        good_step(batch, "a")
        batch.run()
        (batch.folder / "file").write_text("x")
        (batch.folder / "dangling").symlink_to(batch.folder / "nowhere")
        for out, reason in ((batch.folder / "file", "Not a directory"), (batch.folder / "dangling", "File exists"),
                            ("", None)):
            run = subprocess.run([TOOL, str(batch.folder / "batch.json"), "--out", str(out)], capture_output=True,
                                 text=True)
            self.assertEqual(run.returncode, 2, run.stderr)
            self.assertEqual(run.stderr, "seqpool: error: --out: names no folder\n" if reason is None else
                             f"seqpool: error: --out: cannot make the folder {out}: {reason}\n")
        # A part's folder taken by a file: the error names the step and the part.
        parts = Batch(H, None)
        parts.parts({"name": "d", "task": "embed", "method": "mean"})
        good_step(parts, "a")
        (parts.folder / "out").mkdir()
        (parts.folder / "out" / "d").write_text("x")
        run = parts.run()
        self.assertEqual(run.returncode, 2, run.stderr)
        self.assertIn('seqpool: error: step 0: part "d": cannot make the folder', run.stderr)
        batch = Batch(H, {"embed": "mean"})
        batch.step(ROWS[:1], [request("a", "embed", 1)])
        hidden = batch.folder / batch.spec["steps"][-1]["hidden_states"]
        hidden.unlink()
        hidden.mkdir()
        self.check_refused(batch, f"step 0: hidden_states: {hidden}: is a folder, not an .npy file")

    # Inputs that must not crash, hang or allocate without bound

    def test_huge_prompt_len_is_an_error_or_works(self):
        for space in ("host", "device"):
            for poolers, task in (({"embed": "mean"}, "embed"), ({"token_embed": "all"}, "token_embed")):
                with self.subTest(space=space, task=task):
                    batch = Batch(H, poolers)
                    batch.step(ROWS[:2], [request("big", task, 2**31 - 1, 2)])
                    run = batch.run(space)
                    self.assertIn(run.returncode, (0, 2), run.stderr)
                    if run.returncode == 2:
                        self.assertTrue(run.stderr.startswith("seqpool: error: step 0: "), run.stderr)
        batch = Batch(H, {"embed": "mean"})
        batch.step(ROWS[:2], [request("a", "embed", 2**62, 2**62), request("b", "embed", 2**62, 2**62)])
        self.check_refused(batch, "step 0: ")


if __name__ == "__main__":
    unittest.main()
