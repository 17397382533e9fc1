// Runs steps through poolers the way an engine does, under the audit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include <seqpool/seqpool.hpp>

namespace test {

/// A result copied back to the host.
struct matrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<float> values;

  float at(std::int64_t row, std::int64_t col) const { return values[row * cols + col]; }

  friend bool operator==(const matrix&, const matrix&) = default;  ///< bit for bit (but for NaNs and signed zeros)
};

using results = std::vector<std::optional<matrix>>;

template <class T>
std::vector<T> convert(const std::vector<float>& values) {
  std::vector<T> converted;
  converted.reserve(values.size());
  for (const float value : values) converted.push_back(static_cast<T>(value));
  return converted;
}

/// What a value of T reads as once stored: the reference pools what the library sees.
template <class T>
std::vector<float> round_trip(const std::vector<float>& values) {
  std::vector<float> rounded;
  rounded.reserve(values.size());
  for (const T value : convert<T>(values)) rounded.push_back(seqpool::detail::to_float(value));
  return rounded;
}

template <class T, class Space>
seqpool::buffer<T, Space> to_space(Space& space, const std::vector<T>& values) {
  seqpool::buffer<T, Space> copy(space, values.size());
  space.copy_in(std::span<const T>(values), copy.span());
  return copy;
}

template <class T, class Space>
std::vector<T> to_host(Space& space, const seqpool::buffer<T, Space>& values) {
  std::vector<T> copy(values.size());
  space.copy_out(cuda::std::span<const T>(values.data(), values.size()), std::span<T>(copy));
  return copy;
}

/// SPEC section 6, as the space counted it during one forward.
inline void check_sync_contract(const seqpool::audit_counts& step) {
  CHECK(step.uploads <= 1);
  CHECK(step.downloads == 0);
  CHECK(step.waits == 0);
  CHECK(step.allocations == 0);
}

/// An output value read as float: a quantized one as the number it stores
/// (packed sign bits as their byte, binary's less 128).
template <class Result>
float value_of(Result value) {
  if constexpr (std::is_same_v<Result, seqpool::binary> || std::is_same_v<Result, seqpool::ubinary>)
    return static_cast<float>(value.bits);
  else if constexpr (seqpool::quantized_element<Result>)
    return static_cast<float>(value);
  else
    return seqpool::detail::to_float(value);
}

/// Cuts a step's output into per-request results, in batch order, read as float.
template <class Plan, class Result>
results slice(const Plan& plan, const std::vector<Result>& output) {
  results sliced;
  for (const auto& result : plan.results) {
    if (!result) {
      sliced.emplace_back();
      continue;
    }
    matrix values{result->rows, result->cols, {}};
    for (std::int64_t i = 0; i < result->rows * result->cols; ++i)
      values.values.push_back(value_of(output[result->offset + i]));
    sliced.push_back(std::move(values));
  }
  return sliced;
}

/// One step through a pooler or a dispatcher: plan (into `plan`, reusing it),
/// reserve, then forward under the audit, which must show the sync contract
/// kept; the output, copied back. `hidden` is row-major with `row_stride`
/// elements a row, the first hidden_size of which are the row.
template <class Pooler, class T>
std::vector<typename Pooler::result_type> forward_step(typename Pooler::space_type& space, Pooler& pooler,
                                                       seqpool::state_store<typename Pooler::space_type>& state,
                                                       const seqpool::batch& step, const std::vector<T>& hidden,
                                                       std::int64_t row_stride, seqpool::step_plan& plan) {
  using Space = typename Pooler::space_type;
  const auto on_device = to_space(space, hidden);
  pooler.plan(step, state, plan);
  pooler.reserve(plan, state);
  seqpool::buffer<typename Pooler::result_type, Space> output(space, static_cast<std::size_t>(plan.output_size));
  const std::int64_t rows = static_cast<std::int64_t>(hidden.size()) / row_stride;
  {
    const seqpool::audit_scope scope(space.audit());
    pooler.forward(seqpool::make_hidden_view(on_device.data(), rows, pooler.hidden_size(), row_stride), plan, state,
                   output.span());
    check_sync_contract(scope.counts());
  }
  return to_host(space, output);
}

