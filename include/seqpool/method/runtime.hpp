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

  /// Whether alternative M has a name of its type (a runtime_concat names itself by its modes).
  template <class M>
  static constexpr bool named = !requires {
    M::from_name(std::string_view());
  };

  template <class M>
  static constexpr std::string_view name_of_type() {
    if constexpr (named<M>)
      return M::name;
    else
      return {};
  }

 public:
  static constexpr method_kind kind = first::kind;

  /// How the alternatives that name themselves by the modes they join
  /// (runtime_concat) are named, for messages: "two or three of <their
  /// name_form>", or nothing where there are none.
  static std::string self_named_form() {
    static constexpr std::array<std::string_view, 7> counts{"", "one", "two", "three", "four", "five", "six"};
    int fewest = 0;
    int most = 0;
    std::string_view form;
    const auto note = [&]<class M>() {
      if constexpr (!named<M>) {
        fewest = fewest == 0 ? detail::modes_of<M> : std::min(fewest, detail::modes_of<M>);
        most = std::max(most, detail::modes_of<M>);
        form = M::name_form;
      }
    };
    (note.template operator()<Methods>(), ...);
    if (form.empty()) return {};
    std::string described(counts[fewest]);
    if (most > fewest) described.append(most == fewest + 1 ? " or " : " to ").append(counts[most]);
    return described.append(" of ").append(form);
  }

  /// The names of its alternatives named by their type, in order: the names
  /// from_name() takes, with those of the alternatives that name themselves
  /// (a runtime_concat, whose name_form says how they are named).
  static constexpr auto names = [] {
    std::array<std::string_view, (std::size_t{named<Methods>} + ...)> listed{};
    std::size_t at = 0;
    ((named<Methods> ? void(listed[at++] = name_of_type<Methods>()) : void()), ...);
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
  static std::optional<runtime_method> from_name(std::string_view wanted) {
    std::optional<runtime_method> found;
    (find<Methods>(wanted, found) || ...);
    return found;
  }

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
    if constexpr (named<M>) {
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
