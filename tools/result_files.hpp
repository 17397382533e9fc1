// A step's result files, written all or none (SPEC section 9): each to a
// hidden name first, renamed once every one of the step's is written, and
// the renames undone where one fails.
#pragma once

#include <algorithm>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <seqpool/batch.hpp>
#include <seqpool/error.hpp>
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
    // Room for every file this call may write, made before any is: a file written is listed by a move that
    // cannot throw, and the list grows as a vector does (a step's parts each call this), not a file at a time.
    const std::size_t needed = written_.size() + static_cast<std::size_t>(std::ranges::count_if(
                                                     slices, [](const auto& slice) { return slice.has_value(); }));
    if (needed > written_.capacity()) written_.reserve(std::max(needed, 2 * written_.capacity()));
    for (std::size_t i = 0; i < requests.requests.size(); ++i) {
      const auto& slice = slices[i];
      if (!slice) continue;
      const seqpool::request& r = requests.requests[i];
      const std::string id = r.id.str();
      const std::string request = seqpool::detail::request_named(i, id);
      std::span<const Result> values = results.subspan(slice->offset, slice->rows * slice->cols);
      std::vector<std::int64_t> shape{slice->cols};
      if constexpr (seqpool::sparse_element<Result>) {
        const std::int32_t pairs = values.front().id;  // the list's count
        if (pairs < 0 || std::cmp_greater_equal(pairs, values.size()))
          throw input_error(where + ": " + request + ": internal error: its list counts " + std::to_string(pairs) +
                            " pairs in room for " + std::to_string(values.size() - 1));
        values = values.subspan(1, static_cast<std::size_t>(pairs));
        shape = {pairs};
      } else if (seqpool::is_token_task(pooled_for.value_or(r.task)) || !r.params.spans.empty()) {
        shape.insert(shape.begin(), slice->rows);
      }
      named file{request, folder / ("." + id + ".npy.partial"), folder / (id + ".npy"),
                 folder / ("." + id + ".npy.previous")};
      try {
        // A file it cannot write whole it leaves unmade, and a folder under the hidden name untouched: only a
        // file written is this run's to remove.
        write_npy(file.hidden, values, shape);
        written_.push_back(std::move(file));
        // A link there, to a folder too, is the rename's to replace.
        const std::filesystem::path& final_name = written_.back().final;
        if (std::filesystem::is_directory(std::filesystem::symlink_status(final_name)))
          throw input_error(final_name.string() + " is a folder");
      } catch (const std::exception& failure) {
        throw input_error(where + ": " + request + ": cannot write its result: " + failure.what());
      }
    }
  }

  /// Gives every file written its final name, all or none. What an earlier
  /// run left under a final name is kept under a second hidden name first (a
  /// hard link, or a copy where the file system has none), so that each final
  /// name is replaced by one rename and names a whole file throughout; where a
  /// rename fails, the names published are given back what they held (or
  /// removed), and the error, which begins with `where` ("step N"), names any
  /// that could not be.
  void publish(const std::string& where) {
    std::size_t published = 0;
    std::size_t at = 0;  // the file at hand, which an error names
    try {
      for (; at < written_.size(); ++at) {
        named& file = written_[at];
        std::filesystem::remove(file.previous);  // one a run that stopped midway left
        // A symbolic link is kept as one, dangling or not.
        if (std::filesystem::exists(std::filesystem::symlink_status(file.final))) {
          std::error_code no_link;
          std::filesystem::create_hard_link(file.final, file.previous, no_link);
          if (no_link) std::filesystem::copy_file(file.final, file.previous);
          file.kept = true;
        }
      }
      for (at = 0; published < written_.size(); at = ++published)
        std::filesystem::rename(written_[published].hidden, written_[published].final);
    } catch (const std::exception& failure) {
      std::string not_given_back;
      for (std::size_t k = 0; k < written_.size(); ++k) {
        const named& file = written_[k];
        std::error_code failed;
        if (k < published && file.kept) {
          std::filesystem::rename(file.previous, file.final, failed);
          if (failed) not_given_back += "; what " + file.final.string() + " held is left at " + file.previous.string();
        } else if (k < published) {
          std::filesystem::remove(file.final, failed);
          if (failed) not_given_back += "; " + file.final.string() + " could not be removed";
        } else if (file.kept) {
          std::filesystem::remove(file.previous, failed);
        }
      }
      throw input_error(where + ": " + written_[at].request + ": cannot publish its result: " + failure.what() +
                        not_given_back);
    }
    std::error_code ignored;
    for (const named& file : written_)
      if (file.kept) std::filesystem::remove(file.previous, ignored);
    written_.clear();
  }

 private:
  /// A result file's names: written to `hidden`, published as `final`, and
  /// `previous` for what an earlier run left under `final` (`kept`) while the
  /// step is published.
  struct named {
    std::string request;  ///< how an error names the request: `request 3 (id "r7")`
    std::filesystem::path hidden, final, previous;
    bool kept = false;
  };
  std::vector<named> written_;
};

}  // namespace seqpool::tool
