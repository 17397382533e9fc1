// Host algorithms: the passes of a step's entries, held while they go on
// branches and then run together.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/omp/execution_policy.h>

#include <seqpool/error.hpp>

namespace seqpool::detail::host {

/// The passes a host space is given between fork() and run(), a branch each
/// (a step's entries: a multi_pooler's parts, a dispatcher's poolers). run()
/// runs them in rounds, round r the r-th pass of every branch, as one parallel
/// loop over slots: slot s takes the s-th of as many even shares of every
/// pass's items, branch after branch. A multi_pooler's parts read the same
/// rows in the same order, each item an even share of its part's, so a slot's
/// items of every part read about the same rows, the later ones from the core's
/// caches: a step reads its hidden states from memory about once for all its
/// parts instead of once a part. A branch's passes keep their order, each
/// after the passes it reads; the branches' are apart (each entry writes its
/// own outputs, workspace and states). What a pass does is what the space
/// would have run at once, item for item.
///
/// A held pass is a copy of its work in blocks kept from step to step, which
/// reserve() makes room in for the passes an entry launches (a pooling or
/// gathering pass, a merge, a layer's, a list's: four), each up to 1 KiB: a
/// step holds its passes without allocating (host memory, not the space's,
/// which the audit counts). A step whose launch throws before the join runs
/// none of them (forget()).
class held_passes {
 public:
  held_passes() = default;
  held_passes(const held_passes&) = delete;
  held_passes& operator=(const held_passes&) = delete;
  ~held_passes() { forget(); }

  /// Outside a step: room for `count` branches' passes.
  void reserve(int count) {
    const auto branches = static_cast<std::size_t>(count);
    reserved_ = std::max(reserved_, count);
    firsts_.reserve(branches + 1);
    round_.reserve(branches);
    passes_.reserve(branches * passes_per_branch);
    std::size_t room = 0;
    for (const block& made : blocks_) room += made.size;
    if (room < branches * passes_per_branch * bytes_per_pass) add_block(branches * passes_per_branch * bytes_per_pass);
  }

  bool forked() const { return branches_ > 0; }

  /// Passes given from here on are held, on branch 0 until select() says another.
  void fork(int count) {
    if (forked()) fail("fork", "the host space's last branches were not joined");
    if (count < 1 || count > reserved_)
      fail("fork", count, " branches, but room for ", reserved_, " was reserved (reserve_branches)");
    branches_ = count;
    branch_ = 0;
  }

  void select(int branch) {
    if (branch < 0 || branch >= branches_) fail("select_branch", "no branch ", branch, " of ", branches_, " forked");
    if (branch < branch_)
      fail("select_branch", "branches are given their passes in order: ", branch, " after ", branch_);
    branch_ = branch;
  }

  /// Holds a copy of `work` to run over items [0, items) on the current branch.
  template <class Work>
  void hold(std::int64_t items, const Work& work) {
    static_assert(alignof(Work) <= block_alignment, "seqpool: a host pass's work is aligned as operator new aligns");
    if (passes_.size() == passes_.capacity())
      passes_.reserve(2 * passes_.size() + 1);  // before the copy: the push below cannot throw with it made
    void* copy = room_for(sizeof(Work), alignof(Work));
    ::new (copy) Work(work);
    passes_.push_back({branch_, items, copy, &run_items<Work>, &destroy<Work>});
  }

  /// Runs every held pass, round after round as the class says, and joins the
  /// branches (holding none, if a pass throws). fork() took no more branches
  /// than reserve() made room for, so the bookkeeping allocates nothing.
  void run() {
    try {
      run_rounds();
    } catch (...) {
      forget();
      throw;
    }
    forget();
  }

  /// Drops every held pass unrun and joins the branches.
  void forget() {
    for (const pass& held : passes_) held.destroy(held.work);
    passes_.clear();
    block_ = 0;
    used_ = 0;
    branches_ = 0;
    branch_ = 0;
  }

 private:
  struct pass {
    int branch;
    std::int64_t items;
    void* work;
    void (*run)(const void* work, std::int64_t first, std::int64_t last);
    void (*destroy)(void* work);
  };

  static constexpr std::size_t block_alignment = __STDCPP_DEFAULT_NEW_ALIGNMENT__;
  static constexpr std::size_t passes_per_branch = 4;
  static constexpr std::size_t bytes_per_pass = 1024;

  struct block {
    std::unique_ptr<std::byte[]> bytes;
    std::size_t size;
  };

  template <class Work>
  static void run_items(const void* work, std::int64_t first, std::int64_t last) {
    const Work& each = *static_cast<const Work*>(work);
    for (std::int64_t item = first; item < last; ++item) each(item);
  }

  template <class Work>
  static void destroy(void* work) {
    static_cast<Work*>(work)->~Work();
  }

  void run_rounds() {
    firsts_.clear();
    for (std::size_t k = 0; k < passes_.size(); ++k)
      if (k == 0 || passes_[k].branch != passes_[k - 1].branch) firsts_.push_back(k);
    firsts_.push_back(passes_.size());
    for (std::size_t round = 0;; ++round) {
      round_.clear();
      std::int64_t slots = 0;
      for (std::size_t b = 0; b + 1 < firsts_.size(); ++b) {
        const std::size_t k = firsts_[b] + round;
        if (k >= firsts_[b + 1]) continue;
        round_.push_back(k);
        slots = std::max(slots, passes_[k].items);
      }
      if (round_.empty()) return;
      if (slots == 0) continue;
      const pass* const passes = passes_.data();
      const std::size_t* const taken = round_.data();
      const std::size_t count = round_.size();
      // slot × items < slots² + slots: passes of up to 3·10⁹ items stay within 64 bits.
      thrust::for_each(thrust::omp::par, thrust::counting_iterator<std::int64_t>(0),
                       thrust::counting_iterator<std::int64_t>(slots), [=](std::int64_t slot) {
                         for (std::size_t t = 0; t < count; ++t) {
                           const pass& held = passes[taken[t]];
                           held.run(held.work, slot * held.items / slots, (slot + 1) * held.items / slots);
                         }
                       });
    }
  }

  void add_block(std::size_t bytes) {
    blocks_.reserve(blocks_.size() + 1);
    blocks_.push_back({std::unique_ptr<std::byte[]>(new std::byte[bytes]), bytes});
  }

  /// `size` bytes at `alignment` in the blocks: the current one's next, or the
  /// start of a later one, made where none is big enough.
  void* room_for(std::size_t size, std::size_t alignment) {
    for (;; ++block_, used_ = 0) {
      if (block_ == blocks_.size()) add_block(std::max(passes_per_branch * bytes_per_pass, size));
      const std::size_t at = (used_ + alignment - 1) / alignment * alignment;
      if (at + size <= blocks_[block_].size) {
        used_ = at + size;
        return blocks_[block_].bytes.get() + at;
      }
    }
  }

  std::vector<pass> passes_;
  std::vector<std::size_t> firsts_;  ///< run(): each branch's first pass, and the end
  std::vector<std::size_t> round_;   ///< run(): the passes of the round it runs
  std::vector<block> blocks_;
  std::size_t block_ = 0;  ///< the block holding the last copy
  std::size_t used_ = 0;   ///< its bytes taken
  int reserved_ = 0;       ///< the most branches reserve() made room for
  int branches_ = 0;
  int branch_ = 0;
};

}  // namespace seqpool::detail::host
