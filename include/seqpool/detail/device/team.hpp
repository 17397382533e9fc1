// The cooperative steps of the device kernels — lanes of a warp, warps of a
// block, barriers, warp reductions and arrival counters — on the GPU and on the
// CPU, which runs a block's threads in turn.
#pragma once

#include <cmath>
#include <cstdint>

#include <seqpool/config.hpp>

namespace seqpool::detail::device {

inline constexpr int warp_lanes = 32;

/// What each lane of a warp holds for itself: a register of its own on the GPU,
/// an entry per lane where the host runs the lanes in turn.
template <class T, bool PerLane>
struct lane_values {
  T values[warp_lanes];
  SEQPOOL_HOST_DEVICE T& operator[](int lane) { return values[lane]; }
};

template <class T>
struct lane_values<T, false> {
  T value;
  SEQPOOL_HOST_DEVICE T& operator[](int) { return value; }
};

/// What each thread of a block holds for itself across its barriers: a register
/// of its own on the GPU (Threads 1), an entry per thread where the host runs
/// the threads in turn.
template <class T, int Threads>
struct thread_values {
  T values[Threads];
  SEQPOOL_HOST_DEVICE T& operator()(int warp, int lane) { return values[warp * warp_lanes + lane]; }
};

template <class T>
struct thread_values<T, 1> {
  T value;
  SEQPOOL_HOST_DEVICE T& operator()(int, int) { return value; }
};

/// The order in which a warp's 32 values are summed: a butterfly, after which
/// every lane holds the same total (a + b and b + a are the same float). The GPU
/// runs it with shuffles, the host on an array; either way the order is fixed,
/// so results repeat bit for bit from run to run.
template <class Combine>
SEQPOOL_HOST_DEVICE float butterfly(float (&values)[warp_lanes], Combine combine) {
  for (int distance = warp_lanes / 2; distance > 0; distance /= 2) {
    float next[warp_lanes];
    for (int lane = 0; lane < warp_lanes; ++lane) next[lane] = combine(values[lane], values[lane ^ distance]);
    for (int lane = 0; lane < warp_lanes; ++lane) values[lane] = next[lane];
  }
  return values[0];
}

struct sum_of {
  SEQPOOL_HOST_DEVICE float operator()(float a, float b) const { return a + b; }
};
struct max_of {
  SEQPOOL_HOST_DEVICE float operator()(float a, float b) const { return fmaxf(a, b); }
};

/// A warp whose lanes the host runs in turn. Code between collective calls is
/// a loop over the lanes; what a lane keeps across a collective call lives in
/// `values<T>`.
struct host_warp {
  int index;  ///< the warp's place in its block

  template <class T>
  using values = lane_values<T, true>;

  template <class Work>
  SEQPOOL_HOST_DEVICE void lanes(Work&& work) const {
    for (int lane = 0; lane < warp_lanes; ++lane) work(lane);
  }

  /// The sum over the lanes of `value(lane)`, which every lane receives.
  template <class Value>
  SEQPOOL_HOST_DEVICE float sum(Value&& value) const {
    return reduce(value, sum_of{});
  }
  template <class Value>
  SEQPOOL_HOST_DEVICE float max(Value&& value) const {
    return reduce(value, max_of{});
  }

  /// Orders the lanes' memory accesses before those that follow (nothing to do in turn).
  SEQPOOL_HOST_DEVICE void sync() const {}

 private:
  template <class Value, class Combine>
  SEQPOOL_HOST_DEVICE float reduce(Value& value, Combine combine) const {
    float each[warp_lanes];
    for (int lane = 0; lane < warp_lanes; ++lane) each[lane] = value(lane);
    return butterfly(each, combine);
  }
};

/// A block whose warps, and their lanes, the host runs in turn: a barrier is
/// the end of a loop over them. Blocks run on several CPU threads at once, so
/// arrival counters are atomic.
template <int Warps>
struct host_block {
  using warp_type = host_warp;

  template <class T>
  using values = thread_values<T, Warps * warp_lanes>;

  template <class Work>
  SEQPOOL_HOST_DEVICE void warps(Work&& work) const {
    for (int index = 0; index < Warps; ++index) work(host_warp{index});
  }

  /// Runs `work(warp, lane)` for every thread of the block.
  template <class Work>
  SEQPOOL_HOST_DEVICE void threads(Work&& work) const {
    for (int warp = 0; warp < Warps; ++warp)
      for (int lane = 0; lane < warp_lanes; ++lane) work(warp, lane);
  }

  SEQPOOL_HOST_DEVICE void sync() const {}

  /// The sum over the block's threads of `value(warp, lane)`, which every
  /// thread receives: each warp's butterfly, then the warps' totals in order.
  template <class Value>
  SEQPOOL_HOST_DEVICE float sum(Value&& value) const {
    return reduce(value, sum_of{});
  }
  template <class Value>
  SEQPOOL_HOST_DEVICE float max(Value&& value) const {
    return reduce(value, max_of{});
  }

