// pooler<Method, Head, Space, Result>: one pooling method and one head in one memory space.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <seqpool/batch.hpp>
#include <seqpool/detail/pooling_unit.hpp>
#include <seqpool/head/concepts.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/sparse.hpp>
#include <seqpool/step_runner.hpp>

namespace seqpool {

template <class Table>
class dispatcher;
template <class... Poolers>
class multi_pooler;
template <class Space>
class runtime_part;

/// Pools the requests of one task: a step runner (plan, reserve, forward;
/// capture, restage) of one entry, a method and a head in a space.
///
/// Results are float, or, with Result = half or bfloat16 (seqpool's or CUDA's),
/// 16-bit: methods and heads still work in float, and each value is rounded to
/// nearest even once, as it is stored; or quantized as they are stored: int8
/// and uint8 on calibration ranges (set_ranges), binary and ubinary sign bits
/// packed 8 columns a byte; or sparse_entry: each finishing request's weights
/// listed by id — a token method's rows, weighed by a head whose last layer has
/// one output, by token id (BGE-M3); a sequence method's row by column (SPLADE).
/// A dispatcher takes poolers into its table.
template <class Method, pooling_head Head, memory_space Space, class Result = float>
  requires result_element<Result> || sparse_element<Result>
class pooler : public step_runner<Space, Result, detail::pooling_unit<Method, Head, Space, Result>> {
  using runner = step_runner<Space, Result, detail::pooling_unit<Method, Head, Space, Result>>;

 public:
  using result_type = Result;
  using method_type = Method;
  using head_type = Head;
  using unit_type = detail::pooling_unit<Method, Head, Space, Result>;

  static constexpr bool token_wise = unit_type::token_wise;
  static constexpr seqpool::task task = unit_type::task;

  pooler(Space& space, std::int64_t hidden_size, Method method = {}, Head head = {})
      : runner(space, std::string(" here (this one serves ") + std::string(name(task)) + ")",
               unit_type(space, hidden_size, std::move(method), head)) {}

  /// int8 and uint8 results: the per-column calibration ranges their values
  /// are quantized on (SPEC section 3), copied into the space's memory.
  void set_ranges(const quantization_ranges& ranges)
    requires ranged_element<Result>
  {
    this->check_holds_units();
    this->template unit<0>().set_ranges(ranges);
  }

  /// Sparse results: the weight an id's must be above to be listed (0 until
  /// set), from the next plan on (a captured step takes it when restaged).
  void set_weight_floor(float floor)
    requires sparse_element<Result>
  {
    this->check_holds_units();
    this->template unit<0>().set_weight_floor(floor);
  }

  const Method& method() const { return this->template unit<0>().method(); }
  const Head& head() const { return this->template unit<0>().head(); }

 private:
  template <class Table>
  friend class dispatcher;
  template <class... Poolers>
  friend class multi_pooler;
  template <class S>
  friend class runtime_part;

  /// What a dispatcher, a multi_pooler or a runtime_part takes from the pooler
  /// it is given; the pooler that is left plans and runs nothing, and the
  /// staging slot a reserve() of its set aside goes back to the ring.
  unit_type&& take_unit() && {
    this->check_holds_units();
    this->give_up_units();
    return std::move(this->template unit<0>());
  }
};

}  // namespace seqpool
