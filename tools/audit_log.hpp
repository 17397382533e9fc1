// seqpool-run --audit: what the space counted during each step's forward, one
// JSON object a line in DIR/audit.jsonl (SPEC section 9).
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include <seqpool/space/audit.hpp>

namespace seqpool::tool {

class audit_log {
 public:
  /// Writes nothing unless `wanted`.
  audit_log(bool wanted, const std::filesystem::path& out) {
    if (wanted) file_.open(out / "audit.jsonl", std::ios::trunc);
  }

  void record(std::size_t step, const seqpool::audit_counts& counts) {
    if (!file_.is_open()) return;
    file_ << nlohmann::ordered_json{{"step", step},
                                    {"uploads", counts.uploads},
                                    {"upload_bytes", counts.upload_bytes},
                                    {"downloads", counts.downloads},
                                    {"waits", counts.waits},
                                    {"allocations", counts.allocations}}
                 .dump()
          << std::endl;
  }

 private:
  std::ofstream file_;
};

}  // namespace seqpool::tool
