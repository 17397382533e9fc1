// step_runner: the one place a step is planned, staged, uploaded, launched and
// moved on, eager or captured: what a pooler and a dispatcher are.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda/std/span>

#include <seqpool/batch.hpp>
#include <seqpool/capacity.hpp>
#include <seqpool/detail/any_unit.hpp>
#include <seqpool/detail/check_forward.hpp>
#include <seqpool/detail/image.hpp>
#include <seqpool/detail/program.hpp>
#include <seqpool/detail/records.hpp>
#include <seqpool/detail/route_knobs.hpp>
#include <seqpool/detail/share.hpp>
#include <seqpool/error.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/part.hpp>
#include <seqpool/part_output.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/state.hpp>

namespace seqpool {

namespace detail {

/// A serial number for each runner and each plan: a plan names the runner that
/// made it, and a runner the plan its last reserve() made room for.
inline std::uint64_t next_serial() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

/// A runner's identity, which the plans it makes carry: a serial of its own
/// from its construction, which moves with it, so that the plans a runner made
/// before it was moved from run on the one it moved into. A runner moved from,
/// or moved into itself (whose members may have emptied themselves, as
/// std::vector's do), or whose unit was given to another runner (whose id is
/// its own), holds none (0) and plans nothing.
class runner_id {
 public:
  runner_id() = default;
  runner_id(const runner_id&) = delete;
  runner_id& operator=(const runner_id&) = delete;
  runner_id(runner_id&&) noexcept = default;
  runner_id& operator=(runner_id&&) noexcept = default;

  std::uint64_t value() const { return serial_.value(); }
  /// Holds none from here on: its unit was given to another runner.
  void give_up() { serial_ = moving_serial{}; }

 private:
  moving_serial serial_{next_serial()};
};

/// A step runner's Result where each entry writes an output of its own, of its
/// unit's result type: a multi_pooler's.
struct output_per_part {};

/// Whether a step runner's one unit type is any_unit: its entries are then a
/// list, as long as the program made it (a runtime_multi_pooler's parts).
template <class Unit>
inline constexpr bool is_any_unit = false;
template <class Space>
inline constexpr bool is_any_unit<any_unit<Space>> = true;

/// The type a unit's results have in a forward's arguments: its own; for any_unit,
/// whose type is known at run time, the part_output that carries it.
template <class Unit>
struct unit_result {
  using type = typename Unit::result_type;
};
template <class Space>
struct unit_result<any_unit<Space>> {
  using type = part_output;
};

/// A forward's outputs, one an output: a span of the step's Result (a pooler's,
/// a dispatcher's), a span of each part's result type (a multi_pooler's), or a
/// list of part_outputs (a runtime_multi_pooler's).
template <class Result, class... Units>
struct step_outputs {
  using type = std::tuple<cuda::std::span<Result>>;
};
template <class... Units>
struct step_outputs<output_per_part, Units...> {
  using type = std::tuple<cuda::std::span<typename unit_result<Units>::type>...>;
};
template <class Space>
struct step_outputs<output_per_part, any_unit<Space>> {
  using type = std::span<const part_output>;
};

}  // namespace detail

/// Runs steps of a table of pooling units (its entries), in two phases. plan()
/// runs on the host, checks every request and fixes every size, offset and
/// index of the step: it groups the requests by task and plans every entry's
/// share together, rows counted from the start of the step, so a step launches
/// each entry's work once however often the tasks alternate. forward() uploads
/// the plan's one image and launches work whose shapes the plan fixed: it never
/// reads the device back, never waits and never allocates; reserve() makes the
/// room it needs beforehand.
///
///     auto plan = runner.plan(batch, state);
///     runner.reserve(plan, state);               // outside the step: may allocate or wait
///     runner.forward(hidden, plan, state, out);  // the step
///     // plan.results[i]: where request i's result lies in `out`, if it finished
///
/// A pooler is a runner of one entry, a dispatcher one of its table; an entry
/// may be empty (std::nullopt), and its task is then refused like one the
/// table lacks. A multi_pooler (Result: detail::output_per_part) is a runner
/// whose entries are its parts: every request goes to every part, as the
/// part's knobs make it (route_knobs), and each part writes an output of its
/// own; its plans are parts_plans. A runtime_multi_pooler's parts are a list
/// of any_unit chosen at run time, otherwise alike. Given a capacity, every entry's image gets
/// a region of its own, so that a step captured once (capture()) replays for
/// every batch that fits (restage()), whichever tasks it holds.
template <memory_space Space, class Result, class... Units>
class step_runner {
  static constexpr bool per_part = std::is_same_v<Result, detail::output_per_part>;
  /// Whether the entries are a list made at run time (of any_unit), not a pack.
  static constexpr bool listed = (detail::is_any_unit<Units> && ...);
  static_assert(!listed || (per_part && sizeof...(Units) == 1), "a list of any_unit is a runtime_multi_pooler's parts");
  /// Entries of a pack: the units; of a list: none until it is made.
  static constexpr std::size_t packed_entries = listed ? 0 : sizeof...(Units);
  /// Outputs of a pack: one a part, or the one all entries share.
  static constexpr std::size_t packed_outputs = per_part ? packed_entries : 1;
  /// Parts of a pack: its entries where each is a part; a dispatcher has none.
  static constexpr std::size_t packed_parts = per_part ? packed_entries : 0;
  /// A value of T for each of `Packed` things of a pack (entries, parts or
  /// outputs): an array; of a list, a vector its constructor makes as long as
  /// the list (a part each).
  template <class T, std::size_t Packed>
  using each_of = std::conditional_t<listed, std::vector<T>, std::array<T, Packed>>;
  /// The task each entry of a dispatcher serves.
  static constexpr auto tasks = [] {
    if constexpr (per_part)
      return std::array<task, 0>{};
    else
      return std::array<task, packed_entries>{Units::task...};
  }();
  /// The output entry `entry` writes into.
  static constexpr std::size_t output_of(std::size_t entry) { return per_part ? entry : 0; }
  /// The part entry `entry`'s states are kept as in the state store.
  static constexpr std::uint32_t part_of(std::size_t entry) { return per_part ? static_cast<std::uint32_t>(entry) : 0; }
  /// The parts whose states a chunked request of this runner keeps: a
  /// multi_pooler's, or the one of a pooler or dispatcher.
  std::uint32_t state_parts() const { return per_part ? static_cast<std::uint32_t>(entry_count()) : 1; }
  using output_spans = typename detail::step_outputs<Result, Units...>::type;

