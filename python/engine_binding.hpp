// What the Python-facing Dispatcher and MultiPooler share: an engine, the GIL
// rules around it, the batch they read a step into, the outputs they hand out,
// and the calls that are the same for both.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <seqpool/error.hpp>

#include "arguments.hpp"
#include "batch_reader.hpp"
#include "engine.hpp"
#include "engine_lock.hpp"

namespace seqpool::python {

/// A graph_upload as Python holds it (GraphUpload), with its engine and the
/// engine's lock, which mark_launched() holds.
struct graph_upload_object {
  std::shared_ptr<engine_base> owner;
  std::shared_ptr<engine_lock> lock;
  std::unique_ptr<graph_upload_handle> home;
};

/// An output handed to Python, with its engine: what the returned tensor's capsule owns.
struct handed_output {
  std::shared_ptr<engine_base> owner;
  std::unique_ptr<output_memory> memory;
};

/// How an output of a result type lies: its DLPack type, and whether its
/// values are sparse entries (an output of [entries, 2] int32, not a vector).
struct output_layout {
  DLDataType type;
  bool sparse;
};

/// Plans whose Python objects are gone, kept for the next plan() to plan
/// into: planning into storage that has held a step as large allocates
/// nothing (SPEC section 10), where a fresh plan allocates and faults in every
/// list it holds. Shared by a pooler and its plans, which may outlive it;
/// given back from whichever thread drops a plan, hence the lock.
template <class Plan>
class spare_plans {
  static_assert(std::is_nothrow_move_constructible_v<Plan>, "give() keeps a plan without throwing");

 public:
  spare_plans() { spare_.reserve(most_spares); }  // give() allocates nothing: a Plan's destructor calls it

  /// A spare plan, or a fresh one where none is kept.
  Plan take() {
    const std::lock_guard lock(mutex_);
    if (spare_.empty()) return {};
    Plan taken = std::move(spare_.back());
    spare_.pop_back();
    return taken;
  }

  /// Keeps `plan` where fewer than most_spares are kept; else (or where the
  /// lock fails) it is freed.
  void give(Plan&& plan) noexcept {
    try {
      const std::lock_guard lock(mutex_);
      if (spare_.size() < most_spares) spare_.push_back(std::move(plan));
    } catch (const std::system_error&) {
    }
  }

  /// How many are kept now.
  std::size_t count() {
    const std::lock_guard lock(mutex_);
    return spare_.size();
  }

 private:
  /// An engine's loop holds a plan or two at a time (the next made before the last is dropped).
  static constexpr std::size_t most_spares = 2;
  std::mutex mutex_;
  std::vector<Plan> spare_;
};

/// A plan as Python holds it (a Plan or PartsPlan), with its engine (declared
/// first, so freed last), which reserve() and forward() check, and its spare
/// plans, to which its storage goes when Python lets it go.
template <class Plan>
struct owned_plan {
  owned_plan() = default;
  owned_plan(const owned_plan&) = delete;  ///< its plan and outputs are its own
  owned_plan& operator=(const owned_plan&) = delete;
  ~owned_plan() {
    if (spares) spares->give(std::move(plan));
  }

  std::shared_ptr<engine_base> owner;
  std::shared_ptr<spare_plans<Plan>> spares;
  Plan plan;
};

template <class Engine>
class engine_binding {
 public:
  std::int64_t hidden_size() const { return engine_->hidden_size(); }
  std::string device() const { return engine_->device_type() == kDLCUDA ? "cuda" : "cpu"; }

  void reserve_capacity(nb::handle requests, nb::handle rows, nb::handle result_rows, nb::handle columns) {
    const held_engine held = hold();
    const capacity limits{.requests = integer_argument(requests, "requests"),
                          .rows = integer_argument(rows, "rows"),
                          .result_rows = integer_argument(result_rows, "result_rows"),
                          .columns = integer_argument(columns, "columns")};
    without_gil([&] { engine_->reserve_capacity(limits); });
  }

  std::unique_ptr<graph_upload_object> reserve_graph() {
    const held_engine held = hold();
    return std::make_unique<graph_upload_object>(
        graph_upload_object{engine_, lock_, without_gil([&] { return engine_->reserve_graph(); })});
  }

  void synchronize() {
    const held_engine held = hold();
    without_gil([&] { engine_->synchronize(); });
  }

  nb::dict audit() {
    const audit_counts counts = [&] {
      const held_engine held = hold();
      return engine_->audit();
    }();
    nb::dict found;
    found["uploads"] = counts.uploads;
    found["upload_bytes"] = counts.upload_bytes;
    found["downloads"] = counts.downloads;
    found["waits"] = counts.waits;
    found["allocations"] = counts.allocations;
    found["launches"] = counts.launches;
    return found;
  }

  void release(nb::handle id) {
    request_id given;
    batch_reader::read_id(given, id, "id");
    const held_engine held = hold();
    engine_->release(given);
  }

  std::int64_t num_computed(nb::handle id) {
    request_id given;
    batch_reader::read_id(given, id, "id");
    const held_engine held = hold();
    return engine_->num_computed(given);
  }

  std::size_t spare_plan_count() const { return spares_->count(); }

 protected:
  engine_binding() = default;  ///< engine_ is the derived class's to make

  using held_engine = engine_lock::held;