/// forward_step(), its output cut into per-request results read as float.
template <class Pooler, class T>
results run_step(typename Pooler::space_type& space, Pooler& pooler,
                 seqpool::state_store<typename Pooler::space_type>& state, const seqpool::batch& step,
                 const std::vector<T>& hidden, std::int64_t row_stride, seqpool::step_plan& plan) {
  return slice(plan, forward_step(space, pooler, state, step, hidden, row_stride, plan));
}

template <class Pooler, class T>
results run_step(typename Pooler::space_type& space, Pooler& pooler,
                 seqpool::state_store<typename Pooler::space_type>& state, const seqpool::batch& step,
                 const std::vector<T>& hidden, std::int64_t row_stride) {
  seqpool::step_plan plan;
  return run_step(space, pooler, state, step, hidden, row_stride, plan);
}

template <class Pooler, class T>
results run_step(typename Pooler::space_type& space, Pooler& pooler,
                 seqpool::state_store<typename Pooler::space_type>& state, const seqpool::batch& step,
                 const std::vector<T>& hidden) {
  return run_step(space, pooler, state, step, hidden, pooler.hidden_size());
}

/// Whether what a plan's planning worked in, which the plan keeps for the next
/// plan made into it, holds no view of the batch planned (SPEC section 2: the
/// caller may free it once plan() returns): no token method's decisions, whose
/// kept columns are a request's, and no token ids in the step as a
/// multi_pooler's parts planned it.
inline bool keeps_no_view_of_batch(const seqpool::detail::step_program& program) {
  const auto routed_ids = [](const seqpool::batch& routed) {
    return std::ranges::any_of(routed.requests, [](const seqpool::request& r) { return !r.prompt_token_ids.empty(); });
  };
  return program.scratch.planner.token_decisions.empty() &&
         std::ranges::none_of(program.scratch.part_batches, routed_ids);
}

/// A request id: `prefix` and a number.
inline std::string id(std::string_view prefix, std::int64_t number) { return seqpool::detail::concat(prefix, number); }

/// A request with everything scheduled at once.
inline seqpool::request whole(seqpool::request_id id, seqpool::task pooling_task, std::int64_t prompt_len,
                              seqpool::pooling_params params = {}) {
  return {.id = std::move(id),
          .task = pooling_task,
          .prompt_len = prompt_len,
          .num_computed = 0,
          .num_scheduled = prompt_len,
          .prompt_token_ids = {},
          .params = std::move(params)};
}

/// A chunk of a prompt: `num_scheduled` tokens after `num_computed`.
inline seqpool::request part(seqpool::request_id id, seqpool::task pooling_task, std::int64_t prompt_len,
                             std::int64_t num_computed, std::int64_t num_scheduled,
                             seqpool::pooling_params params = {}) {
  return {.id = std::move(id),
          .task = pooling_task,
          .prompt_len = prompt_len,
          .num_computed = num_computed,
          .num_scheduled = num_scheduled,
          .prompt_token_ids = {},
          .params = std::move(params)};
}

/// Results equal within `tolerance` relative to max(1, |expected|).
inline void check_close(const matrix& actual, const matrix& expected, double tolerance) {
  REQUIRE(actual.rows == expected.rows);
  REQUIRE(actual.cols == expected.cols);
  for (std::size_t i = 0; i < expected.values.size(); ++i) {
    const double want = expected.values[i];
    const double scale = std::max(1.0, std::abs(want));
    if (std::abs(actual.values[i] - want) > tolerance * scale) {
      FAIL_CHECK("value " << i << " (row " << i / expected.cols << ", column " << i % expected.cols << ") is "
                          << actual.values[i] << ", expected " << want);
      return;
    }
  }
}