 public:
  using space_type = Space;
  using plan_type = std::conditional_t<per_part, parts_plan, step_plan>;

  std::int64_t hidden_size() const { return hidden_size_; }

  /// Host only: checks the whole batch, then plans every entry's share.
  /// Throws seqpool::error, before anything is planned, if a task has no entry.
  plan_type plan(const batch& step, const state_store<Space>& state) const {
    plan_type planned;
    plan(step, state, planned);
    return planned;
  }

  /// plan() into `into`, any plan of this kind, reusing the storage of
  /// whatever it held: once it has held steps as large (SPEC section 10),
  /// planning another allocates nothing. If it throws, `into` holds no plan.
  void plan(const batch& step, const state_store<Space>& state, plan_type& into) const {
    detail::step_program& program = detail::plan_access::program(into);
    program.maker = detail::moving_serial{};
    check_holds_units();
    check_store(state);
    if constexpr (per_part) {
      into.parts.resize(entry_count());
      for (part_results& part : into.parts) {
        part.results.clear();
        part.output_size = 0;
      }
    } else {
      into.results.clear();
      into.groups.clear();
      into.output_size = 0;
    }
    into.num_rows = 0;
    plan_program(step, state, into);
    program.maker = detail::moving_serial{id_.value()};
  }

  /// Outside the step: room for the one upload and a staging slot set aside
  /// for it (none for an empty step, which uploads nothing), every entry's
  /// workspace and arrival counters, and the state of chunked requests.
  /// Everything it allocates, and any wait for a staging slot still being
  /// copied from, the audit counts. If it throws, every request's state is as
  /// it was (the states come last, all or none), and a slot it set aside stays
  /// set aside for the next reserve().
  void reserve(const plan_type& plan, state_store<Space>& state) {
    const detail::step_program& program = detail::plan_access::program(plan);
    check_maker(program);
    check_store(state);
    check_unrun(program);
    // Refused here, as an empty step's reserve() asks the space for nothing that would refuse.
    space_->refuse_in_capture("reserve");
    if (program.shares.empty())
      return_staging();
    else
      space_->reserve_upload(program.image_bytes, staging_);
    if constexpr (branched) space_->reserve_branches(static_cast<int>(entry_count()));
    std::size_t states = 0;
    for (const detail::share& planned : program.shares) {
      with_unit(planned.entry, [&](auto, auto& unit) { unit.reserve(planned); });
      states += planned.stateful.size();
    }
    state.begin_reservations(states);
    try {
      for (const detail::share& planned : program.shares)
        for (const detail::state_use& use : planned.stateful)
          state.reserve(use.batch_index, use.owner, use.floats, use.key, use.part, use.before, state_parts());
    } catch (...) {
      state.undo_reservations();
      throw;
    }
    state.keep_reservations();
    reserved_ = program.serial;
  }

  /// The step: checks the shapes, that the last reserve() was for this plan
  /// and that it has not run, uploads the image, launches every entry's work,
  /// and moves chunked requests on. `output` must hold plan.output_size values.
  /// Inside a stream capture, use capture().
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const step_plan& plan, state_store<Space>& state,
               cuda::std::span<Result> output) requires(!per_part) {
    forward_into(hidden, plan, state, output_spans{output});
  }

