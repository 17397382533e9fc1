// pooler<Method, Head, Space>: one pooling method and one head in one memory space.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <cuda/std/span>

#include <seqpool/batch.hpp>
#include <seqpool/detail/apply_linear.hpp>
#include <seqpool/detail/check_forward.hpp>
#include <seqpool/detail/combine_partials.hpp>
#include <seqpool/detail/finish_rows.hpp>
#include <seqpool/detail/gather_rows.hpp>
#include <seqpool/detail/plan_builder.hpp>
#include <seqpool/detail/reduce_tiles.hpp>
#include <seqpool/detail/stream_row.hpp>
#include <seqpool/error.hpp>
#include <seqpool/head/concepts.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/method/concepts.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/space/buffer.hpp>
#include <seqpool/space/memory_space.hpp>
#include <seqpool/state.hpp>

namespace seqpool {

/// Pools a group of requests that share one task in two phases. plan() runs on
/// the host, checks every request and fixes every size, offset and index of the
/// step. forward() uploads the plan's one index block and launches work whose
/// shapes the plan fixed: it never reads the device back, never waits, and
/// allocates nothing once reserve() has made room.
///
///     auto plan = pooler.plan(batch, state);
///     pooler.reserve(plan, state);               // outside the step: may allocate
///     pooler.forward(hidden, plan, state, out);  // the step
///     // plan.results[i]: where request i's result lies in `out`, if it finished
template <class Method, pooling_head Head, memory_space Space>
class pooler {
  static_assert(detail::method_is_complete<Method>());

 public:
  using method_type = Method;
  using head_type = Head;
  using space_type = Space;

  static constexpr bool token_wise = Method::kind == method_kind::token;
  static constexpr seqpool::task task = task_of(token_wise, Head::kind);

  pooler(Space& space, std::int64_t hidden_size, Method method = {}, Head head = {})
      : space_(&space), hidden_size_(hidden_size), method_(std::move(method)), head_(head), workspace_(space, 0) {
    // Records hold widths in 32 bits.
    if (hidden_size < 1 || hidden_size > std::numeric_limits<std::int32_t>::max())
      detail::fail("hidden_size", "must be in [1, 2147483647], got ", hidden_size);
  }

  std::int64_t hidden_size() const { return hidden_size_; }
  const Method& method() const { return method_; }
  const Head& head() const { return head_; }

  /// Plans a batch whose requests all have this pooler's task.
  step_plan plan(const batch& step, const state_store<Space>& state) const {
    const step_layout layout = lay_out(step);
    for (const task_group& group : layout.groups)
      if (group.task != task)
        detail::fail_request(group.first_request, step.requests[group.first_request].id, "task", name(group.task),
                             " has no pooler here (this one serves ", name(task), ")");
    std::vector<std::size_t> everyone(step.requests.size());
    for (std::size_t i = 0; i < everyone.size(); ++i) everyone[i] = i;
    return plan(step, layout.chunks, everyone, state);
  }

  /// Plans the requests `chosen` of a batch (indices, in batch order), whose
  /// chunks count rows from the start of the hidden states the launch will read:
  /// how a dispatcher gives one pooler every group of its task at once.
  step_plan plan(const batch& step, std::span<const chunk> chunks, std::span<const std::size_t> chosen,
                 const state_store<Space>& state) const {
    detail::plan_builder builder(hidden_size_, Space::shape, head_.linear().present(), chosen.size());
    with_method([&](const auto& method) {
      std::vector<std::int64_t> positions;
      for (const std::size_t index : chosen) {
        const request& r = step.requests[index];
        state.check(index, r);
        if constexpr (token_wise)
          plan_tokens(method, builder, index, r, chunks[index], positions);
        else
          builder.add_pooled(r, chunks[index], method.window(chunks[index]), method.keeps_state,
                             head_.output_width(index, r, hidden_size_));
      }
    });
    std::int64_t num_rows = 0;
    for (const std::size_t index : chosen)
      num_rows = std::max(num_rows, chunks[index].row_begin + chunks[index].num_scheduled);
    return std::move(builder).build(num_rows);
  }

  /// Outside the step: state slots for chunked requests, room for the upload and
  /// the workspace. Everything it allocates, the audit counts; forward() calls it
  /// too, so skipping it costs allocations inside the step, not correctness.
  void reserve(const step_plan& plan, state_store<Space>& state) {
    for (const detail::state_use& use : plan.stateful) state.reserve(use.owner, use.floats);
    space_->reserve_upload(plan.block.bytes);
    if (std::cmp_less(workspace_.size(), plan.workspace_floats))
      workspace_ = buffer<float, Space>(*space_, static_cast<std::size_t>(plan.workspace_floats));
  }

  /// The step: checks the shapes, uploads the index block, launches, and moves
  /// chunked requests on in the state. `output` must hold plan.output_size floats.
  template <hidden_element T>
  void forward(hidden_view<T> hidden, const step_plan& plan, state_store<Space>& state, cuda::std::span<float> output) {
    detail::check_forward(hidden, hidden_size_, plan.num_rows, plan.output_size, output);
    reserve(plan, state);
    if (plan.block.bytes > 0) {
      const std::span<std::byte> staged = space_->stage(plan.block.bytes);
      encode(plan, state, staged);
      launch(hidden, plan, space_->upload(staged), output);
    }
    advance(plan, state);
  }

