// multi_pooler<Poolers...>: several results of every request from one step.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <seqpool/part.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/pooler.hpp>
#include <seqpool/step_runner.hpp>

namespace seqpool {

/// Pools every request of a step with each of its parts, a pooler each, into
/// an output of the part's own: BGE-M3's dense CLS embedding, sparse weights
/// and ColBERT vectors from one forward pass, or any set a user composes. It is
/// a step runner (plan, reserve, forward; capture, restage) whose plans are
/// parts_plans: the whole step is planned once, uploaded as one image, and each
/// part's kernels read the rows it needs from the same hidden states.
///
/// A request's task is not read: each part pools it for the task its pooler
/// serves, with the request's knobs that apply to the part (SPEC section 5)
/// and, for a token part, the token filters the part adds. Chunked requests
/// keep one state a part in the state store (release() drops them all).
///
///     seqpool::multi_pooler<dense, sparse, colbert> m3(space, {dense(...)},
///         {sparse(...), {.drop_token_ids = {0, 1, 2, 3}}}, {colbert(...), {.drop_first = true}});
///     auto plan = m3.plan(batch, state);
///     m3.reserve(plan, state);
///     m3.forward(hidden, plan, state, dense_out, sparse_out, colbert_out);
///     // plan.parts[k].results[i]: where request i's result lies in part k's output
template <class... Poolers>
class multi_pooler : public step_runner<typename std::tuple_element_t<0, std::tuple<Poolers...>>::space_type,
                                        detail::output_per_part, typename Poolers::unit_type...> {
  using space = typename std::tuple_element_t<0, std::tuple<Poolers...>>::space_type;
  using runner = step_runner<space, detail::output_per_part, typename Poolers::unit_type...>;
  static_assert((std::is_same_v<typename Poolers::space_type, space> && ...),
                "multi_pooler: every part must work in the same memory space");

 public:
  static constexpr std::size_t parts = sizeof...(Poolers);
  /// Part `Part`'s result type, of which its output holds plan.parts[Part].output_size values.
  template <std::size_t Part>
  using part_result = typename std::tuple_element_t<Part, std::tuple<Poolers...>>::result_type;

  explicit multi_pooler(space& memory, part<Poolers>... parts)
      : runner(memory, std::array<part_filters, sizeof...(Poolers)>{std::move(parts.filters)...},
               std::move(parts.pooler).take_unit()...) {}
};

}  // namespace seqpool
