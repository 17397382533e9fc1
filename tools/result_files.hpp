// A step's result files, written all or none (SPEC section 9): each to a
// hidden name first, renamed once every one of the step's is written, and
// the renames undone where one fails.
#pragma once

#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/result_slice.hpp>
#include <seqpool/sparse.hpp>

#include "npy.hpp"

namespace seqpool::tool {

class result_files {
 public:
  result_files() = default;
  result_files(const result_files&) = delete;
  result_files& operator=(const result_files&) = delete;
  /// Files written and not published are removed.
  ~result_files() {
    std::error_code ignored;
    for (const named& file : written_) std::filesystem::remove(file.hidden, ignored);
  }

  /// Writes, under hidden names in `folder`, the result of every request that
  /// finished (`slices`, the plan's for these `results`) as <id>.npy, pooled
  /// for the task `pooled_for` (a part's) or else the request's own. A sparse
  /// result is written as the pairs its list holds, without its count and the
  /// unused entries after them.
  template <class Result>
  void write(const std::string& where, const seqpool::batch& requests,
             const std::vector<std::optional<seqpool::result_slice>>& slices, std::span<const Result> results,
             const std::filesystem::path& folder, std::optional<seqpool::task> pooled_for = std::nullopt) {
    for (std::size_t i = 0; i < requests.requests.size(); ++i) {
      const auto& slice = slices[i];
      if (!slice) continue;
      const seqpool::request& r = requests.requests[i];
      const std::string id = r.id.str();
      std::span<const Result> values = results.subspan(slice->offset, slice->rows * slice->cols);
      std::vector<std::int64_t> shape{slice->cols};
      if constexpr (seqpool::sparse_element<Result>) {
        const std::int32_t pairs = values.front().id;  // the list's count
        if (pairs < 0 || std::cmp_greater_equal(pairs, values.size()))
          throw input_error(where + ": request " + std::to_string(i) + " (id \"" + id +
                            "\"): internal error: its list counts " + std::to_string(pairs) + " pairs in room for " +
                            std::to_string(values.size() - 1));
        values = values.subspan(1, static_cast<std::size_t>(pairs));
        shape = {pairs};
      } else if (seqpool::is_token_task(pooled_for.value_or(r.task)) || !r.params.spans.empty()) {
        shape.insert(shape.begin(), slice->rows);
      }
      written_.push_back(
          {folder / ("." + id + ".npy.partial"), folder / (id + ".npy"), folder / ("." + id + ".npy.previous")});
      const named& file = written_.back();
      try {
        write_npy(file.hidden, values, shape);
        if (std::filesystem::is_directory(file.final)) throw input_error(file.final.string() + " is a folder");
      } catch (const std::exception& failure) {
        throw input_error(where + ": request " + std::to_string(i) + " (id \"" + id +
                          "\"): cannot write its result: " + failure.what());
      }
    }
  }

  /// Gives every file written its final name, all or none: a file an earlier
  /// run left under a final name is set aside first, and where a rename
  /// fails, the names published are removed and what was set aside is given
  /// its name back before the error is thrown.
  void publish() {
    std::size_t published = 0;
    try {
      for (named& file : written_)
        if (std::filesystem::exists(file.final)) {
          std::filesystem::rename(file.final, file.previous);
          file.set_aside = true;
        }
      for (; published < written_.size(); ++published)
        std::filesystem::rename(written_[published].hidden, written_[published].final);
    } catch (...) {
      std::error_code ignored;
      for (std::size_t k = 0; k < published; ++k) std::filesystem::remove(written_[k].final, ignored);
      for (const named& file : written_)
        if (file.set_aside) std::filesystem::rename(file.previous, file.final, ignored);
      throw;
    }
    std::error_code ignored;
    for (const named& file : written_)
      if (file.set_aside) std::filesystem::remove(file.previous, ignored);
    written_.clear();
  }

 private:
  /// A result file's names: written to `hidden`, published as `final`, and
  /// `previous` for what an earlier run left under `final` (`set_aside`)
  /// while the step is published.
  struct named {
    std::filesystem::path hidden, final, previous;
    bool set_aside = false;
  };
  std::vector<named> written_;
};

}  // namespace seqpool::tool
