// any_unit: a pooling unit of any method, head and result type, chosen at run
// time: what a runtime_multi_pooler's parts are to its step runner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/planner.hpp>
#include <seqpool/detail/pooling_unit.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/route_knobs.hpp>
#include <seqpool/detail/share.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/part_output.hpp>
#include <seqpool/result_slice.hpp>
#include <seqpool/state.hpp>

namespace seqpool::detail {

/// A pooling_unit behind an interface that names none of its types, so that
/// one step runner holds a list of them, as many as a program chooses. What a
/// step runner asks of a unit goes through one virtual call a share; its
/// kernels are the unit's own. Making one instantiates the unit's launches for
/// every hidden type and both sizings (a step may give any of them), which a
/// pooler of known type compiles only as its calls ask.
template <class Space>
class any_unit {
 public:
  using states = part_states<state_store<Space>>;

  template <class Method, class Head, class Result>
  explicit any_unit(pooling_unit<Method, Head, Space, Result>&& unit)
      : task(unit.task),
        sparse(unit.sparse),
        token_wise(unit.token_wise),
        result_bytes(unit.result_bytes),
        result_type_name(result_name<Result>()),
        held_(std::make_unique<held<pooling_unit<Method, Head, Space, Result>>>(std::move(unit))) {}

  seqpool::task task;
  bool sparse;
  bool token_wise;
  std::size_t result_bytes;
  std::string_view result_type_name;  ///< its results' type, which an output must hold

  /// Whether it holds a unit: not once moved from.
  bool holds() const { return held_ != nullptr; }
  std::int64_t hidden_size() const { return held_->hidden_size(); }
  bool belongs_to(const Space& space) const { return held_->belongs_to(space); }
  void plan(const batch& step, std::span<const chunk> chunks, std::span<const std::size_t> chosen, const states& state,
            std::int64_t output_begin, bool bounded, share& into, std::span<std::optional<result_slice>> results,
            planner_scratch& scratch) const {
    held_->plan(step, chunks, chosen, state, output_begin, bounded, into, results, scratch);
  }
  void size_for(const capacity& limits) { held_->size_for(limits); }
  const share_bounds& bounds() const { return held_->bounds(); }
  void check_fits(const share& planned) const { held_->check_fits(planned); }
  void reserve(const share& planned) { held_->reserve(planned); }
  bool has_room_for(const share& planned) const { return held_->has_room_for(planned); }

  /// The unit's launch, into `output`, an output of its result type (the step
  /// runner checked the type). CUDA's __half and __nv_bfloat16 rows are read
  /// as seqpool's half and bfloat16, which hold the same bits.
  template <sized_by Sizing, hidden_element T>
  void launch(hidden_view<T> hidden, const record_counts& counts, const std::byte* image, void* output,
              std::int64_t output_values) {
#if SEQPOOL_HAS_CUDA_FLOAT16
    if constexpr (std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>) {
      using same_bits = std::conditional_t<std::is_same_v<T, __nv_bfloat16>, bfloat16, half>;
      const hidden_view<same_bits> read(reinterpret_cast<const same_bits*>(hidden.data_handle()), hidden.mapping());
      held_->launch(Sizing, read, counts, image, output, output_values);
      return;
    } else
#endif
      held_->launch(Sizing, hidden, counts, image, output, output_values);
  }

 private:
  /// The calls of a step runner, one overload of launch() a hidden type
  /// (seqpool's three).
  struct erased {
    virtual ~erased() = default;
    virtual std::int64_t hidden_size() const = 0;
    virtual bool belongs_to(const Space&) const = 0;
    virtual void plan(const batch&, std::span<const chunk>, std::span<const std::size_t>, const states&, std::int64_t,
                      bool, share&, std::span<std::optional<result_slice>>, planner_scratch&) const = 0;
    virtual void size_for(const capacity&) = 0;
    virtual const share_bounds& bounds() const = 0;
    virtual void check_fits(const share&) const = 0;
    virtual void reserve(const share&) = 0;
    virtual bool has_room_for(const share&) const = 0;
    virtual void launch(sized_by, hidden_view<float>, const record_counts&, const std::byte*, void*, std::int64_t) = 0;
    virtual void launch(sized_by, hidden_view<half>, const record_counts&, const std::byte*, void*, std::int64_t) = 0;
    virtual void launch(sized_by, hidden_view<bfloat16>, const record_counts&, const std::byte*, void*,
                        std::int64_t) = 0;
  };

  template <class Unit>
  struct held final : erased {
    explicit held(Unit&& made) : unit(std::move(made)) {}
    Unit unit;

    std::int64_t hidden_size() const override { return unit.hidden_size(); }
    bool belongs_to(const Space& space) const override { return unit.belongs_to(space); }
    void plan(const batch& step, std::span<const chunk> chunks, std::span<const std::size_t> chosen,
              const states& state, std::int64_t output_begin, bool bounded, share& into,
              std::span<std::optional<result_slice>> results, planner_scratch& scratch) const override {
      unit.plan(step, chunks, chosen, state, output_begin, bounded, into, results, scratch);
    }
    void size_for(const capacity& limits) override { unit.size_for(limits); }
    const share_bounds& bounds() const override { return unit.bounds(); }
    void check_fits(const share& planned) const override { unit.check_fits(planned); }
    void reserve(const share& planned) override { unit.reserve(planned); }
    bool has_room_for(const share& planned) const override { return unit.has_room_for(planned); }
    void launch(sized_by sizing, hidden_view<float> hidden, const record_counts& counts, const std::byte* image,
                void* output, std::int64_t values) override {
      launch_as(sizing, hidden, counts, image, output, values);
    }
    void launch(sized_by sizing, hidden_view<half> hidden, const record_counts& counts, const std::byte* image,
                void* output, std::int64_t values) override {
      launch_as(sizing, hidden, counts, image, output, values);
    }
    void launch(sized_by sizing, hidden_view<bfloat16> hidden, const record_counts& counts, const std::byte* image,
                void* output, std::int64_t values) override {
      launch_as(sizing, hidden, counts, image, output, values);
    }

    template <class T>
    void launch_as(sized_by sizing, hidden_view<T> hidden, const record_counts& counts, const std::byte* image,
                   void* output, std::int64_t values) {
      auto* typed = static_cast<typename Unit::result_type*>(output);
      if (sizing == sized_by::plan)
        unit.template launch<sized_by::plan>(hidden, counts, image, typed, values);
      else
        unit.template launch<sized_by::capacity>(hidden, counts, image, typed, values);
    }
  };

  std::unique_ptr<erased> held_;
};

}  // namespace seqpool::detail
