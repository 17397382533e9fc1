// Several sequence methods over the same rows, their results side by side:
// sentence-transformers' Pooling with several modes on (e.g. CLS ‖ MEAN ‖ MAX).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <cuda/std/bit>
#include <cuda/std/limits>

#include <seqpool/error.hpp>
#include <seqpool/method/cls.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/method/last.hpp>

namespace seqpool::method {

namespace detail_concat {

/// CLS as a mode of a concat, which reads the rows of a chunk: the first row
/// it reads (the device's kernels give it every row, the host's passes each
/// tile's first: rows_read_of). No row read yet is a NaN whose low bits no
/// 16-bit value widens to (their 13 or 16 low bits are 0) and no arithmetic
/// makes (it makes the canonical NaN); a float input of exactly these bits is
/// read as the canonical NaN, so that it is not taken for no row.
struct first_read {
  static constexpr method_kind kind = method_kind::sequence;
  static constexpr std::string_view name = cls::name;
  static constexpr bool keeps_state = true;
  static constexpr instruction_rule instruction = cls::instruction;
  static constexpr std::uint32_t unread_bits = 0x7fd5a5a5u;

  row_window window(const chunk& part) const { return {part.first_row(), part.num_scheduled}; }

  SEQPOOL_HOST_DEVICE static bool unread(float value) { return cuda::std::bit_cast<std::uint32_t>(value) == unread_bits; }
  SEQPOOL_HOST_DEVICE float identity() const { return cuda::std::bit_cast<float>(unread_bits); }
  SEQPOOL_HOST_DEVICE float accumulate(float first, float row_value) const {
    if (!unread(first)) return first;
    return unread(row_value) ? cuda::std::numeric_limits<float>::quiet_NaN() : row_value;
  }
  SEQPOOL_HOST_DEVICE float merge(float first, float later) const { return unread(first) ? later : first; }
  SEQPOOL_HOST_DEVICE float finish(float first, std::int64_t) const { return first; }
};

/// The method a concat runs for a mode: CLS keeps its first row; LAST, whose
/// later row replaces an earlier one, is taken as it is; every other mode
/// reads every row of a chunk already (concat::window checks it).
template <class M>
using mode_method = std::conditional_t<std::is_same_v<M, cls>, first_read, M>;

/// The modes, held by value (a kernel parameter copies them to the device).
template <class... Ms>
struct method_list;
template <>
struct method_list<> {};
template <class M, class... Rest>
struct method_list<M, Rest...> {
  M first{};
  method_list<Rest...> rest{};

  constexpr method_list() = default;
  constexpr explicit method_list(M mode, Rest... later) : first(mode), rest(later...) {}

  template <int S>
  SEQPOOL_HOST_DEVICE constexpr const auto& get() const {
    if constexpr (S == 0)
      return first;
    else
      return rest.template get<S - 1>();
  }
};

/// What a concat does with an instruction: what all its modes do, where they agree.
template <class... Ms>
constexpr instruction_rule agreed_rule() {
  constexpr std::array rules{seqpool::detail::instruction_rule_of<Ms>()...};
  for (const instruction_rule rule : rules)
    if (rule != rules[0]) return instruction_rule::refused;
  return rules[0];
}

/// The modes' names joined by '+': "cls+mean+max".
template <class... Ms>
struct joined_names {
  static constexpr std::size_t length = (Ms::name.size() + ...) + sizeof...(Ms) - 1;
  static constexpr std::array<char, length> text = [] {
    std::array<char, length> joined{};
    std::size_t at = 0;
    for (const std::string_view name : {std::string_view(Ms::name)...}) {
      if (at > 0) joined[at++] = '+';
      for (const char c : name) joined[at++] = c;
    }
    return joined;
  }();
};

}  // namespace detail_concat

/// The results of `Methods` (sequence methods, two or more) for the same rows,
/// one after another in one row of modes × hidden_size columns, read in one
/// pass: each row value read is taken into every mode's that keeps it (on the
/// host, CLS and LAST take only the rows they keep: rows_read_of). The head's epilogue
/// (normalisation) and layers see the whole row, as sentence-transformers'
/// Normalize and Dense modules follow its Pooling. A mode reads every row of
/// a chunk (MEAN, MAX, weighted MEAN, MEAN_SQRT_LEN, a user's method that
/// does), or is CLS or LAST; with spans, each span's CLS is its first row and
/// its LAST its last. An instruction is left out only where every mode
/// leaves it out (and is refused where modes disagree).
template <class... Methods>
struct concat {
  static_assert(sizeof...(Methods) >= 2, "seqpool: a concat joins two methods or more");
  static_assert(((seqpool::detail::method_is_complete<Methods>() && Methods::kind == method_kind::sequence) && ...),
                "seqpool: a concat joins sequence methods");

  static constexpr method_kind kind = method_kind::sequence;
  static constexpr std::string_view name{detail_concat::joined_names<Methods...>::text.data(),
                                         detail_concat::joined_names<Methods...>::length};
  static constexpr bool keeps_state = true;
  static constexpr instruction_rule instruction = detail_concat::agreed_rule<Methods...>();
  static constexpr int modes = static_cast<int>(sizeof...(Methods));

  detail_concat::method_list<detail_concat::mode_method<Methods>...> methods{};

  constexpr concat() = default;
  constexpr explicit concat(Methods... chosen) : methods(mode_method_of(chosen)...) {}

  /// Every row of the chunk; a mode that would read fewer (other than CLS and LAST) is refused.
  row_window window(const chunk& part) const {
    const row_window every{part.first_row(), part.num_scheduled};
    check_windows(part, every, std::make_index_sequence<sizeof...(Methods)>{});
    return every;
  }

  /// Mode S's method.
  template <int S>
  SEQPOOL_HOST_DEVICE constexpr const auto& mode() const {
    return methods.template get<S>();
  }

 private:
  template <class M>
  static constexpr detail_concat::mode_method<M> mode_method_of(const M& chosen) {
    if constexpr (std::is_same_v<M, cls>)
      return {};
    else
      return chosen;
  }

  template <std::size_t... S>
  void check_windows(const chunk& part, row_window every, std::index_sequence<S...>) const {
    (check_window<Methods>(mode<static_cast<int>(S)>(), part, every), ...);
  }

  template <class M, class Mode>
  static void check_window(const Mode& mode, const chunk& part, row_window every) {
    if constexpr (!std::is_same_v<M, cls> && !std::is_same_v<M, last>) {
      const row_window read = mode.window(part);
      if (read.begin != every.begin || read.count != every.count)
        seqpool::detail::fail("method", name, ": its mode ", seqpool::detail::name_of(mode, "a method"),
                              " reads rows [", read.begin, ", ", read.begin + read.count, ") of a chunk of rows [",
                              every.begin, ", ", every.begin + every.count,
                              "); a concat's modes read every row (or are CLS or LAST)");
    }
  }
};

}  // namespace seqpool::method

namespace seqpool::detail {

template <class... Methods>
inline constexpr int modes_of<method::concat<Methods...>> = sizeof...(Methods);

template <>
inline constexpr rows_read rows_read_of<method::detail_concat::first_read> = rows_read::first;

}  // namespace seqpool::detail
