// What a pooling method is: the extension point users write their own against.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/config.hpp>

namespace seqpool {

enum class method_kind : std::uint8_t {
  sequence,  ///< reduces a request's rows to one vector
  token,     ///< returns chosen rows (and columns) of a request
};

/// Rows of one chunk that a sequence method reads, counted like chunk rows.
struct row_window {
  std::int64_t begin = 0;
  std::int64_t count = 0;
};

/// What a sequence method does with a request's instruction (the prompt's
/// first pooling_params::instruction_len rows), which it says with
/// `static constexpr seqpool::instruction_rule instruction`.
enum class instruction_rule : std::uint8_t {
  refused,     ///< it cannot leave the instruction out: such a request is refused (a method that does not say)
  excluded,    ///< it pools the rows after the instruction as the prompt it pools
  unaffected,  ///< the rows it reads are where they are with or without an instruction (CLS's first, LAST's last)
};

namespace detail {

// One requirement each, so that a diagnostic names the member that is missing.
template <class M>
concept declares_kind = requires {
  { M::kind } -> std::convertible_to<method_kind>;
};
template <class M>
concept declares_keeps_state = requires {
  { M::keeps_state } -> std::convertible_to<bool>;
};
template <class M>
concept has_window = requires(const M method, const chunk& part) {
  { method.window(part) } -> std::same_as<row_window>;
};
template <class M>
concept has_identity = requires(const M method) {
  { method.identity() } -> std::same_as<float>;
};
template <class M>
concept accumulates_by_position = requires(const M method, float value, std::int64_t position) {
  { method.accumulate(value, value, position) } -> std::same_as<float>;
};

template <class M>
concept has_accumulate = accumulates_by_position<M> || requires(const M method, float value) {
  { method.accumulate(value, value) } -> std::same_as<float>;
};
template <class M>
concept has_merge = requires(const M method, float value) {
  { method.merge(value, value) } -> std::same_as<float>;
};
template <class M>
concept has_finish = requires(const M method, float value, std::int64_t prompt_len) {
  { method.finish(value, prompt_len) } -> std::same_as<float>;
};
template <class M>
concept declares_reads_token_ids = requires {
  { M::reads_token_ids } -> std::convertible_to<bool>;
};
template <class M>
concept has_check = requires(const M method, std::size_t index, const request& r, std::int64_t hidden_size) {
  method.check(index, r, hidden_size);
};
template <class M>
concept has_select = requires(const M method, const request& r, std::int64_t position,
                              std::vector<std::int64_t>& positions) {
  method.select(r, position, position, positions);
};
template <class M>
concept has_count = requires(const M method, const request& r, std::int64_t position) {
  { method.count(r, position, position) } -> std::same_as<std::int64_t>;
};
template <class M>
concept has_columns = requires(const M method, const request& r) {
  { method.columns(r) } -> std::same_as<std::span<const std::int64_t>>;
};

}  // namespace detail

/// A sequence method is a column-wise reduction: every column starts at
/// identity(), takes each row's value through accumulate() — or, where the method
/// weighs rows by where they sit, accumulate(value, row_value, position), the
/// row's place in its prompt counted from 0 (across chunks, not within one) —
/// combines partial
/// results of row tiles (and of earlier chunks) with merge(), and ends with
/// finish(value, prompt_len). window() says which rows of a chunk it reads;
/// keeps_state says whether a chunked request carries its running value to the
/// next step; `instruction` (an instruction_rule, optional) what it does with a
/// request's instruction. The device calls identity/accumulate/merge/finish, so mark them
/// SEQPOOL_HOST_DEVICE.
// clang-format off
template <class M>
concept sequence_method = detail::declares_kind<M> && M::kind == method_kind::sequence &&
                          detail::declares_keeps_state<M> && detail::has_window<M> && detail::has_identity<M> &&
                          detail::has_accumulate<M> && detail::has_merge<M> && detail::has_finish<M>;
// clang-format on

/// A token method chooses, on the host, which prompt positions and which columns
/// a finished request returns; the device only gathers them. select() appends the
/// chosen positions in [begin, end) in ascending order and count() says how many
/// there are without listing them (a long prompt's state is sized from it);
/// columns() lists the columns to keep (empty: all); check() rejects knobs the
/// method cannot serve; reads_token_ids makes the pooler require the prompt's ids.
/// A method may also say, with `bool keeps_every_row(const request&) const`,
/// that it returns every row of a request: the planner then lists no positions
/// and walks no rows (unless the request drops rows by id).
// clang-format off
template <class M>
concept token_method = detail::declares_kind<M> && M::kind == method_kind::token &&
                       detail::declares_reads_token_ids<M> && detail::has_check<M> && detail::has_select<M> &&
                       detail::has_count<M> && detail::has_columns<M>;
// clang-format on

namespace detail {

/// A row's value taken into a column by accumulate(), with the row's prompt
/// position where the method asks for it.
template <class M>
SEQPOOL_HOST_DEVICE float accumulate_at(const M& method, float pooled, float row_value, std::int64_t position) {
  if constexpr (accumulates_by_position<M>)
    return method.accumulate(pooled, row_value, position);
  else
    return method.accumulate(pooled, row_value);
}

/// What sequence method M does with an instruction: what it says, or refused.
template <class M>
constexpr instruction_rule instruction_rule_of() {
  if constexpr (requires { M::instruction; }) {
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(M::instruction)>, instruction_rule>,
                  "seqpool: a method's `instruction` is a `static constexpr seqpool::instruction_rule`");
    return M::instruction;
  } else {
    return instruction_rule::refused;
  }
}

/// What `method` does with an instruction: what its instruction() says where
/// its modes are chosen at run time (runtime_concat), else what its type says.
template <class M>
constexpr instruction_rule instruction_rule_of(const M& method) {
  if constexpr (requires {
                  { method.instruction() } -> std::same_as<instruction_rule>;
                })
    return method.instruction();
  else
    return instruction_rule_of<M>();
}

/// `method`'s name: what its name() says where its modes are chosen at run
/// time, else its type's, or `unnamed` for a method that declares none.
template <class M>
constexpr std::string_view name_of(const M& method, std::string_view unnamed) {
  if constexpr (requires {
                  { method.name() } -> std::convertible_to<std::string_view>;
                })
    return method.name();
  else if constexpr (requires { M::name; })
    return M::name;
  else
    return unnamed;
}

/// The rows of a window a built-in sequence method's result depends on: every
/// one, or only the first (CLS as a concat's mode: once `accumulate` has taken
/// a row it returns its input) or only the last (LAST: `accumulate` returns the
/// row it is given). The host's passes, which read a concat's rows once for all
/// its modes, give such a mode only each tile's first row, or its first and its
/// last, and `merge` joins the tiles' as it joins every method's; the device's
/// kernels give it every row. A user's method reads every row.
enum class rows_read : std::uint8_t { every, first, last };

template <class M>
inline constexpr rows_read rows_read_of = rows_read::every;

/// True for runtime_method<...>, which holds one of several methods chosen at run time.
template <class M>
inline constexpr bool is_runtime_method = false;

/// The modes of a sequence method: a concat's methods, whose results lie
/// side by side in its pooled row and which the passes and kernels take each
/// row value into; 1 for any other method, which is its own only mode.
template <class M>
inline constexpr int modes_of = 1;

/// Mode S of method M: a concat's method S, or M itself.
template <int S, class M>
SEQPOOL_HOST_DEVICE constexpr const auto& mode_of(const M& method) {
  if constexpr (modes_of<M> > 1)
    return method.template mode<S>();
  else
    return method;
}

/// True for a mode chosen at run time (a runtime_concat's), whose visit(work)
/// calls work with the built-in method it holds.
template <class Mode>
inline constexpr bool chosen_at_run_time = false;

/// True for a method whose name is made at run time from what it holds (a
/// runtime_concat's, from its modes): its static from_name() finds it, and
/// name_form says how such names are formed.
template <class M>
inline constexpr bool names_itself = false;

/// Calls work(mode) with mode S of `method` as the method it runs: a mode
/// chosen at run time as the built-in method it holds, so that the host's
/// loops over columns in `work` are compiled for that method, without a branch
/// per value.
template <int S, class M, class Work>
constexpr decltype(auto) with_mode_of(const M& method, Work&& work) {
  if constexpr (chosen_at_run_time<std::remove_cvref_t<decltype(mode_of<S>(method))>>)
    return mode_of<S>(method).visit(work);
  else
    return work(mode_of<S>(method));
}

/// Calls work.template operator()<S>() for each S of the sequence, in order.
SEQPOOL_EXEC_CHECK_DISABLE
template <class Work, int... S>
SEQPOOL_HOST_DEVICE constexpr void for_each_mode(Work& work, std::integer_sequence<int, S...>) {
  (work.template operator()<S>(), ...);
}

/// Calls work.template operator()<S>() — a lambda `[&]<int S>() {…}` — for
/// each mode S of N, in order.
SEQPOOL_EXEC_CHECK_DISABLE
template <int N, class Work>
SEQPOOL_HOST_DEVICE constexpr void for_modes(Work&& work) {
  for_each_mode(work, std::make_integer_sequence<int, N>{});
}

/// Host passes: calls work.template operator()<S>(begin, end) for each mode S
/// of N whose columns a pooled row of `width` columns keeps, [begin, end):
/// mode S's start at S × `loaded` (the columns read of each row), and a row
/// cut short (matryoshka truncation) keeps the first modes' columns, the last in part.
template <int N, class Work>
constexpr void for_mode_columns(std::int64_t loaded, std::int64_t width, Work&& work) {
  for_modes<N>([&]<int S>() {
    const std::int64_t begin = S * loaded;
    if (begin < width) work.template operator()<S>(begin, begin + loaded < width ? begin + loaded : width);
  });
}

template <class M>
inline constexpr bool dependent_false = false;

/// The pooler's check of its method: one static_assert per member, worded so
/// that a user-written method that misses one learns which.
template <class M>
consteval bool method_is_complete() {
  if constexpr (is_runtime_method<M> || modes_of<M> > 1) {
    return true;  // its alternatives or modes were checked where it was declared
  } else if constexpr (!declares_kind<M>) {
    static_assert(dependent_false<M>, "seqpool: a pooling method needs `static constexpr seqpool::method_kind kind`");
    return false;
  } else if constexpr (M::kind == method_kind::sequence) {
    static_assert(declares_keeps_state<M>, "seqpool: a sequence method needs `static constexpr bool keeps_state`");
    static_assert(has_window<M>,
                  "seqpool: a sequence method needs `seqpool::row_window window(const seqpool::chunk&) const`");
    static_assert(has_identity<M>, "seqpool: a sequence method needs `float identity() const`");
    static_assert(has_accumulate<M>, "seqpool: a sequence method needs `float accumulate(float, float) const` or "
                                     "`float accumulate(float, float, std::int64_t position) const`");
    static_assert(has_merge<M>, "seqpool: a sequence method needs `float merge(float, float) const`");
    static_assert(has_finish<M>, "seqpool: a sequence method needs `float finish(float, std::int64_t) const`");
    return sequence_method<M>;
  } else {
    static_assert(declares_reads_token_ids<M>, "seqpool: a token method needs `static constexpr bool reads_token_ids`");
    static_assert(
        has_check<M>,
        "seqpool: a token method needs `void check(std::size_t, const seqpool::request&, std::int64_t) const`");
    static_assert(has_select<M>,
                  "seqpool: a token method needs `void select(const seqpool::request&, std::int64_t, std::int64_t, "
                  "std::vector<std::int64_t>&) const`");
    static_assert(has_count<M>,
                  "seqpool: a token method needs `std::int64_t count(const seqpool::request&, std::int64_t, "
                  "std::int64_t) const`");
    static_assert(
        has_columns<M>,
        "seqpool: a token method needs `std::span<const std::int64_t> columns(const seqpool::request&) const`");
    return token_method<M>;
  }
}

}  // namespace detail

template <class M>
concept pooling_method =
    sequence_method<M> || token_method<M> || detail::is_runtime_method<M> || (detail::modes_of<M> > 1);

}  // namespace seqpool