/// A candidate launch policy's results of a step: those of host_space's step
/// within `tolerance`, and, where the candidate adds in the default policy's
/// order (`same_order`), the default's bit for bit.
inline void check_candidate(const results& actual, const results& expected, const results& by_default, double tolerance,
                            bool same_order) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    REQUIRE(actual[i].has_value() == expected[i].has_value());
    if (!expected[i]) continue;
    check_close(*actual[i], *expected[i], tolerance);
    if (same_order) CHECK(actual[i]->values == by_default[i]->values);
  }
}

/// 16-bit results equal the float results of the same step rounded to nearest
/// even, bit for bit: methods and heads ran in float, and each value was rounded
/// once.
template <class Result>
void check_rounded(const matrix& rounded, const matrix& exact) {
  REQUIRE(rounded.rows == exact.rows);
  REQUIRE(rounded.cols == exact.cols);
  for (std::size_t i = 0; i < exact.values.size(); ++i) {
    const float want = seqpool::detail::to_float(seqpool::detail::round_to<Result>(exact.values[i]));
    if (std::memcmp(&rounded.values[i], &want, sizeof want) != 0) {
      FAIL_CHECK("value " << i << " is " << rounded.values[i] << ", the float result " << exact.values[i]
                          << " rounds to " << want);
      return;
    }
  }
}

/// The steps of calibration ranges, as an int8 or uint8 encoding reads them.
inline std::vector<float> steps_of(const std::vector<float>& lower, const std::vector<float>& upper) {
  std::vector<float> steps;
  for (std::size_t c = 0; c < lower.size(); ++c) steps.push_back(seqpool::detail::step_of(lower[c], upper[c]));
  return steps;
}

/// Quantized results equal the float results of the same step encoded: bit
/// for bit where `exactly` (the host's, which finish both alike), else but
/// where the float result lies so near a boundary of the encoding (a level's
/// integer, or 0 for a sign bit) that the order the kernel summed in, which a
/// drafted row may change, could carry it across: there a level may be one off
/// and a sign bit either.
template <class Result>
void check_encoded(const matrix& encoded, const matrix& exact, const seqpool::detail::result_encoding<Result>& encoding,
                   bool exactly) {
  constexpr int packed = seqpool::detail::columns_per_value<Result>;
  REQUIRE(encoded.rows == exact.rows);
  REQUIRE(encoded.cols == seqpool::detail::values_of<Result>(exact.cols));
  for (std::int64_t row = 0; row < exact.rows; ++row) {
    for (std::int64_t v = 0; v < encoded.cols; ++v) {
      const float got = encoded.at(row, v);
      if constexpr (packed > 1) {
        const std::int64_t first = v * packed;
        const int count = static_cast<int>(std::min<std::int64_t>(packed, exact.cols - first));
        const float* columns = exact.values.data() + row * exact.cols + first;
        const auto byte = [](float value) { return static_cast<unsigned>(static_cast<int>(value)) & 0xffu; };
        const unsigned differ = byte(got) ^ byte(value_of(encoding.pack(columns, count)));
        for (int e = 0; e < packed; ++e)
          if ((differ & (0x80u >> e)) != 0 && (exactly || e >= count || std::abs(columns[e]) > 1e-5f)) {
            FAIL_CHECK("row " << row << ", value " << v << " is " << got << ": bit " << e << " of "
                              << columns[e] << " differs");
            return;
          }
      } else {
        static_assert(seqpool::ranged_element<Result>, "16-bit results are checked by check_rounded");
        const float value = exact.at(row, v);
        const float want = value_of(encoding.encode(value, v));
        if (got == want) continue;
        const float level = (value - encoding.lower[v]) / encoding.step[v];
        if (exactly || std::abs(got - want) > 1.0f || std::abs(level - std::round(level)) > 1e-3f) {
          FAIL_CHECK("row " << row << ", column " << v << " is " << got << ", the float result " << value
                            << " encodes to " << want);
          return;
        }
      }
    }
  }
}

inline void check_equal(const matrix& actual, std::int64_t rows, std::int64_t cols, const std::vector<float>& values) {
  CHECK(actual.rows == rows);
  CHECK(actual.cols == cols);
  CHECK(actual.values == values);
}

}  // namespace test
