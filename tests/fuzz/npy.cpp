// Fuzzes seqpool-run's .npy reader: any bytes must give an array whose data the
// file backs, or an input_error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "../../tools/npy.hpp"
#include "files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const seqpool::tool::npy_array array =
        seqpool::tool::read_npy(fuzz::input_file("array.npy", data, size), seqpool::tool::hidden_dtypes);
    const std::size_t item = array.descr == "<f4" ? 4 : 2;
    if (static_cast<std::size_t>(array.count()) * item != array.data.size()) std::abort();
  } catch (const seqpool::tool::input_error&) {
  }
  return 0;
}