  /// Counts this block's arrival at `counter`, after every write it made; true
  /// for the last of `expected` blocks, which then sees every write the others
  /// made before they arrived, and which resets the counter for the next launch.
  SEQPOOL_HOST_DEVICE bool arrive_last(int* counter, int expected) const {
#if !defined(__CUDA_ARCH__)
    const bool last = __atomic_fetch_add(counter, 1, __ATOMIC_ACQ_REL) == expected - 1;
    if (last) __atomic_store_n(counter, 0, __ATOMIC_RELAXED);
    return last;
#else
    (void)counter;
    (void)expected;
    return false;
#endif
  }

 private:
  template <class Value, class Combine>
  SEQPOOL_HOST_DEVICE static float reduce(Value& value, Combine combine) {
    float total = 0.0f;
    for (int warp = 0; warp < Warps; ++warp) {
      float each[warp_lanes];
      for (int lane = 0; lane < warp_lanes; ++lane) each[lane] = value(warp, lane);
      const float warp_total = butterfly(each, combine);
      total = warp == 0 ? warp_total : combine(total, warp_total);
    }
    return total;
  }
};

#if defined(__CUDACC__)
/// A warp on the GPU: each lane runs the code once, for itself.
struct cuda_warp {
  int index;

  template <class T>
  using values = lane_values<T, false>;

  template <class Work>
  __device__ void lanes(Work&& work) const {
    work(static_cast<int>(threadIdx.x % warp_lanes));
  }

  template <class Value>
  __device__ float sum(Value&& value) const {
    return reduce(value(static_cast<int>(threadIdx.x % warp_lanes)), sum_of{});
  }
  template <class Value>
  __device__ float max(Value&& value) const {
    return reduce(value(static_cast<int>(threadIdx.x % warp_lanes)), max_of{});
  }

  __device__ void sync() const { __syncwarp(); }

 private:
  template <class Combine>
  __device__ static float reduce(float value, Combine combine) {
    for (int distance = warp_lanes / 2; distance > 0; distance /= 2)
      value = combine(value, __shfl_xor_sync(0xffffffffu, value, distance));
    return value;
  }
};

/// A block on the GPU.
template <int Warps>
struct cuda_block {
  using warp_type = cuda_warp;

  template <class T>
  using values = thread_values<T, 1>;

  template <class Work>
  __device__ void warps(Work&& work) const {
    work(cuda_warp{static_cast<int>(threadIdx.x / warp_lanes)});
  }

  template <class Work>
  __device__ void threads(Work&& work) const {
    work(static_cast<int>(threadIdx.x / warp_lanes), static_cast<int>(threadIdx.x % warp_lanes));
  }

  __device__ void sync() const { __syncthreads(); }

  template <class Value>
  __device__ float sum(Value&& value) const {
    return reduce(value, sum_of{});
  }
  template <class Value>
  __device__ float max(Value&& value) const {
    return reduce(value, max_of{});
  }

  /// The threadFenceReduction pattern: every thread fences its writes, one
  /// thread counts the block in, and the block learns through shared memory
  /// whether it came last.
  __device__ bool arrive_last(int* counter, int expected) const {
    __shared__ int last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
      last = atomicAdd(counter, 1) == expected - 1;
      if (last) {
        atomicExch(counter, 0);
        __threadfence();
      }
    }
    __syncthreads();
    return last != 0;
  }

 private:
  /// Each warp's butterfly, then the warps' totals in order, as on the host;
  /// the second barrier keeps the totals until every thread has read them.
  template <class Value, class Combine>
  __device__ static float reduce(Value& value, Combine combine) {
    __shared__ float totals[Warps];
    const int warp = static_cast<int>(threadIdx.x / warp_lanes);
    float mine = value(warp, static_cast<int>(threadIdx.x % warp_lanes));
    for (int distance = warp_lanes / 2; distance > 0; distance /= 2)
      mine = combine(mine, __shfl_xor_sync(0xffffffffu, mine, distance));
    if (threadIdx.x % warp_lanes == 0) totals[warp] = mine;
    __syncthreads();
    float total = totals[0];
    for (int other = 1; other < Warps; ++other) total = combine(total, totals[other]);
    __syncthreads();
    return total;
  }
};
#endif

/// Adds one to a count in a block's shared memory that its threads count into.
SEQPOOL_HOST_DEVICE inline void count_in(std::int32_t* count) {
#if defined(__CUDA_ARCH__)
  atomicAdd(count, 1);
#else
  ++*count;  // a block's threads run in turn
#endif
}

/// Reads a float that another block wrote before it arrived: past the SM's own
/// L1, which does not see other SMs' writes.
SEQPOOL_HOST_DEVICE inline float read_fresh(const float* address) {
#if defined(__CUDA_ARCH__)
  return __ldcg(address);
#else
  return *address;
#endif
}

}  // namespace seqpool::detail::device