  /// The engine, held by one call until it returns (engine_lock).
  [[nodiscard]] held_engine hold() { return lock_->hold(); }

  /// What `call` gives, with the GIL let go while it runs: a call of the
  /// engine that may wait for the device (reserving, restaging) or runs a
  /// step, and reads no Python object, holding the engine.
  template <class Call>
  static decltype(auto) without_gil(Call&& call) {
    nb::gil_scoped_release unlocked;
    return std::forward<Call>(call)();
  }

  /// A tensor on a CUDA device must be on the engine's (the DLPack views check the device's kind).
  DLTensor on_this_device(const DLTensor& view, const char* what) const {
    if (view.device.device_type == kDLCUDA && view.device.device_id != engine_->device_id())
      detail::fail(what, "is on cuda:", view.device.device_id, "; this pooler runs on cuda:", engine_->device_id());
    return view;
  }

  /// Hidden states as a step reads them: the tensor, and its view, which points into it.
  struct hidden_tensor {
    any_tensor tensor;
    DLTensor view;
  };

  /// `given` as the hidden states of the batch a plan was read with, on this
  /// engine's device: a [B, S, H] tensor is a padded batch's (`padded`), a
  /// packed batch's are [T, H].
  hidden_tensor hidden_of(nb::handle given, const std::optional<dlpack::padded_extents>& padded) const {
    hidden_tensor hidden{tensor_of(given, "hidden states"), {}};
    hidden.view = on_this_device(describe(hidden.tensor), "hidden states");
    dlpack::detail::check_sequences(hidden.view, "hidden", padded,
                                    "plan it with sequence_length=S, or give the packed rows as [T, H]");
    return hidden;
  }

  /// The engine `make_host()` or `make_cuda()` makes, as `device` names ("cpu" or "cuda").
  template <class Host, class Cuda>
  static std::shared_ptr<Engine> made_on(const std::string& device, Host make_host, Cuda make_cuda) {
    if (device == "cpu") return make_host();
    if (device != "cuda") detail::fail("device", "expected \"cpu\" or \"cuda\", got " + detail::quoted(device));
    if (!has_cuda())
      detail::fail("device", "this build of seqpool has no CUDA module (install it where nvcc is found)");
    return make_cuda();
  }

  /// `given` as this binding's kind of plan (Planned), made by this pooler: a
  /// plan is run by the pooler that made it (another's describes another's
  /// parts and outputs), a plan of the other kind (a Dispatcher's given to a
  /// MultiPooler, or back) is another pooler's, and anything else is no plan.
  template <class Planned>
  Planned& plan_of(nb::handle given) const {
    Planned* planned = nullptr;
    if (!nb::try_cast(given, planned, false) || planned == nullptr) {
      // The module's own classes, a Plan or a PartsPlan, whatever the module is imported as.
      const nb::handle type = given.type();
      const std::string name = nb::cast<std::string>(type.attr("__name__"));
      if (!nb::type_check(type) || (name != "Plan" && name != "PartsPlan"))
        detail::fail("plan", "must be a plan this pooler's plan() made, got ", type_name_of(given));
    }
    if (planned == nullptr || planned->owner.get() != static_cast<const engine_base*>(engine_.get()))
      detail::fail("plan", "was made by another pooler: plan the step with this one");
    return *planned;
  }

  /// An output of shape[0] values: a vector, or for sparse results [entries, 2] (shape[1] is 2).
  DLTensor output_view(void* data, std::array<std::int64_t, 2>& shape, output_layout layout) const {
    DLTensor view{};
    view.data = data;
    view.device = {engine_->device_type(), engine_->device_id()};
    view.ndim = layout.sparse ? 2 : 1;
    view.dtype = layout.type;
    view.shape = shape.data();
    return view;
  }

  /// A reserved output as a tensor that owns it: an object with __dlpack__ and
  /// __dlpack_device__ (numpy.from_dlpack, torch.from_dlpack, …).
  nb::object hand_out(std::unique_ptr<output_memory> memory, std::int64_t size, output_layout layout) const {
    void* data = memory->data();
    auto held = std::make_unique<handed_output>(handed_output{engine_, std::move(memory)});
    nb::capsule owner(held.get(), [](void* given) noexcept { delete static_cast<handed_output*>(given); });
    held.release();  // the capsule owns it now
    const std::size_t shape[2] = {static_cast<std::size_t>(size), 2};
    return nb::cast(nb::ndarray<nb::array_api>(data, layout.sparse ? 2 : 1, shape, owner, nullptr,
                                               nb::dlpack::dtype{layout.type.code, layout.type.bits, layout.type.lanes},
                                               engine_->device_type(), engine_->device_id()));
  }

  /// The plan of `step`, into `made`: into a spare plan's storage where one is kept.
  void plan_into(owned_plan<typename Engine::plan_type>& made, const batch& step) {
    made.owner = engine_;
    made.spares = spares_;
    made.plan = spares_->take();
    engine_->plan(step, made.plan);
  }

  std::shared_ptr<Engine> engine_;
  batch_reader steps_;
  std::shared_ptr<spare_plans<typename Engine::plan_type>> spares_ =
      std::make_shared<spare_plans<typename Engine::plan_type>>();

 private:
  std::shared_ptr<engine_lock> lock_ = std::make_shared<engine_lock>();
};

}  // namespace seqpool::python
