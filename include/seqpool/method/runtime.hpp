// runtime_method: one of several methods, chosen at run time.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <seqpool/method/concepts.hpp>

namespace seqpool {
namespace method {

/// Holds one of `Methods` (all of one kind), chosen at run time, e.g. from a
/// configuration file: a table of four such poolers serves any configuration
/// without compiling every combination. The pooler visits the choice on the
/// host, so a step still launches one set of passes, for the chosen method.
template <class... Methods>
class runtime_method {
  static_assert(sizeof...(Methods) > 0, "runtime_method needs at least one method");
  static_assert((detail::method_is_complete<Methods>() && ...));
  using first = std::tuple_element_t<0, std::tuple<Methods...>>;
  static_assert(((Methods::kind == first::kind) && ...),
                "runtime_method's methods must all be sequence or all token methods");

  /// Whether alternative M is named by its type (a runtime_concat names itself, by its modes).
  template <class M>
  static constexpr bool named_by_type = !detail::names_itself<M>;

  template <class M>
  static constexpr std::string_view name_of_type() {
    if constexpr (named_by_type<M>)
      return M::name;
    else
      return {};
  }

  /// How alternative M's names are formed where it names itself (its name_form), else nothing.
  template <class M>
  static constexpr std::string_view name_form_of() {
    if constexpr (named_by_type<M>)
      return {};
    else
      return M::name_form;
  }
  /// The form the alternatives that name themselves share.
  static constexpr std::string_view shared_name_form = [] {
    std::string_view form;
    ((form.empty() ? void(form = name_form_of<Methods>()) : void()), ...);
    return form;
  }();
  static_assert(((named_by_type<Methods> || name_form_of<Methods>() == shared_name_form) && ...),
                "runtime_method's alternatives that name themselves share one name_form");

 public:
  static constexpr method_kind kind = first::kind;

  /// How the alternatives that name themselves by the modes they join
  /// (runtime_concat) are named, for messages: the counts of modes they take
  /// ("two or three", "two, four or five") and their name_form; nothing where
  /// there are none.
  static std::string self_named_form() {
    static constexpr std::array<std::string_view, 5> counts{"two", "three", "four", "five", "six"};
    std::vector<int> taken;
    ((named_by_type<Methods> ? void() : void(taken.push_back(detail::modes_of<Methods>))), ...);
    std::sort(taken.begin(), taken.end());
    std::string described;
    for (std::size_t k = 0; k < taken.size(); ++k)
      described.append(k == 0 ? "" : k + 1 == taken.size() ? " or " : ", ").append(counts[taken[k] - 2]);
    return taken.empty() ? described : described.append(" of ").append(shared_name_form);
  }

  /// The names of its alternatives named by their type, in order. from_name()
  /// takes these, and the names of the alternatives that name themselves
  /// (self_named_form() says how those are formed).
  static constexpr auto names = [] {
    std::array<std::string_view, (std::size_t{named_by_type<Methods>} + ...)> listed{};
    std::size_t at = 0;
    ((named_by_type<Methods> ? void(listed[at++] = name_of_type<Methods>()) : void()), ...);
    return listed;
  }();

  template <class Method>
  requires(std::is_same_v<Method, Methods> || ...) runtime_method(Method chosen) : chosen_(std::move(chosen)) {}

  /// The names, for a message: "a, b or c", or "a, b, c or <self_named_form()>".
  static std::string listed_names() {
    const std::string self_named = self_named_form();
    std::string listed;
    const std::size_t count = names.size() + (self_named.empty() ? 0 : 1);
    for (std::size_t i = 0; i < count; ++i)
      listed.append(i == 0 ? "" : i + 1 == count ? " or " : ", ").append(i < names.size() ? names[i] : self_named);
    return listed;
  }

  /// The method whose name is `wanted`, or nothing when no alternative has it.
  /// A smaller alternative leaves the variant's last bytes unwritten, which GCC
  /// at -O3 takes for a read of them where the found method is copied (its
  /// optional and variant copies are trivial); it warns at `found`.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
  static std::optional<runtime_method> from_name(std::string_view wanted) {
    std::optional<runtime_method> found;
    (find<Methods>(wanted, found) || ...);
    return found;
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

  std::string_view name() const {
    return std::visit([](const auto& chosen) { return seqpool::detail::name_of(chosen, "a method"); }, chosen_);
  }

  /// Calls `work` with the chosen method as its concrete type.
  template <class Work>
  decltype(auto) visit(Work&& work) const {
    return std::visit(std::forward<Work>(work), chosen_);
  }

 private:
  /// Makes `found` alternative M if `wanted` names it; says whether it did.
  template <class M>
  static bool find(std::string_view wanted, std::optional<runtime_method>& found) {
    if constexpr (named_by_type<M>) {
      if (M::name != wanted) return false;
      found.emplace(M{});
    } else {
      const std::optional<M> chosen = M::from_name(wanted);
      if (!chosen) return false;
      found.emplace(*chosen);
    }
    return true;
  }

  std::variant<Methods...> chosen_;
};

}  // namespace method

namespace detail {
template <class... Methods>
inline constexpr bool is_runtime_method<method::runtime_method<Methods...>> = true;
}  // namespace detail

}  // namespace seqpool