  // The pieces of forward(), for a dispatcher that shares one upload among poolers.

  /// Writes the plan's index block, with this step's state slots, into `block` on the host.
  void encode(const step_plan& plan, const state_store<Space>& state, std::span<std::byte> block) const {
    plan.block.write(block.data());
    float** state_table = plan.block.at.state_table.in(block.data());
    for (const detail::state_use& use : plan.stateful) state_table[use.slot] = state.data(use.owner.id);
  }

  /// Launches the plan's passes over an index block already on the device.
  template <hidden_element T>
  void launch(hidden_view<T> hidden, const step_plan& plan, const std::byte* device_block,
              cuda::std::span<float> output) {
    constexpr bool whole_rows = Space::shape.whole_rows;
    const detail::plan_block& b = plan.block;
    const detail::step_memory memory{output.data(), workspace_.data(), b.at.state_table.in(device_block)};
    const detail::request_record* requests = b.at.requests.in(device_block);
    const std::int64_t per_row = whole_rows ? 1 : std::max<std::int64_t>(b.widest_tile, 1);
    const bool stream_results = whole_rows && output.size_bytes() >= detail::streamed_output_bytes;
    with_method([&]<class M>(const M& method) {
      if constexpr (token_wise) {
        run(b.at.gathers.count * per_row,
            detail::gather_rows<Head, T, whole_rows>{head_, head_.linear(), hidden.data_handle(), hidden.stride(0),
                                                     b.at.gathers.in(device_block), requests,
                                                     b.at.column_table.in(device_block), memory, per_row,
                                                     static_cast<std::int64_t>(b.at.gathers.count), stream_results});
      } else {
        run(b.at.tiles.count * per_row,
            detail::reduce_tiles<M, Head, T, whole_rows>{
                method, head_, head_.linear(), hidden.data_handle(), hidden.stride(0), b.at.tiles.in(device_block),
                requests, memory, per_row, static_cast<std::int64_t>(b.at.tiles.count), stream_results});
        run(b.at.combines.count * per_row,
            detail::combine_partials<M, Head, whole_rows>{method, head_, head_.linear(), b.at.combines.in(device_block),
                                                          requests, memory, per_row});
      }
    });
    const std::int64_t per_output = whole_rows ? 1 : std::max<std::int64_t>(b.widest_linear, 1);
    run(b.at.linears.count * per_output,
        detail::apply_linear<Head, whole_rows>{head_, head_.linear(), b.at.linears.in(device_block), requests, memory,
                                               per_output});
    run(b.at.finishes.count, detail::finish_rows<Head>{head_, b.at.finishes.in(device_block), requests, output.data()});
  }

  /// After launching: chunked requests have pooled this step's tokens.
  void advance(const step_plan& plan, state_store<Space>& state) const {
    for (const detail::state_use& use : plan.stateful) state.advance(use.owner);
  }

 private:
  /// Calls `work` with the method as its concrete type, visiting a runtime choice on the host.
  template <class Work>
  void with_method(Work&& work) const {
    if constexpr (detail::is_runtime_method<Method>)
      method_.visit(work);
    else
      work(method_);
  }

  template <class TokenMethod>
  void plan_tokens(const TokenMethod& method, detail::plan_builder& builder, std::size_t index, const request& r,
                   const chunk& part, std::vector<std::int64_t>& chosen) const {
    method.check(index, r, hidden_size_);
    if (TokenMethod::reads_token_ids && std::cmp_less(r.prompt_token_ids.size(), r.prompt_len))
      detail::fail_request(index, r.id, "prompt_token_ids", "the method reads all ", r.prompt_len,
                           " ids of the prompt, got ", r.prompt_token_ids.size());
    const std::span<const std::int64_t> columns = method.columns(r);
    const std::int64_t width = columns.empty() ? hidden_size_ : static_cast<std::int64_t>(columns.size());
    const std::int64_t out_width = head_.output_width(index, r, width);
    const std::int64_t end = part.num_computed + part.num_scheduled;
    chosen.clear();
    method.select(r, part.num_computed, end, chosen);
    const std::int64_t rows_before = part.first_chunk() ? 0 : method.count(r, 0, part.num_computed);
    const std::int64_t rows_through = rows_before + static_cast<std::int64_t>(chosen.size());
    const std::int64_t rows_total = part.finished() ? rows_through : rows_through + method.count(r, end, r.prompt_len);
    builder.add_gathered(r, part, rows_before, chosen, rows_total, columns, out_width);
  }

  template <class Functor>
  void run(std::int64_t items, const Functor& work) {
    if (items > 0)
      thrust::for_each(space_->policy(), thrust::counting_iterator<std::int64_t>(0),
                       thrust::counting_iterator<std::int64_t>(items), work);
  }

  Space* space_;
  std::int64_t hidden_size_;
  Method method_;
  Head head_;
  buffer<float, Space> workspace_;
};

}  // namespace seqpool
