// The error seqpool-run reports for its input, as "seqpool: error: ..." with status 2.
#pragma once

#include <stdexcept>

namespace seqpool::tool {

/// A problem with the tool's input; main() prints it after "seqpool: error: ".
class input_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace seqpool::tool
