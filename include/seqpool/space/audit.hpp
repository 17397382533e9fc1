// Counters of everything a memory space does that the sync contract limits.
//
// Spaces count every upload (and the bytes it moves), download, host wait and
// allocation they perform, and every launch of device work;
// an audit_scope reads the counts of one forward, which is how tests on a machine
// without a GPU assert the contract for the very code path the GPU runs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace seqpool {

struct audit_counts {
  std::int64_t uploads = 0;       ///< host-to-device copies
  std::int64_t upload_bytes = 0;  ///< the bytes they moved: what a step's image costs to send
  std::int64_t downloads = 0;     ///< device-to-host copies
  std::int64_t waits = 0;        ///< host waits on a stream, event or the device
  std::int64_t allocations = 0;  ///< calls that allocate or free space memory
  std::int64_t launches = 0;     ///< kernels (device spaces) or parallel passes (host_space) queued; a captured
                                 ///< step's upload, a kernel, counts as its upload

  friend bool operator==(const audit_counts&, const audit_counts&) = default;

  friend audit_counts operator-(const audit_counts& later, const audit_counts& earlier) {
    return {later.uploads - earlier.uploads,         later.upload_bytes - earlier.upload_bytes,
            later.downloads - earlier.downloads,     later.waits - earlier.waits,
            later.allocations - earlier.allocations, later.launches - earlier.launches};
  }
};

/// SPEC section 6: no download, no wait, no allocation, at most one upload (launches are not limited).
constexpr bool keeps_sync_contract(const audit_counts& step) {
  return step.uploads <= 1 && step.downloads == 0 && step.waits == 0 && step.allocations == 0;
}

/// Each count a relaxed atomic: a space's memory may be freed on another
/// thread than the one its steps run on (Python frees an output on whichever
/// thread lets it go), and every free is counted, as cheaply as a plain count.
class audit {
 public:
  void count_upload(std::size_t bytes) {
    add(uploads_, 1);
    add(upload_bytes_, static_cast<std::int64_t>(bytes));
  }
  void count_download() { add(downloads_, 1); }
  void count_wait() { add(waits_, 1); }
  void count_allocation() { add(allocations_, 1); }
  void count_launch() { add(launches_, 1); }

  audit_counts counts() const {
    constexpr auto relaxed = std::memory_order_relaxed;
    return {uploads_.load(relaxed), upload_bytes_.load(relaxed), downloads_.load(relaxed),
            waits_.load(relaxed),   allocations_.load(relaxed),  launches_.load(relaxed)};
  }

 private:
  static void add(std::atomic<std::int64_t>& count, std::int64_t more) {
    count.fetch_add(more, std::memory_order_relaxed);
  }

  std::atomic<std::int64_t> uploads_{0}, upload_bytes_{0}, downloads_{0}, waits_{0}, allocations_{0}, launches_{0};
};

/// What a space counted between this object's construction and a call to counts().
class audit_scope {
 public:
  explicit audit_scope(const audit& watched) : watched_(&watched), start_(watched.counts()) {}

  audit_counts counts() const { return watched_->counts() - start_; }

 private:
  const audit* watched_;
  audit_counts start_;
};

}  // namespace seqpool