  /// A multi_pooler's step: forward() with one output a part, in the parts'
  /// order, each holding its plan.parts[k].output_size values.
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const parts_plan& plan, state_store<Space>& state,
               cuda::std::span<typename detail::unit_result<Units>::type>... outputs) requires(per_part && !listed) {
    forward_into(hidden, plan, state, output_spans{outputs...});
  }

  /// A runtime_multi_pooler's step: forward() with one output a part, in the
  /// parts' order, each a span of the part's result type holding its
  /// plan.parts[k].output_size values.
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const parts_plan& plan, state_store<Space>& state,
               std::span<const part_output> outputs) requires(listed) {
    forward_into(hidden, plan, state, outputs);
  }

  // Capacity and capture.

  /// Fixes the largest step the runner takes (every entry may get all of it),
  /// once, and makes room for it outside any step, so that a captured step's
  /// memory never moves. plan() then refuses a batch that does not fit.
  void reserve_capacity(const capacity& limits) {
    check_holds_units();
    detail::check_capacity(limits);
    if (capacity_) {
      if (*capacity_ == limits) return;
      detail::fail("capacity", "it is fixed once, at requests ", capacity_->requests, ", rows ", capacity_->rows,
           ", result_rows ", capacity_->result_rows, ", columns ", capacity_->columns,
           ": graphs captured with it read the memory it sized");
    }
    std::size_t bytes = 0;
    std::int64_t per_request = 0;  // a dispatcher's: the most of any entry, which may get the whole step
    std::int64_t per_result_row = 0;
    try {
      for_each_unit([&](std::size_t entry, auto& unit) {
        unit.size_for(limits);
        regions_[entry] = detail::align_bytes(bytes);
        bytes = regions_[entry] + unit.bounds().image_bytes;
        per_request = std::max(per_request, unit.bounds().output_per_request);
        per_result_row = std::max(per_result_row, unit.bounds().output_per_result_row);
      });
    } catch (const std::bad_alloc&) {
      detail::fail("capacity", "requests ", limits.requests, ", rows ", limits.rows, ", result_rows ", limits.result_rows,
           ": the workspace a step of it needs is more than can be allocated");
    }
    capacity_ = limits;
    capacity_image_bytes_ = bytes;
    if constexpr (per_part) {
      for_each_unit([&](std::size_t entry, auto& unit) {
        output_capacities_[entry] = unit.bounds().output_per_request * limits.requests +
                                    unit.bounds().output_per_result_row * limits.result_rows;
      });
    } else {
      // Each entry's results after the first start on a 16-byte boundary: up to 3
      // floats (7 16-bit values) more each.
      output_capacities_[0] =
          per_request * limits.requests + per_result_row * limits.result_rows +
          (16 / static_cast<std::int64_t>(sizeof(Result)) - 1) * static_cast<std::int64_t>(packed_entries - 1);
    }
  }

  /// The values an output must hold for any step within the capacity.
  std::int64_t output_capacity() const requires(!per_part) {
    require_capacity("output_capacity");
    return output_capacities_[0];
  }

  /// A multi_pooler's: the values part `part`'s output must hold for any step within the capacity.
  std::int64_t output_capacity(std::size_t part) const requires(per_part) {
    require_capacity("output_capacity");
    if (part >= entry_count()) detail::fail("output_capacity", "part ", part, " of ", entry_count());
    return output_capacities_[part];
  }

  /// A runtime_multi_pooler's: the type of the values part `part` writes
  /// (float, half, …, sparse_entry), which its output must hold.
  std::string_view result_type_name(std::size_t part) const requires(listed) {
    if (part >= units_.size()) detail::fail("result_type_name", "part ", part, " of ", units_.size());
    return units_[part].result_type_name;
  }

  /// Outside any capture: the staging one captured step needs (device spaces),
  /// which only this runner captures and restages with.
  auto reserve_graph() requires(Space::family == algorithm_family::device) {
    check_holds_units();
    require_capacity("reserve_graph");
    return space_->reserve_graph(capacity_image_bytes_, static_cast<int>(present_units()), id_.value());
  }

  /// Records the step into the stream capture in progress: the upload from
  /// `home`, which at each launch copies what that launch's batch uses of the
  /// capacity's image (each entry's region up to its image), and every entry's
  /// launches sized by the capacity (a task absent from this step included, so
  /// that later batches may hold it). The graph reads `hidden` (capacity.rows rows) and writes
  /// `output` (output_capacity() values) at every replay: they, `home`, this
  /// runner and the state store must outlive it. Launch the graph, then call
  /// home.mark_launched(); each later step is restage() and the same.
  template <hidden_element T, class Upload>
  void capture(hidden_view<T> hidden, const step_plan& plan, state_store<Space>& state, cuda::std::span<Result> output,
               Upload& home) requires(!per_part) {
    capture_into(hidden, plan, state, output_spans{output}, home);
  }

  /// A multi_pooler's captured step: capture() with one output a part, in the
  /// parts' order, each holding output_capacity(k) values.
  template <hidden_element T, class Upload>
  void capture(hidden_view<T> hidden, const parts_plan& plan, state_store<Space>& state,
               cuda::std::span<typename detail::unit_result<Units>::type>... outputs,
               Upload& home) requires(per_part && !listed) {
    capture_into(hidden, plan, state, output_spans{outputs...}, home);
  }

  /// A runtime_multi_pooler's captured step: capture() with one output a
  /// part, each holding output_capacity(k) values of the part's result type.
  template <hidden_element T, class Upload>
  void capture(hidden_view<T> hidden, const parts_plan& plan, state_store<Space>& state,
               std::span<const part_output> outputs, Upload& home) requires(listed) {
    capture_into(hidden, plan, state, outputs, home);
  }

  /// Between replays of a captured step: writes the next step's plan into the
  /// graph's slot (once the last replay has read it) and moves chunked requests
  /// on. Then launch the graph and call home.mark_launched(). The step's hidden
  /// states go into the first plan.num_rows rows of the captured buffer.
  template <class Upload>
  void restage(const plan_type& plan, state_store<Space>& state, Upload& home) {
    const detail::step_program& program = detail::plan_access::program(plan);
    check_maker(program);
    require_capacity("restage");
    check_for_capacity(program, home);
    check_reserved(program, state);
    encode(program, state, space_->restage(home, pieces_of<Upload>(program)));
    return_staging();
    advance(program, state);
  }

 protected:
  /// A runner moved from, or whose unit was given to another, has no units to
  /// plan or run with.
  void check_holds_units() const {
    if (id_.value() == 0)
      detail::fail("runner",
                   "it holds no units (it was moved from, or its unit was given to a dispatcher or "
                   "multi_pooler): plan and run with the runner that holds them");
  }

  /// For a pooler whose unit leaves it: the staging goes back to the ring and
  /// the id to no one, so that it plans and runs nothing more.
  void give_up_units() {
    return_staging();
    id_.give_up();
  }

  /// The entries the runner has: a pack's, present or not, or the list's.
  std::size_t entry_count() const {
    if constexpr (listed)
      return units_.size();
    else
      return packed_entries;
  }

  /// `unserved` ends the message that refuses a task no entry serves.
  step_runner(Space& space, std::string unserved, std::optional<Units>... units) requires(!per_part)
      : space_(&space), unserved_(std::move(unserved)), units_(std::move(units)...) {
    check_units("the poolers of one dispatcher", "entry");
    if (hidden_size_ == 0) detail::fail("dispatcher", "needs at least one pooler");
  }

  /// A multi_pooler's: every part's unit, and the token filters each adds.
  step_runner(Space& space, std::array<part_filters, packed_entries> filters,
              Units... units) requires(per_part && !listed)
      : space_(&space), units_(std::move(units)...), filters_(std::move(filters)) {
    check_parts();
  }

  /// A runtime_multi_pooler's: its parts' units, as many as it has, and the
  /// token filters each adds (as many).
  step_runner(Space& space, std::vector<part_filters> filters,
              std::vector<detail::any_unit<Space>> units) requires(listed)
      : space_(&space), units_(std::move(units)), filters_(std::move(filters)) {
    if (units_.empty()) detail::fail("parts", "a multi_pooler needs at least one part");
    regions_.resize(units_.size());
    output_capacities_.resize(units_.size());
    kinds_.resize(units_.size());
    check_parts();
  }

  /// The unit of entry `Entry`, which must be present.
  template <std::size_t Entry>
  auto& unit() {
    return *std::get<Entry>(units_);
  }
  template <std::size_t Entry>
  const auto& unit() const {
    return *std::get<Entry>(units_);
  }

 private:
  /// Gives the staging slot the last reserve() set aside back to the space's
  /// ring, for a step that uploads nothing from it (an empty one, or one staged
  /// in a graph's slot).
  void return_staging() { staging_ = {}; }

  /// Whether a step's entries each take a branch: the space says
  /// (entries_on_branches; a device space's launch policy, and host_space,
  /// which runs the branches' passes together).
  static constexpr bool branched = [] {
    if constexpr (requires { Space::entries_on_branches; })
      return Space::entries_on_branches;
    else
      return false;
  }();

  /// The branches a step's entries' launches go on, where the space's policy
  /// puts each of several entries on a branch of its own: forked after the
  /// upload, an entry's launches on the next (next()), joined back (join())
  /// before the step moves on; a launch that throws between the two leaves the
  /// branches joined (a space that holds its branches' work until the join,
  /// as host_space does, drops it unrun: drop_branches()). Elsewhere every
  /// launch stays on the stream.
  class entry_branches {
   public:
    entry_branches(Space& space, std::size_t entries) : space_(space), forked_(branched && entries > 1) {
      if constexpr (branched)
        if (forked_) space_.fork_branches(static_cast<int>(entries));
    }
    entry_branches(const entry_branches&) = delete;
    entry_branches& operator=(const entry_branches&) = delete;
    ~entry_branches() {
      if constexpr (branched) {
        if (!forked_) return;
        try {
          if constexpr (requires { space_.drop_branches(); })
            space_.drop_branches();
          else
            space_.join_branches();
        } catch (...) {  // the launch's own error is the one in flight
        }
      }
    }
    void next() {
      if constexpr (branched)
        if (forked_) space_.select_branch(taken_++);
    }
    void join() {
      if constexpr (branched) {
        if (!forked_) return;
        forked_ = false;
        space_.join_branches();
      }
    }

   private:
    Space& space_;
    bool forked_;
    int taken_ = 0;
  };

  /// The parts of a multi_pooler read the same hidden states, and a part's
  /// filters are a token part's; each part's kind decides the knobs it takes.
  void check_parts() {
    check_units("the parts of one multi_pooler", "part");
    for_each_unit([&](std::size_t entry, const auto& unit) {
      detail::check_part_filters(entry, is_token_task(unit.task), filters_[entry]);
      kinds_[entry] = {unit.task, unit.sparse};
    });
  }

  /// Every unit was made on the runner's space, which its launches go to and
  /// its images are staged on, and reads the same hidden states: `whose` and
  /// `each` name them in the messages that refuse another space or width.
  void check_units(std::string_view whose, std::string_view each) {
    for_each_unit([&](std::size_t entry, const auto& unit) {
      if (!unit.belongs_to(*space_))
        detail::fail("space", whose, " run on the space it runs on, and its ", each, " ", entry,
                     " was made on another");
      if (hidden_size_ == 0) hidden_size_ = unit.hidden_size();
      if (unit.hidden_size() != hidden_size_)
        detail::fail("hidden_size", whose, " read the same hidden states, but one has ", unit.hidden_size(),
                     " columns and another ", hidden_size_);
    });
  }

  /// The step's program, into that of `into`: the whole batch checked, then
  /// every entry's detail::share planned.
  void plan_program(const batch& step, const state_store<Space>& state, plan_type& into) const {
    detail::step_program& program = detail::plan_access::program(into);
    detail::plan_scratch& scratch = program.scratch;
    detail::lay_out_into(step.requests, step.padded, scratch.layout, scratch.id_table);
    const step_layout& layout = scratch.layout;
    // Rows whose bytes (2 a value) no 64-bit count holds, or more rows read than the records count, are
    // refused before any is planned (a window is cut into tiles by its rows). A padded batch's rows may
    // lie further than it reads: offsets into the rows are 64-bit.
    if (layout.num_rows > std::numeric_limits<std::int64_t>::max() / (std::int64_t{2} * hidden_size_))
      detail::fail(step.padded ? "padded.sequence_length" : "num_scheduled", "the step's ", layout.num_rows,
                   " rows of ", hidden_size_, " columns are more bytes than a 64-bit count holds");
    if (layout.scheduled_rows > detail::most_counted)
      detail::fail("num_scheduled", "the step reads ", layout.scheduled_rows, " rows; a step reads at most ",
                   detail::most_counted, " (its records count rows in 32 bits)");
    if constexpr (per_part) {
      for (std::size_t index = 0; index < step.requests.size(); ++index)
        detail::check_knobs_reach(index, step.requests[index], kinds_);
    } else {
      for (const task_group& group : layout.groups)
        if (!entry_of(group.task))
          detail::fail_request(group.first_request, step.requests[group.first_request].id, "task", name(group.task),
                               " has no pooler", unserved_);
    }
    if (capacity_) {
      detail::check_limit("requests", static_cast<std::int64_t>(step.requests.size()), capacity_->requests);
      detail::check_limit("rows", layout.num_rows, capacity_->rows);
    }
    program.serial = detail::next_serial();
    program.hidden_size = hidden_size_;
    program.num_rows = layout.num_rows;
    program.output_sizes.assign(per_part ? entry_count() : 1, 0);
    program.image_bytes = 0;
    program.shares.clear();
    if constexpr (per_part) {
      for (part_results& part : into.parts) part.results.assign(step.requests.size(), std::nullopt);
      scratch.part_batches.resize(entry_count());
    } else {
      into.results.assign(step.requests.size(), std::nullopt);
      into.groups = layout.groups;
    }
    const detail::routed_ids_release release{scratch.part_batches};
    std::int64_t result_rows = 0;
    std::int64_t columns = 0;
    std::vector<std::size_t>& chosen = scratch.chosen;
    chosen.clear();
    if constexpr (per_part)
      for (std::size_t i = 0; i < step.requests.size(); ++i) chosen.push_back(i);
    for_each_unit([&](std::size_t entry, const auto& unit) {
      if constexpr (!per_part) {
        chosen.clear();
        for (const task_group& group : layout.groups)  // the groups hold the requests' tasks: no pass over the requests
          if (group.task == tasks[entry])
            for (std::size_t i = group.first_request; i < group.first_request + group.num_requests; ++i)
              chosen.push_back(i);
      }
      if (chosen.empty()) return;
      std::int64_t& output_size = program.output_sizes[output_of(entry)];
      const std::int64_t output_begin = detail::align_values(output_size, unit.result_bytes);
      detail::share& planned = program.shares.next();
      const auto states = detail::part_states<state_store<Space>>{state, part_of(entry), state_parts()};
      unit.plan(batch_of(entry, step, scratch), layout.chunks, chosen, states, output_begin, capacity_.has_value(),
                planned, results_of(into, entry), scratch.planner);
      if (unit.token_wise) count_share(result_rows, planned.result_rows);
      count_share(columns, static_cast<std::int64_t>(planned.records.column_table.size()));
      if (capacity_) {  // the limits first, whose refusal names what the step has too much of
        detail::check_limit("result_rows", result_rows, capacity_->result_rows);
        detail::check_limit("columns", columns, capacity_->columns);
        unit.check_fits(planned);
      }
      for (detail::state_use& use : planned.stateful) use.part = part_of(entry);
      planned.entry = entry;
      planned.image_offset = capacity_ ? regions_[entry] : detail::align_bytes(program.image_bytes);
      program.image_bytes = std::max(program.image_bytes, planned.image_offset + planned.image_bytes);
      output_size = output_begin + planned.output_values;
      // What size_for() sized the output by holds any step within the limits; checked, as a captured step
      // writes an output of output_capacity() values.
      if (capacity_) detail::check_limit("output values", output_size, output_capacities_[output_of(entry)]);
    });
    if (capacity_) program.image_bytes = capacity_image_bytes_;  // every entry's region, each with a header to write
    if constexpr (per_part) {
      for (std::size_t entry = 0; entry < entry_count(); ++entry)
        into.parts[entry].output_size = program.output_sizes[entry];
    } else {
      into.output_size = program.output_sizes[0];
    }
    into.num_rows = program.num_rows;
  }

  /// Adds an entry's share of the step (its requests, result rows or columns)
  /// to `total`: a dispatcher's entries share the step, so theirs add up; a
  /// multi_pooler's parts each have the whole step, so the largest counts.
  static void count_share(std::int64_t& total, std::int64_t share) {
    total = per_part ? std::max(total, share) : total + share;
  }

  /// Where entry `entry`'s results of each request go in the plan.
  static std::vector<std::optional<result_slice>>& results_of(plan_type& into, std::size_t entry) {
    if constexpr (per_part)
      return into.parts[entry].results;
    else
      return into.results;
  }

  /// The step as entry `entry` plans it: a multi_pooler's part sees each
  /// request with the knobs that reach it (route_knobs), written into the
  /// scratch's copy for it, whose storage the next plan reuses.
  const batch& batch_of(std::size_t entry, const batch& step, detail::plan_scratch& scratch) const {
    if constexpr (per_part) {
      batch& routed = scratch.part_batches[entry];
      routed.padded = step.padded;
      routed.requests.resize(step.requests.size());
      for (std::size_t index = 0; index < step.requests.size(); ++index)
        detail::route_knobs(index, step.requests[index], entry, kinds_[entry], filters_[entry], routed.requests[index]);
      return routed;
    } else {
      return step;
    }
  }

  /// forward(): the step into `spans`, one span an output.
  template <hidden_element T>
  void forward_into(hidden_view<T> hidden, const plan_type& plan, state_store<Space>& state,
                    const output_spans& spans) {
    const detail::step_program& program = detail::plan_access::program(plan);
    check_maker(program);
    detail::check_hidden(hidden, hidden_size_, program.num_rows);
    check_outputs(spans, program.output_sizes, false);
    check_apart(hidden, spans);
    if (space_->capturing())
      detail::fail("forward",
                   "the stream is being captured: a captured step goes through capture() and a graph_upload");
    check_reserved(program, state);
    if (!program.shares.empty()) {
      const std::span<std::byte> staged = space_->stage(staging_, program.image_bytes);
      encode(program, state, staged);
      const std::byte* image = space_->upload(staging_, staged);
      entry_branches branches(*space_, program.shares.size());
      for (const detail::share& planned : program.shares) {
        branches.next();
        with_unit(planned.entry, [&](auto entry, auto& unit) {
          unit.template launch<detail::sized_by::plan>(hidden, planned.records.counts(), image + planned.image_offset,
                                                       output_data(spans, entry), planned.output_values);
        });
      }
      branches.join();
    }
    advance(program, state);
  }

  /// capture(): the step into `spans`, one span an output.
  template <hidden_element T, class Upload>
  void capture_into(hidden_view<T> hidden, const plan_type& plan, state_store<Space>& state, const output_spans& spans,
                    Upload& home) {
    const detail::step_program& program = detail::plan_access::program(plan);
    check_maker(program);
    require_capacity("capture");
    detail::check_captured_hidden(hidden, hidden_size_, capacity_->rows);
    check_outputs(spans, output_capacities_, true);
    check_apart(hidden, spans);
    check_for_capacity(program, home);
    check_reserved(program, state);
    encode(program, state, space_->stage(home, pieces_of<Upload>(program)));
    const std::byte* image = space_->upload(home);
    return_staging();
    entry_branches branches(*space_, present_units());
    for_each_unit([&](auto entry, auto& unit) {
      branches.next();
      unit.template launch<detail::sized_by::capacity>(hidden, unit.bounds().records, image + regions_[entry],
                                                       output_data(spans, entry), output_capacities_[output_of(entry)]);
    });
    branches.join();
    advance(program, state);
  }

  /// Throws seqpool::error unless each output holds `sizes`' values: a plan's,
  /// or, `captured`, the capacity's.
  template <class Sizes>
  void check_outputs(const output_spans& spans, const Sizes& sizes, bool captured) const {
    if constexpr (listed) {
      if (spans.size() != units_.size())
        detail::fail("outputs", "the multi_pooler has ", units_.size(), " parts, an output each; given ", spans.size());
      for (std::size_t part = 0; part < spans.size(); ++part) {
        if (spans[part].result_type_name() != units_[part].result_type_name)
          detail::fail(detail::concat("output of part ", part), "holds ", spans[part].result_type_name(),
                       " values; the part writes ", units_[part].result_type_name);
        detail::check_output(spans[part].size(), sizes[part], captured, true, part);
      }
    } else {
      [&]<std::size_t... Output>(std::index_sequence<Output...>) {
        (detail::check_output(std::get<Output>(spans).size(), sizes[Output], captured, per_part, Output), ...);
      }
      (std::make_index_sequence<packed_outputs>{});
    }
  }

  /// Calls `visit(k, bytes)` with each output's index and the bytes it spans.
  template <class Visit>
  static void for_each_output(const output_spans& spans, Visit visit) {
    if constexpr (listed) {
      for (std::size_t k = 0; k < spans.size(); ++k) visit(k, detail::bytes_of(spans[k].data(), spans[k].bytes()));
    } else {
      [&]<std::size_t... Output>(std::index_sequence<Output...>) {
        (visit(Output, detail::bytes_of(std::get<Output>(spans).data(), std::get<Output>(spans).size_bytes())), ...);
      }
      (std::make_index_sequence<packed_outputs>{});
    }
  }

  /// Throws seqpool::error unless every output lies apart from the hidden
  /// states and from every other output.
  template <hidden_element T>
  static void check_apart(hidden_view<T> hidden, const output_spans& spans) {
    const detail::byte_range rows = detail::bytes_of(hidden);
    for_each_output(spans, [&](std::size_t part, detail::byte_range output) {
      detail::check_apart_from_rows(output, per_part, part, rows);
      for_each_output(spans, [&](std::size_t other_part, detail::byte_range other) {
        if (other_part < part) detail::check_apart_from_output(output, part, other, other_part);
      });
    });
  }

  /// Where entry `entry` writes: its output's values (a pack's entry is a
  /// std::integral_constant, a list's a std::size_t).
  template <class Entry>
  static auto output_data(const output_spans& spans, Entry entry) {
    if constexpr (listed)
      return spans[entry].data();
    else
      return std::get<output_of(Entry::value)>(spans).data();
  }

  void require_capacity(const char* call) const {
    if (!capacity_) detail::fail(call, "needs a capacity: call reserve_capacity() first");
  }

  /// A runner's chunked requests keep their states in memory of its space,
  /// which its launches read in their order.
  void check_store(const state_store<Space>& state) const {
    if (!state.belongs_to(*space_))
      detail::fail("state",
                   "the state store was made on another space than the runner's: keep a runner's states in "
                   "a store of its space");
  }

  /// A plan's records are sized for the runner that made it: any other would
  /// read and write past them.
  void check_maker(const detail::step_program& program) const {
    check_holds_units();
    if (program.maker.value() == 0)
      detail::fail("plan", "it holds no plan (none was planned into it, its plan() threw, or it was moved from): "
                           "plan the step again");
    if (program.maker.value() != id_.value())
      detail::fail("plan", "it was made by another pooler (hidden_size ", program.hidden_size,
           "); plan the step with the pooler that runs it");
  }

  /// A captured step reads an image laid out for the capacity, from the
  /// graph_upload this runner made for it.
  template <class Upload>
  void check_for_capacity(const detail::step_program& program, const Upload& home) const {
    std::int64_t requests = 0;
    for (const detail::share& planned : program.shares)
      count_share(requests, static_cast<std::int64_t>(planned.num_requests));
    detail::check_limit("requests", requests, capacity_->requests);
    detail::check_limit("rows", program.num_rows, capacity_->rows);
    if (program.image_bytes != capacity_image_bytes_)
      detail::fail("capacity", "the plan was made before reserve_capacity(): plan the step again");
    if (home.owner() != id_.value() || home.bytes() < capacity_image_bytes_)
      detail::fail("graph_upload", "it was made by another pooler's reserve_graph(), for ", home.bytes(),
           " bytes; capture and restage with the graph_upload this one's reserve_graph() made");
  }

  /// Throws seqpool::error unless neither the plan nor one made after it has
  /// run: a plan runs once, against the state it was planned with, so
  /// reserve() must not begin its states again either.
  void check_unrun(const detail::step_program& program) const {
    if (program.serial <= last_run_)
      detail::fail("plan",
                   "it ran already, or a later plan has (a plan runs once, against the state it was planned "
                   "with, and plans run in the order they are made): plan the step again");
  }

  /// Throws seqpool::error, before anything is queued, unless the plan has not
  /// run and the last reserve() was for it (made by this runner: the caller
  /// checked its maker first) and made the room it needs: the state of its
  /// chunked requests, and every unit's workspace and arrival counters.
  void check_reserved(const detail::step_program& program, const state_store<Space>& state) const {
    check_store(state);
    check_unrun(program);
    if (reserved_ != program.serial)
      detail::fail("reserve", "call reserve() with this step's plan before forward() (it makes the room the step needs "
                      "and settles its staging)");
    for (const detail::share& planned : program.shares) {
      with_unit(planned.entry, [&](auto, const auto& unit) {
        if (!unit.has_room_for(planned))
          detail::fail("reserve", "the step needs workspace that reserve() did not make: call reserve() with this "
                          "step's plan before forward()");
      });
      for (const detail::state_use& use : planned.stateful) {
        state.check_current(use.batch_index, use.owner, use.key, use.part, use.before, state_parts());
        if (!state.holds(use.owner.id, use.floats, use.part))
          detail::fail_request(use.batch_index, use.owner.id, "state",
                       "no state was reserved for it: call reserve() with this step's plan before forward()");
      }
    }
  }

  /// Writes every detail::share's records at its offset, with this step's state, into
  /// `staged` on the host; with a capacity, an entry without requests gets an
  /// empty header, which its launches read as nothing to do.
  void encode(const detail::step_program& program, const state_store<Space>& state, std::span<std::byte> staged) const {
    if (staged.size() < program.image_bytes)
      detail::fail("staging", "the slot holds ", staged.size(), " bytes, the step's image ", program.image_bytes);
    if (capacity_)
      for_each_unit([&](std::size_t entry, const auto&) {
        std::memset(staged.data() + regions_[entry], 0, sizeof(detail::image_header));
      });
    for (const detail::share& planned : program.shares) {
      std::byte* base = staged.data() + planned.image_offset;
      planned.write(base);
      float** state_table = planned.header.state_table.in(base);
      for (const detail::state_use& use : planned.stateful) {
        float* const data = state.data(use.owner.id, use.part);  // one lookup a request, not one a span
        for (std::int32_t k = 0; k < use.records; ++k)  // a stateful record's entry of the table: its detail's index
          state_table[planned.records.entries[static_cast<std::size_t>(use.request + k)].detail] =
              data + k * use.record_floats;
      }
    }
  }

  /// What a captured step writes of the capacity's image, which its upload
  /// copies: each present entry's region, up to its share's image or, without
  /// one, its empty header.
  template <class Upload>
  std::vector<typename Upload::piece> pieces_of(const detail::step_program& program) const {
    std::vector<typename Upload::piece> pieces;
    pieces.reserve(entry_count());
    for_each_unit([&](std::size_t entry, const auto&) {
      std::size_t used = detail::align_bytes(sizeof(detail::image_header));
      for (const detail::share& planned : program.shares)
        if (planned.entry == entry) used = planned.image_bytes;
      pieces.push_back({regions_[entry], used});
    });
    return pieces;
  }

  /// After launching: chunked requests have pooled this step's tokens, and the plan has run.
  void advance(const detail::step_program& program, state_store<Space>& state) {
    for (const detail::share& planned : program.shares)
      for (const detail::state_use& use : planned.stateful) state.advance(use.owner, use.part, use.chunk);
    last_run_ = program.serial;
    reserved_ = 0;
  }

  /// The entry that serves `wanted`, if one is present.
  std::optional<std::size_t> entry_of(task wanted) const {
    std::optional<std::size_t> found;
    for_each_unit([&](std::size_t entry, const auto&) {
      if (tasks[entry] == wanted) found = entry;
    });
    return found;
  }

  /// Calls `work(entry, unit)` for every present entry, in table order;
  /// `entry` is a std::integral_constant, which converts to its std::size_t
  /// (a list's entries: a std::size_t).
  template <class Work>
  void for_each_unit(Work&& work) {
    each_unit(*this, work);
  }
  template <class Work>
  void for_each_unit(Work&& work) const {
    each_unit(*this, work);
  }
  template <class Runner, class Work>
  static void each_unit(Runner& runner, Work&& work) {
    if constexpr (listed) {
      for (std::size_t entry = 0; entry < runner.units_.size(); ++entry) work(entry, runner.units_[entry]);
    } else {
      [&]<std::size_t... Entry>(std::index_sequence<Entry...>) {
        ((std::get<Entry>(runner.units_)
              ? work(std::integral_constant<std::size_t, Entry>{}, *std::get<Entry>(runner.units_))
              : void()),
         ...);
      }
      (std::make_index_sequence<packed_entries>{});
    }
  }

  /// The entries that hold a unit: a captured step's pieces and launches.
  std::size_t present_units() const {
    std::size_t present = 0;
    for_each_unit([&](std::size_t, const auto&) { ++present; });
    return present;
  }

  /// Calls `work(entry, unit)` with the unit of `wanted`, which a plan of this
  /// runner names, so it is present; `entry` as for_each_unit() gives it.
  template <class Work>
  void with_unit(std::size_t wanted, Work&& work) {
    unit_at(*this, wanted, work);
  }
  template <class Work>
  void with_unit(std::size_t wanted, Work&& work) const {
    unit_at(*this, wanted, work);
  }
  template <class Runner, class Work>
  static void unit_at(Runner& runner, std::size_t wanted, Work& work) {
    if constexpr (listed) {
      work(wanted, runner.units_[wanted]);
    } else {
      each_unit(runner, [&](auto entry, auto& unit) {
        if (entry == wanted) work(entry, unit);
      });
    }
  }

  Space* space_;
  std::string unserved_;
  std::conditional_t<listed, std::vector<detail::any_unit<Space>>, std::tuple<std::optional<Units>...>> units_;
  /// A multi_pooler's: the token filters each part adds, and what each part is
  /// (route_knobs); a dispatcher's hold none.
  each_of<part_filters, packed_parts> filters_{};
  each_of<detail::part_kind, packed_parts> kinds_{};
  std::int64_t hidden_size_ = 0;
  detail::runner_id id_;
  std::uint64_t reserved_ = 0;  ///< the plan the last reserve() was for, until it runs
  typename Space::upload_reservation staging_;  ///< the staging the last reserve() set aside, until a step uploads
  std::uint64_t last_run_ = 0;  ///< the last plan that ran
  std::optional<capacity> capacity_;
  each_of<std::size_t, packed_entries> regions_{};  ///< each entry's offset in the capacity's image
  std::size_t capacity_image_bytes_ = 0;
  /// The values each output must hold for a captured step: a part's each, or the one output's.
  each_of<std::int64_t, packed_outputs> output_capacities_{};
};

}  // namespace seqpool
