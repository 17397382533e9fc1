// seqpool-run: replays a recorded batch through seqpool, step by step, and
// writes each finished request's result (SPEC section 9). The way to reproduce
// a batch outside an engine, and the interface black-box tests drive.
#include <csignal>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include <seqpool/method/builtin.hpp>

#include "batch_file.hpp"
#include "new_file.hpp"
#include "replay_batch.hpp"

namespace {

namespace tool = seqpool::tool;
using tool::options;

/// Replays the batch in Space: through its parts, or with the results its result_dtype names.
template <class Space>
void replay_in(const tool::batch_file& batch, const options& chosen) {
  if (!batch.parts.empty()) return tool::replay_parts<Space>(batch, chosen);
  tool::with_result_type(batch.results.result_dtype,
                         [&]<class Result>() { tool::replay_batch<Space, Result>(batch, chosen); });
}

/// Errors are one line on standard error that a terminal prints as it is:
/// every line break a terminal or a reader of UTF-8 honours (LF, VT, FF, CR,
/// NEL, LS, PS) becomes a space, and every other control character (C0, DEL,
/// C1), which a path may hold and a terminal would act on, is written as
/// section 8 quotes one, `\u00XX`.
int fail(std::string message) {
  std::string line;
  line.reserve(message.size());
  for (std::size_t i = 0; i < message.size(); ++i) {
    const auto byte = static_cast<unsigned char>(message[i]);
    const auto next = i + 1 < message.size() ? static_cast<unsigned char>(message[i + 1]) : 0;
    if (byte == '\n' || byte == '\v' || byte == '\f' || byte == '\r') {
      line += ' ';
    } else if (byte < 0x20 || byte == 0x7f) {
      seqpool::detail::append_escaped(line, byte);
    } else if (byte == 0xc2 && next == 0x85) {
      line += ' ';  // U+0085
      i += 1;
    } else if (byte == 0xc2 && next >= 0x80 && next <= 0x9f) {
      seqpool::detail::append_escaped(line, next);  // U+0080 to U+009F
      i += 1;
    } else if (byte == 0xe2 && next == 0x80 && i + 2 < message.size() &&
               (static_cast<unsigned char>(message[i + 2]) == 0xa8 ||
                static_cast<unsigned char>(message[i + 2]) == 0xa9)) {
      line += ' ';  // U+2028, U+2029
      i += 2;
    } else {
      line += message[i];
    }
  }
  std::cerr << "seqpool: error: " << line << '\n';
  return 2;
}

/// `kind: name name …`, one line.
template <class Names>
void print_names(std::string_view kind, const Names& names) {
  std::cout << kind << ':';
  for (const std::string_view name : names) std::cout << ' ' << name;
  std::cout << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  // A write past the file size limit fails (EFBIG) instead of ending the
  // process, so that the step's results are taken back, all or none, and the
  // error line names the file.
  std::signal(SIGXFSZ, SIG_IGN);
  options chosen;
  CLI::App app("Replays a recorded batch through seqpool and writes each finished request's result to DIR/<id>.npy.",
               "seqpool-run");
  app.add_option("batch", chosen.batch, "BATCH.json: the recorded batch (docs/SPEC.md section 9)")->required();
  app.add_option("--out", chosen.out, "DIR: where results (and audit.jsonl) go")->required();
  app.add_option("--space", chosen.space, "host or device (default host)")->check(CLI::IsMember({"host", "device"}));
  app.add_flag("--audit", chosen.audit, "write DIR/audit.jsonl: what the space counted during each step's forward");
  app.add_flag_callback(
      "--methods",
      [] {
        print_names("sequence", seqpool::method::any_sequence::names);
        std::cout << "sequence concat: " << seqpool::method::any_sequence::self_named_form() << '\n';
        print_names("token", seqpool::method::any_token::names);
        throw CLI::Success();
      },
      "list the methods `poolers` may name, by kind, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& done) {  // --methods, or --help
    return app.exit(done);
  } catch (const CLI::ParseError& misuse) {
    return fail(misuse.what());
  }

  try {
    const tool::batch_file batch = tool::read_batch_file(chosen.batch);
    tool::make_folder(chosen.out, "--out");
    if (chosen.space == "host")
      replay_in<seqpool::host_space>(batch, chosen);
    else
      replay_in<tool::device_space_type>(batch, chosen);
  } catch (const std::exception& failure) {
    return fail(failure.what());
  }
  return 0;
}
