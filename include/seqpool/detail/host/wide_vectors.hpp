// Whether the host's CPU runs the loops compiled for its wider vectors.
#pragma once

#include <cstdlib>
#include <string_view>

namespace seqpool::detail::host {

/// Whether this process runs the loops compiled for AVX2 and FMA, decided once:
/// where the CPU has them, unless the environment says SEQPOOL_HOST_VECTORS=baseline
/// (results that repeat bit for bit on CPUs with and without them). The host's
/// compute-bound loops (the products of dense layers of several outputs) are
/// compiled for them as well as for the build's baseline, with
/// `[[gnu::target("avx2,fma")]]`, and run in their eight lanes where this says
/// so, as BLAS libraries choose their kernels: every such loop of a process in
/// the same lanes, so that results repeat within it.
inline bool has_wide_vectors() {
  static const bool wide = [] {
    const char* const chosen = std::getenv("SEQPOOL_HOST_VECTORS");
    if (chosen != nullptr && std::string_view(chosen) == "baseline") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return wide;
}

}  // namespace seqpool::detail::host
