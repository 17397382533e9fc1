// What seqpool-run reads for one step of a batch file, whatever pools it: the
// step's requests and hidden states, checked against each other (SPEC section 9).
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <span>
#include <string>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/error.hpp>
#include <seqpool/float16.hpp>
#include <seqpool/space/buffer.hpp>
#include <seqpool/state.hpp>

#include "batch_file.hpp"
#include "npy.hpp"

namespace seqpool::tool {

enum class element_type { float32, float16, bfloat16 };

/// A step as the file gives it: its requests, its hidden states and what they
/// hold. Moved, not copied: the requests view the token ids `file` holds.
struct step_input {
  step_input() = default;
  step_input(step_input&&) = default;
  step_input& operator=(step_input&&) = default;
  step_input(const step_input&) = delete;
  step_input& operator=(const step_input&) = delete;

  std::string where;  ///< "step N", which begins every message about it
  step_file file;     ///< the requests' token ids live here
  seqpool::batch requests;
  npy_array hidden;
  element_type element = element_type::float32;
  std::int64_t rows = 0;  ///< B·S where padded
};

/// Calls `work.template operator()<T>()` with T the type the step's hidden
/// states hold, and returns what it returns.
template <class Work>
decltype(auto) with_element(element_type element, Work&& work) {
  switch (element) {
    case element_type::float16:
      return work.template operator()<seqpool::half>();
    case element_type::bfloat16:
      return work.template operator()<seqpool::bfloat16>();
    case element_type::float32:
      break;
  }
  return work.template operator()<float>();
}

/// The step's hidden states, which hold T, copied into the space.
template <class T, class Space>
seqpool::buffer<T, Space> copied_in(Space& space, const npy_array& hidden) {
  seqpool::buffer<T, Space> rows(space, static_cast<std::size_t>(hidden.count()));
  space.copy_in(std::span<const T>(reinterpret_cast<const T*>(hidden.data.data()), rows.size()), rows.span());
  return rows;
}

namespace detail {

inline std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

/// What the step's array holds: as the batch's hidden_dtype says, which must
/// fit the array's dtype, or else as the dtype alone says; 16-bit integers are
/// bfloat16 bits only where the batch says so.
inline element_type element_of(const batch_file& batch, const std::string& where, const step_file& step,
                               const npy_array& hidden) {
  const std::string& dtype = hidden.descr;
  const std::string file = step.hidden_states.string();
  if (!batch.hidden_dtype) {
    if (dtype == "<i2")
      throw input_error(where + ": hidden_states: " + file +
                        " holds 16-bit integers (<i2); if they are bfloat16 bits (tensor.view(torch.int16)), "
                        "add \"hidden_dtype\": \"bfloat16\" to the batch");
    return dtype == "<f4" ? element_type::float32 : dtype == "<f2" ? element_type::float16 : element_type::bfloat16;
  }
  const std::string& declared = *batch.hidden_dtype;
  if (declared == "float32" && dtype == "<f4") return element_type::float32;
  if (declared == "float16" && dtype == "<f2") return element_type::float16;
  if (declared == "bfloat16" && (dtype == "<u2" || dtype == "<i2")) return element_type::bfloat16;
  const char* expected = declared == "float32" ? "<f4" : declared == "float16" ? "<f2" : "<u2 or <i2 (bfloat16 bits)";
  throw input_error(where + ": hidden_states: " + file + " has dtype " + dtype + ", but hidden_dtype " +
                    seqpool::detail::quoted(declared) + " is saved as " + expected);
}

}  // namespace detail

/// Reads step `index` and its hidden states, and checks that they fit each
/// other and the batch: the shape of a packed or padded step, the rows the
/// requests schedule, the element type.
inline step_input read_step_input(const batch_file& batch, std::size_t index) {
  step_input step;
  step.where = "step " + std::to_string(index);
  const std::string& where = step.where;
  step.file = read_step(batch, index);
  step.requests.requests = step.file.requests;
  try {
    step.hidden = read_npy(step.file.hidden_states, hidden_dtypes);
  } catch (const input_error& unreadable) {
    throw input_error(where + ": hidden_states: " + unreadable.what());
  }
  const npy_array& hidden = step.hidden;
  const std::string width = std::to_string(batch.hidden_size);
  const std::string found = where + ": hidden_states: " + step.file.hidden_states.string() + " has shape " +
                            detail::shape_text(hidden.shape) + "; ";
  if (step.file.padding) {
    const std::string requests_count = std::to_string(step.requests.requests.size());
    if (hidden.shape.size() != 3 || hidden.shape[0] != static_cast<std::int64_t>(step.requests.requests.size()) ||
        hidden.shape[2] != batch.hidden_size)
      throw input_error(found + "a padded step must have shape [" + requests_count + ", S, " + width +
                        "] (a sequence per request)");
    if (hidden.shape[1] < 1) throw input_error(found + "a padded step's sequences need S of at least 1 row");
    step.requests.padded = seqpool::padded_rows{.sequence_length = hidden.shape[1], .padding = *step.file.padding};
  } else if (hidden.shape.size() != 2 || hidden.shape[1] != batch.hidden_size) {
    throw input_error(found + "it must have shape [T, " + width + "] (rows of all requests, packed)" +
                      (hidden.shape.size() == 3 ? ", or the step must say \"padding\": \"right\" or \"left\"" : ""));
  }
  step.rows = hidden.shape.size() == 3 ? hidden.shape[0] * hidden.shape[1] : hidden.shape[0];
  // Checked before planning: a plan is as large as the rows the requests claim.
  const std::int64_t scheduled = seqpool::lay_out(step.requests).num_rows;
  if (scheduled != step.rows)
    throw input_error(where + ": num_scheduled: the requests schedule " + std::to_string(scheduled) +
                      " rows but hidden_states has " + std::to_string(step.rows));
  step.element = detail::element_of(batch, where, step.file, hidden);
  return step;
}

/// Runs `run_step(index)` for every step of the batch in turn; an error that
/// does not say which step already is made to.
template <class Run>
void for_each_step(const batch_file& batch, Run&& run_step) {
  for (std::size_t step = 0; step < batch.steps.size(); ++step) {
    try {
      run_step(step);
    } catch (const input_error&) {
      throw;  // already says where
    } catch (const std::bad_alloc&) {
      throw input_error("step " + std::to_string(step) + ": out of memory");
    } catch (const std::exception& failure) {
      throw input_error("step " + std::to_string(step) + ": " + failure.what());
    }
  }
}

/// A request that starts over (num_computed 0) under an id whose earlier steps
/// are still in progress: refused here in the batch file's terms (the library
/// asks a program to release() the id first).
template <class Space>
void check_restarts(const step_input& step, const seqpool::state_store<Space>& state) {
  const std::vector<seqpool::request>& requests = step.requests.requests;
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const seqpool::request& r = requests[i];
    const std::int64_t pooled = state.num_computed(r.id);
    if (r.num_computed != 0 || pooled == 0) continue;
    const std::string tokens = std::to_string(pooled);
    const std::string id = r.id.str();
    throw input_error(step.where + ": " + seqpool::detail::request_named(i, id) +
                      ": num_computed: 0 starts over a prompt whose earlier steps pooled " + tokens +
                      " tokens; continue it with num_computed " + tokens + ", or give the new prompt another id");
  }
}

}  // namespace seqpool::tool
