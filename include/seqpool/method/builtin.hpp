// The built-in methods: the one list the runtime choice, seqpool-run and the docs take them from.
#pragma once

#include <seqpool/method/all.hpp>
#include <seqpool/method/cls.hpp>
#include <seqpool/method/concat.hpp>
#include <seqpool/method/last.hpp>
#include <seqpool/method/max.hpp>
#include <seqpool/method/mean.hpp>
#include <seqpool/method/mean_sqrt_len.hpp>
#include <seqpool/method/runtime.hpp>
#include <seqpool/method/runtime_concat.hpp>
#include <seqpool/method/step.hpp>
#include <seqpool/method/weighted_mean.hpp>

namespace seqpool::method {

// A built-in method is a header of its own and an entry here: the
// configurable table, seqpool-run (`--methods` lists them) and the tests that
// run every method take it from these lists, and a CLI test holds SPEC
// section 9's list of names to them.

/// Any built-in sequence method (CLS, LAST, MEAN, MAX, weighted MEAN,
/// MEAN_SQRT_LEN), or a concat of two or three of them (runtime_concat).
/// Each count of modes compiles every kernel once more (the two take a
/// table's compile time up by half under g++, twice under nvcc: PERFORMANCE.md,
/// Build); a table that needs four or more names
/// runtime_concat<4> and on in its own runtime_method.
using any_sequence =
    runtime_method<cls, last, mean, max, weighted_mean, mean_sqrt_len, runtime_concat<2>, runtime_concat<3>>;

/// Any built-in token method (ALL, STEP).
using any_token = runtime_method<all, step>;

}  // namespace seqpool::method
