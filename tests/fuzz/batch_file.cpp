// Fuzzes seqpool-run's batch-file reader: any bytes must give a batch or an
// input_error, never a crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>

#include <seqpool/error.hpp>

#include "../../tools/batch_file.hpp"
#include "files.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const seqpool::tool::batch_file batch = seqpool::tool::read_batch_file(fuzz::input_file("batch.json", data, size));
    for (std::size_t index = 0; index < batch.steps.size(); ++index) (void)seqpool::tool::read_step(batch, index);
  } catch (const seqpool::tool::input_error&) {
  } catch (const seqpool::error&) {
  }
  return 0;
}
