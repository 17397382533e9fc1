// Whether the host's CPU runs the loops compiled for its wider vectors.
#pragma once

#include <cstdlib>
#include <string_view>

/// x86-64 CPUs may have AVX2, which the build's baseline does not assume: loops
/// are compiled for it as well there, and chosen at run time. Not for FMA: a
/// multiply-add is fused where the compiler optimises more (g++ -O2 and up),
/// so that the same loop would give other bits in builds of other levels (a
/// test program's and a tool's); AVX2's adds alone run as fast here. (A build
/// for a CPU with FMA, -march=native, fuses the baseline's loops as well.)
#if defined(__x86_64__) && defined(__GNUC__)
#define SEQPOOL_WIDE_VECTORS 1
#define SEQPOOL_WIDE_TARGET [[gnu::target("avx2")]]
#else
#define SEQPOOL_WIDE_VECTORS 0
#endif

namespace seqpool::detail::host {

/// Whether this CPU has AVX2 (asked on x86-64 only).
inline bool cpu_has_wide_vectors() {
#if SEQPOOL_WIDE_VECTORS
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

/// Whether this process runs the loops compiled for AVX2, decided once:
/// where the CPU has them, unless the environment says SEQPOOL_HOST_VECTORS=baseline
/// (results that repeat bit for bit on CPUs with and without them). The host's
/// compute-bound loops (the products of dense layers of several outputs) are
/// compiled for them as well as for the build's baseline (SEQPOOL_WIDE_TARGET)
/// and run in their eight lanes where this says so, as BLAS libraries choose
/// their kernels: every such loop of a process in the same lanes, so that
/// results repeat within it. host_space asks when it is made, so that the
/// environment is read before any pass runs.
inline bool has_wide_vectors() {
  static const bool wide = [] {
    const char* const chosen = std::getenv("SEQPOOL_HOST_VECTORS");
    if (chosen != nullptr && std::string_view(chosen) == "baseline") return false;
    return cpu_has_wide_vectors();
  }();
  return wide;
}

}  // namespace seqpool::detail::host
