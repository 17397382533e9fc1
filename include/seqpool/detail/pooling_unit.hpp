// pooling_unit: one method and one head in one space, the memory their kernels
// use, and the family of algorithms that plans and launches them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/algorithms.hpp>
#include <seqpool/detail/planner.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/share.hpp>
#include <seqpool/error.hpp>
#include <seqpool/head/concepts.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/quantized.hpp>
#include <seqpool/result_slice.hpp>
#include <seqpool/space/buffer.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool::detail {

/// What a pooler is to the step runner that drives it: it plans its share of a
/// step, makes room for it, and launches its kernels over the step's image. A
/// method chosen at run time (runtime_method) is visited here, on the host, so
/// the kernels are always those of a concrete method.
template <class Method, class Head, class Space, class Result>
class pooling_unit {
  // First, so that a user's method that misses a member learns which before anything else.
  static_assert(method_is_complete<Method>());

 public:
  using algorithms = algorithms_of<Space>;
  using result_type = Result;
  static constexpr bool token_wise = Method::kind == method_kind::token;
  static constexpr bool sparse = sparse_element<Result>;
  static constexpr std::size_t result_bytes = sizeof(Result);
  static constexpr seqpool::task task = task_of(token_wise, Head::kind);

  pooling_unit(Space& space, std::int64_t hidden_size, Method method, Head head)
      : space_(&space),
        hidden_size_(hidden_size),
        method_(std::move(method)),
        head_(head),
        workspace_(space, 0),
        arrivals_(space, 0),
        ranges_(space, 0) {
    // Records hold widths in 32 bits.
    if (hidden_size < 1 || hidden_size > std::numeric_limits<std::int32_t>::max() / modes())
      fail("hidden_size", "must be in [1, ", std::numeric_limits<std::int32_t>::max() / modes(), "], got ",
           hidden_size);
    // The built-in heads check their layers when made; a user's head is checked
    // here, so that no layer reads past the rows the plan gives between layers.
    checked(head_.layers(), "layers");
    if constexpr (sparse_element<Result> && token_wise) {
      const dense_stack layers = head_.layers();
      if (!layers.present() || layers.out_features() != 1)
        fail("head", "a sparse result weighs each row with the head's last dense layer, of one output (BGE-M3's "
             "sparse_linear: [1, hidden_size] with relu); this head's ",
             layers.present() ? "last layer has " + std::to_string(layers.out_features()) + " outputs"
                              : std::string("has no dense layer"));
    }
  }

  /// Sparse results: an id is listed where its weight is above `floor` (0
  /// until set: BGE-M3's weights above 0), from the next plan on (the plan's
  /// lists carry it, so a restaged capture takes it too).
  void set_weight_floor(float floor)
    requires sparse_element<Result>
  {
    if (std::isnan(floor)) fail("floor", "must be a number, got NaN");
    floor_ = floor;
  }

  /// int8 and uint8 results: copies the calibration ranges into the space's
  /// memory, outside any step; they cover at least the columns of every result.
  /// Ranges set again must have the same width: they are copied over the
  /// first, where a captured step's kernels read them.
  void set_ranges(const quantization_ranges& ranges)
    requires ranged_element<Result>
  {
    const std::size_t columns = ranges.lower.size();
    if (columns == 0 || ranges.upper.size() != columns)
      fail("ranges", "lower and upper need one value per result column, the same number, got ", ranges.lower.size(),
           " and ", ranges.upper.size());
    if (ranges_.size() != 0 && ranges_.size() != 2 * columns)
      fail("ranges", "set again, they keep their width of ", ranges_.size() / 2, " columns, got ", columns);
    // [lower | steps], as result_encoding reads them, copied in at once.
    std::vector<float> lower_and_steps(ranges.lower.begin(), ranges.lower.end());
    lower_and_steps.resize(2 * columns);
    for (std::size_t c = 0; c < columns; ++c) {
      const float step = step_of(ranges.lower[c], ranges.upper[c]);
      if (!(ranges.lower[c] < ranges.upper[c]) || !std::isfinite(step) || !(step > 0.0f))
        fail("ranges", "each column needs lower < upper, both finite and a step above 0; column ", c, " has lower ",
             ranges.lower[c], " and upper ", ranges.upper[c]);
      lower_and_steps[columns + c] = step;
    }
    if (ranges_.size() == 0) ranges_ = buffer<float, Space>(*space_, 2 * columns);
    space_->copy_in(std::span<const float>(lower_and_steps), ranges_.span());
  }

  std::int64_t hidden_size() const { return hidden_size_; }
  /// Whether it was made on `space`, where its memory lies and its launches go.
  bool belongs_to(const Space& space) const { return space_ == &space; }
  const Method& method() const { return method_; }
  const Head& head() const { return head_; }

  /// Plans the requests `chosen` of a step into `into`, with results from
  /// `output_begin` (where each finishing request's result lies written into
  /// `results`, at its batch index), working in `scratch`. `bounded`: the
  /// pooler has a capacity.
  template <class State>
  void plan(const batch& step, std::span<const chunk> chunks, std::span<const std::size_t> chosen, const State& state,
            std::int64_t output_begin, bool bounded, share& into, std::span<std::optional<result_slice>> results,
            planner_scratch& scratch) const {
    if constexpr (ranged_element<Result>)
      if (ranges_.size() == 0)
        fail("ranges", "int8 and uint8 results need calibration ranges: give them to set_ranges() before planning");
    const pooler_shape shape = shape_of(bounded);
    with_method([&]<class M>(const M& method) {
      planner<algorithms>::plan(method, head_, shape, step, chunks, chosen, state, output_begin, into, results,
                                scratch);
    });
  }

