// runtime_method: one of several methods, chosen at run time.
#pragma once

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

 public:
  static constexpr method_kind kind = first::kind;

  /// The names of its alternatives, in order: the names from_name() takes.
  static constexpr std::array<std::string_view, sizeof...(Methods)> names{Methods::name...};

  template <class Method>
  requires(std::is_same_v<Method, Methods> || ...) runtime_method(Method chosen) : chosen_(std::move(chosen)) {}

  /// The names, for a message: "a, b or c".
  static std::string listed_names() {
    std::string listed;
    for (std::size_t i = 0; i < names.size(); ++i)
      listed.append(i == 0 ? "" : i + 1 == names.size() ? " or " : ", ").append(names[i]);
    return listed;
  }

  /// The method whose `name` is `wanted`, or nothing when no alternative has it.
  static std::optional<runtime_method> from_name(std::string_view wanted) {
    std::optional<runtime_method> found;
    ((Methods::name == wanted ? void(found.emplace(Methods{})) : void()), ...);
    return found;
  }

  std::string_view name() const {
    return std::visit([](const auto& chosen) { return std::string_view(chosen.name); }, chosen_);
  }

  /// Calls `work` with the chosen method as its concrete type.
  template <class Work>
  decltype(auto) visit(Work&& work) const {
    return std::visit(std::forward<Work>(work), chosen_);
  }

 private:
  std::variant<Methods...> chosen_;
};

}  // namespace method

namespace detail {
template <class... Methods>
inline constexpr bool is_runtime_method<method::runtime_method<Methods...>> = true;
}  // namespace detail

}  // namespace seqpool