  /// Sizes the unit for every share within `limits`, outside any step, so that
  /// a captured step's workspace and counters never move.
  void size_for(const capacity& limits) {
    bounds_ = planner<algorithms>::bounds(limits, shape_of(true), widest_result(), token_wise);
    grow(bounds_.workspace_floats, bounds_.arrivals);
  }

  /// The most a share within the capacity needs (size_for() must have run).
  const share_bounds& bounds() const { return bounds_; }

  /// A share within the capacity stays within what size_for() sized, so a
  /// captured step's launches and memory cover it.
  void check_fits(const share& planned) const {
    const record_counts counts = planned.records.counts();
    const bool within =
        counts.tiles <= bounds_.records.tiles && counts.works <= bounds_.records.works &&
        counts.combines <= bounds_.records.combines && counts.gathers <= bounds_.records.gathers &&
        counts.gather_bases <= bounds_.records.gather_bases && counts.mask_words <= bounds_.records.mask_words &&
        counts.linears <= bounds_.records.linears && counts.sparse_lists <= bounds_.records.sparse_lists &&
        counts.sparse_slots <= bounds_.records.sparse_slots && counts.sparse_order <= bounds_.records.sparse_order &&
        planned.image_bytes <= bounds_.image_bytes && planned.workspace_floats <= bounds_.workspace_floats &&
        planned.arrivals <= bounds_.arrivals;
    if (!within) fail("capacity", "the step's records exceed what the capacity was sized for");
  }

  /// Outside the step: the workspace and the arrival counters a share needs.
  void reserve(const share& planned) { grow(planned.workspace_floats, planned.arrivals); }

  /// Whether reserve() made the room a share needs.
  bool has_room_for(const share& planned) const {
    return std::cmp_greater_equal(workspace_.size(), planned.workspace_floats) &&
           std::cmp_greater_equal(arrivals_.size(), planned.arrivals);
  }

  /// Launches the unit's kernels over its image (on the device, or on the host
  /// for host_space), writing into the step's whole `output`. `counts` sizes the
  /// launches: a share's, or the capacity's for a captured step (Sizing says which).
  template <sized_by Sizing, hidden_element T>
  void launch(hidden_view<T> hidden, const record_counts& counts, const std::byte* image, Result* output,
              std::int64_t output_values) {
    const launch_buffers<Result> into{output, output_values, workspace_.data(), arrivals_.data(), encoding()};
    with_method([&]<class M>(const M& method) {
      algorithms::template launch<Sizing>(*space_, method, head_, hidden, counts, image, into);
    });
  }

  /// The widest row a result can have.
  std::int64_t widest_result() const {
    const dense_stack layers = head_.layers();
    return std::max(modes() * hidden_size_, layers.present() ? layers.out_features() : 0);
  }

  /// The modes of the method (a concat's methods; 1 otherwise).
  std::int64_t modes() const {
    std::int64_t count = 1;
    with_method([&]<class M>(const M&) { count = modes_of<M>; });
    return count;
  }

 private:
  pooler_shape shape_of(bool bounded) const {
    const dense_stack layers = head_.layers();  // a head gives its layers by value
    return {.hidden_size = hidden_size_,
            .modes = modes(),
            .has_linear = layers.present(),
            .between_floats = layers.between_floats(),
            .result_bytes = static_cast<std::int64_t>(sizeof(Result)),
            .bounded = bounded,
            .quantized = quantized_element<Result>,
            .columns_per_value = columns_per_value<Result>,
            .ranged_columns = ranged_element<Result> ? static_cast<std::int64_t>(ranges_.size() / 2) : -1,
            .sparse = sparse_element<Result>,
            .floor = floor_};
  }

  /// How the kernels store a row: for int8 and uint8, on the ranges' lower bounds and steps in the space's memory.
  result_encoding<Result> encoding() const {
    if constexpr (ranged_element<Result>)
      return {ranges_.data(), ranges_.data() + ranges_.size() / 2};
    else
      return {};
  }

  /// Calls `work` with the method as its concrete type, visiting a runtime choice on the host.
  template <class Work>
  void with_method(Work&& work) const {
    if constexpr (is_runtime_method<Method>)
      method_.visit(work);
    else
      work(method_);
  }

  void grow(std::int64_t workspace_floats, std::int64_t arrivals) {
    if (std::cmp_less(workspace_.size(), workspace_floats))
      workspace_ = buffer<float, Space>(*space_, static_cast<std::size_t>(workspace_floats));
    if (std::cmp_less(arrivals_.size(), arrivals)) {
      arrivals_ = buffer<int, Space>(*space_, static_cast<std::size_t>(arrivals));
      space_->zero(arrivals_.data(), arrivals_.size() * sizeof(int));  // the last block to arrive resets its counter
    }
  }

  Space* space_;
  std::int64_t hidden_size_;
  Method method_;
  Head head_;
  buffer<float, Space> workspace_;
  buffer<int, Space> arrivals_;
  buffer<float, Space> ranges_;  ///< int8 and uint8: every column's lower bound, then every column's step
  float floor_ = 0.0f;           ///< sparse results: the weight an id's must be above to be listed
  share_bounds bounds_;
};

}  // namespace seqpool::detail
