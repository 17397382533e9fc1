// The host-side layout of a step: derived fields, task groups, validation.
#include <cstdint>
#include <locale>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>

#include <doctest/doctest.h>

#include <seqpool/batch.hpp>

#include "support/step.hpp"

using seqpool::task;
using test::part;
using test::whole;

TEST_CASE("chunk fields follow SPEC section 2") {
  const seqpool::chunk first{.row_begin = 4, .num_scheduled = 3, .num_computed = 0, .prompt_len = 10};
  CHECK(first.first_row() == 4);
  CHECK(first.last_row() == 6);
  CHECK(first.first_chunk());
  CHECK_FALSE(first.finished());
  CHECK(first.chunked());

  const seqpool::chunk final{.row_begin = 0, .num_scheduled = 7, .num_computed = 3, .prompt_len = 10};
  CHECK_FALSE(final.first_chunk());
  CHECK(final.finished());
  CHECK(final.chunked());

  const seqpool::chunk entire{.row_begin = 2, .num_scheduled = 5, .num_computed = 0, .prompt_len = 5};
  CHECK(entire.first_chunk());
  CHECK(entire.finished());
  CHECK_FALSE(entire.chunked());
}

TEST_CASE("consecutive requests that share a task form one group, with rows rebased to it") {
  // docs/TESTS.md case 20: tasks [embed, embed, token_embed, embed] with rows 2, 1, 3, 2.
  const seqpool::batch step{{whole("a", task::embed, 2), whole("b", task::embed, 1), whole("c", task::token_embed, 3),
                             whole("d", task::embed, 2)}};
  const seqpool::step_layout layout = seqpool::lay_out(step);
  CHECK(layout.num_rows == 8);
  REQUIRE(layout.groups.size() == 3);
  CHECK(layout.groups[0].task == task::embed);
  CHECK(layout.groups[0].first_request == 0);
  CHECK(layout.groups[0].num_requests == 2);
  CHECK(layout.groups[0].row_begin == 0);
  CHECK(layout.groups[0].num_rows == 3);
  CHECK(layout.groups[1].task == task::token_embed);
  CHECK(layout.groups[1].row_begin == 3);
  CHECK(layout.groups[1].num_rows == 3);
  CHECK(layout.groups[2].task == task::embed);
  CHECK(layout.groups[2].first_request == 3);
  CHECK(layout.groups[2].row_begin == 6);
  CHECK(layout.groups[2].num_rows == 2);
  // Rows count from the start of each request's group.
  CHECK(layout.chunks[0].row_begin == 0);
  CHECK(layout.chunks[1].row_begin == 2);
  CHECK(layout.chunks[2].row_begin == 0);
  CHECK(layout.chunks[3].row_begin == 0);
}

TEST_CASE("an empty batch has no rows and no groups") {
  const seqpool::step_layout layout = seqpool::lay_out(seqpool::batch{});
  CHECK(layout.num_rows == 0);
  CHECK(layout.groups.empty());
  CHECK(layout.chunks.empty());
}

TEST_CASE("chunked requests carry their progress into the layout") {
  const seqpool::batch step{{part("a", task::embed, 10, 4, 3), whole("b", task::embed, 2)}};
  const seqpool::step_layout layout = seqpool::lay_out(step);
  CHECK(layout.chunks[0].num_computed == 4);
  CHECK(layout.chunks[0].prompt_len == 10);
  CHECK_FALSE(layout.chunks[0].finished());
  CHECK(layout.chunks[1].row_begin == 3);
}

namespace {

void check_rejected(const seqpool::batch& step, const std::string& message) {
  CHECK_THROWS_WITH_AS(seqpool::lay_out(step), message.c_str(), seqpool::error);
}

}  // namespace

TEST_CASE("bad metadata is rejected with the request index, its id and the field") {
  check_rejected({{whole("ok", task::embed, 2), whole("z", task::embed, 0)}},
                 "request 1 (id \"z\"): prompt_len: must be at least 1, got 0");
  check_rejected({{part("n", task::embed, 4, -1, 2)}},
                 "request 0 (id \"n\"): num_computed: must not be negative, got -1");
  check_rejected({{part("s", task::embed, 4, 0, 0)}}, "request 0 (id \"s\"): num_scheduled: must be at least 1, got 0");
  check_rejected({{part("o", task::embed, 5, 3, 4)}},
                 "request 0 (id \"o\"): num_computed + num_scheduled: 3 + 4 exceeds prompt_len 5");
  check_rejected({{whole("d", task::embed, 1), whole("e", task::classify, 1), whole("d", task::embed, 1)}},
                 "request 2 (id \"d\"): id: appears twice in one step (first as request 0)");
}

TEST_CASE("among thousands of requests, every repeated id is found and no distinct one is taken for another") {
  // Ids that share prefixes and lengths, so that the table's probes meet other ids often.
  seqpool::batch step;
  for (int k = 0; k < 5000; ++k) step.requests.push_back(whole("cmpl-" + std::to_string(k), task::embed, 1));
  CHECK(seqpool::lay_out(step).chunks.size() == 5000);
  for (const int repeated : {0, 1234, 4999}) {
    CAPTURE(repeated);
    seqpool::batch twice = step;
    twice.requests.push_back(whole("cmpl-" + std::to_string(repeated), task::embed, 1));
    check_rejected(twice, "request 5000 (id \"cmpl-" + std::to_string(repeated) +
                              "\"): id: appears twice in one step (first as request " + std::to_string(repeated) + ")");
  }
}

TEST_CASE("a message quotes an id as JSON may: a NUL, a quote, a backslash and a control character escaped") {
  // A NUL written as it is would end the message where it is read as a C string (Python's exception).
  using namespace std::string_literals;
  for (const auto& [id, written] :
       {std::pair{"a\0b"s, R"("a\u0000b")"s}, std::pair{"say \"hi\"\\"s, R"("say \"hi\"\\")"s},
        std::pair{"line\nnext\x7f"s, R"("line\u000anext\u007f")"s}, std::pair{"caf\xc3\xa9"s, "\"caf\xc3\xa9\""s}}) {
    CAPTURE(written);
    CHECK(seqpool::detail::quoted(id) == written);
    check_rejected({{whole(id, task::embed, 1), whole(id, task::embed, 1)}},
                   "request 1 (id " + written + "): id: appears twice in one step (first as request 0)");
  }
}

TEST_CASE("the id hash reads every byte of an id of any length, and a repeated id is found") {
  // It hashes whole 8-byte words, then the last 8 bytes (or, below 8, each byte): every length
  // around those steps, and a byte changed at each position, zero bytes included.
  for (std::size_t length = 0; length <= 25; ++length) {
    CAPTURE(length);
    const std::string id(length, 'x');
    seqpool::batch step{{whole(id, task::embed, 1)}};
    for (std::size_t at = 0; at < length; ++at)
      for (const char byte : {'y', '\0'}) {
        std::string other = id;
        other[at] = byte;
        CAPTURE(at);
        CHECK(seqpool::request_id(other).hash() != seqpool::request_id(id).hash());
        step.requests.push_back(whole(other, task::embed, 1));
      }
    CHECK(seqpool::request_id(id + std::string(1, '\0')).hash() != seqpool::request_id(id).hash());
    CHECK(seqpool::lay_out(step).chunks.size() == 1 + 2 * length);
    step.requests.push_back(whole(id, task::embed, 1));
    CHECK_THROWS_WITH_AS(seqpool::lay_out(step),
                         doctest::Contains("id: appears twice in one step (first as request 0)"), seqpool::error);
  }
}

TEST_CASE("an integer id is the id of its decimal text, held as the integer") {
  using seqpool::request_id;
  CHECK(request_id(7) == request_id("7"));
  CHECK(request_id(7u) == request_id(std::string("7")));
  CHECK(request_id(std::int64_t{0}) == request_id("0"));
  CHECK(request_id(std::uint64_t{18446744073709551615u}) == request_id("18446744073709551615"));
  CHECK(request_id(-3) == request_id("-3"));
  for (const request_id& number :
       {request_id(7), request_id("7"), request_id("0"), request_id("18446744073709551614")}) {
    CAPTURE(number);
    CHECK(number.is_number());
    CHECK(request_id(number.str()) == number);
  }
  CHECK(request_id("18446744073709551614").number() == 18446744073709551614u);
  // 2^64 − 1 is held as its text, given either way.
  CHECK_FALSE(request_id(~std::uint64_t{0}).is_number());
  CHECK(request_id(~std::uint64_t{0}).str() == "18446744073709551615");
  CHECK(request_id(7).str() == "7");
  // Not a decimal as C++ prints one: held as text, another id than any integer's.
  for (const char* text : {"", "07", "00", "+7", " 7", "7 ", "-3", "-0", "7a", "0x7", "18446744073709551616",
                           "99999999999999999999", "cmpl-7"}) {
    CAPTURE(text);
    const request_id id(text);
    CHECK_FALSE(id.is_number());
    CHECK(id.number() == 0);
    CHECK(id.str() == text);
  }
  CHECK(request_id("07") != request_id(7));
  CHECK(request_id("-0") != request_id(0));
  CHECK(request_id(-3).str() == "-3");
  // One id hashes alike however it was given.
  CHECK(request_id(12345).hash() == request_id("12345").hash());
  CHECK(request_id("12").hash() != request_id("012").hash());
  CHECK(std::unordered_set<request_id>{7, "7", "07", 8}.size() == 3);
  // Assigning text reuses the text's storage, and holds a decimal as its integer.
  request_id assigned("a text longer than a short string's storage");
  assigned.assign("42");
  CHECK(assigned.is_number());
  CHECK(assigned == request_id(42));
  assigned.assign("forty-two");
  CHECK(assigned == request_id("forty-two"));
}

TEST_CASE("a text id's hash, made with its text, is its text's however the id was made or changed") {
  using seqpool::request_id;
  const auto text_hash = [](const std::string& text) { return request_id(text).hash(); };
  CHECK(text_hash("a") != text_hash("b"));
  CHECK(request_id().hash() == text_hash(""));
  CHECK(request_id(std::string_view("cmpl-7")).hash() == text_hash("cmpl-7"));
  CHECK(request_id("cmpl-7").hash() == text_hash("cmpl-7"));
  CHECK(request_id(-3).hash() == text_hash("-3"));
  CHECK(request_id(~std::uint64_t{0}).hash() == text_hash("18446744073709551615"));
  request_id changed(42);
  for (const std::string text : {"forty-two", "42", "a text longer than a short string's storage", "", "07"}) {
    CAPTURE(text);
    changed.assign(text);
    CHECK(changed.hash() == text_hash(text));
    const request_id copied = changed;
    CHECK(copied.hash() == text_hash(text));
    request_id assigned("before");
    assigned = copied;
    CHECK(assigned.hash() == text_hash(text));
  }
  // A moved-from id is the empty text, its hash the empty text's; the id moved to keeps the text's.
  for (const request_id& given :
       {request_id("a text longer than a short string's storage"), request_id("7"), request_id("cmpl-7")}) {
    CAPTURE(given);
    request_id from = given;
    const request_id to(std::move(from));
    CHECK(to == given);
    CHECK(to.hash() == given.hash());
    CHECK(from == request_id());
    CHECK(from.hash() == text_hash(""));
    request_id assigned_from = given;
    request_id assigned_to("before");
    assigned_to = std::move(assigned_from);
    CHECK(assigned_to == given);
    CHECK(assigned_to.hash() == given.hash());
    CHECK(assigned_from == request_id());
    CHECK(assigned_from.hash() == text_hash(""));
  }
}

// Integers of up to 64 bits are ids; bool, characters and floating point are not.
static_assert(std::is_convertible_v<int, seqpool::request_id> &&
              std::is_convertible_v<long long, seqpool::request_id> &&
              std::is_convertible_v<std::uint64_t, seqpool::request_id> &&
              std::is_convertible_v<std::size_t, seqpool::request_id>);
static_assert(!std::is_constructible_v<seqpool::request_id, bool> &&
              !std::is_constructible_v<seqpool::request_id, char> &&
              !std::is_constructible_v<seqpool::request_id, std::int8_t> &&
              !std::is_constructible_v<seqpool::request_id, std::uint8_t> &&
              !std::is_constructible_v<seqpool::request_id, char32_t> &&
              !std::is_constructible_v<seqpool::request_id, double>);
// A batch's requests move, not copy, when its vector grows.
static_assert(std::is_nothrow_move_constructible_v<seqpool::request>);

TEST_CASE("an id is written as its text, an integer's digits whatever the stream's format and locale") {
  struct thousands : std::numpunct<char> {
    char do_thousands_sep() const override { return ','; }
    std::string do_grouping() const override { return "\3"; }
  };
  std::ostringstream out;
  out.imbue(std::locale(std::locale::classic(), new thousands));
  out << std::hex << std::showpos << 1234567 << ' ' << seqpool::request_id(1234567) << ' '
      << seqpool::request_id("cmpl-7") << ' ' << seqpool::request_id(-5);
  CHECK(out.str() == "12d,687 1234567 cmpl-7 -5");
  check_rejected({{whole(1234567, task::embed, 0)}},
                 "request 0 (id \"1234567\"): prompt_len: must be at least 1, got 0");
}

TEST_CASE("a step's integer ids are checked without text: a repeat is found, given either way") {
  check_rejected({{whole(7, task::embed, 1), whole("8", task::embed, 1), whole("7", task::embed, 1)}},
                 "request 2 (id \"7\"): id: appears twice in one step (first as request 0)");
  check_rejected({{whole("18446744073709551615", task::embed, 1), whole(~std::uint64_t{0}, task::embed, 1)}},
                 "request 1 (id \"18446744073709551615\"): id: appears twice in one step (first as request 0)");
  // Ids that differ in one bit, every bit, low and high, of thousands of integers: all distinct, then one repeated.
  seqpool::batch step;
  for (std::uint64_t k = 0; k < 4096; ++k) step.requests.push_back(whole(k, task::embed, 1));
  for (int bit = 12; bit < 64; ++bit) step.requests.push_back(whole(std::uint64_t{1} << bit, task::embed, 1));
  const std::uint64_t base = 0x5555'5555'5555'5555u;
  for (int bit = 0; bit < 64; ++bit)
    CHECK(seqpool::request_id(base ^ (std::uint64_t{1} << bit)).hash() != seqpool::request_id(base).hash());
  CHECK(seqpool::lay_out(step).chunks.size() == 4096 + 52);
  for (const std::uint64_t repeated : {std::uint64_t{0}, std::uint64_t{4095}, std::uint64_t{1} << 63}) {
    CAPTURE(repeated);
    seqpool::batch twice = step;
    twice.requests.push_back(whole(seqpool::request_id(std::to_string(repeated)), task::embed, 1));
    check_rejected(twice, "request 4148 (id \"" + std::to_string(repeated) +
                              "\"): id: appears twice in one step (first as request " +
                              std::to_string(repeated < 4096 ? repeated : 4096 + 51) + ")");
  }
}

TEST_CASE("integer ids that rise through a step are distinct; in any other order a repeat is still found") {
  // Rising ids skip the table; an equal or falling id, or a text one, sends the step through it.
  for (const seqpool::batch& step : {seqpool::batch{{whole(0, task::embed, 1), whole(1, task::embed, 1)}},
                                     seqpool::batch{{whole(3, task::embed, 1), whole("9", task::embed, 1)}},
                                     seqpool::batch{{whole(4, task::embed, 1), whole(2, task::embed, 1)}},
                                     seqpool::batch{{whole("x", task::embed, 1), whole(0, task::embed, 1)}},
                                     seqpool::batch{{whole(1, task::embed, 1), whole("1x", task::embed, 1)}}})
    CHECK(seqpool::lay_out(step).chunks.size() == 2);
  check_rejected({{whole(5, task::embed, 1), whole(5, task::embed, 1)}},
                 "request 1 (id \"5\"): id: appears twice in one step (first as request 0)");
  check_rejected(
      {{whole(1, task::embed, 1), whole(2, task::embed, 1), whole(3, task::embed, 1), whole(2, task::embed, 1)}},
      "request 3 (id \"2\"): id: appears twice in one step (first as request 1)");
  check_rejected(
      {{whole(1, task::embed, 1), whole(2, task::embed, 1), whole("x", task::embed, 1), whole("x", task::embed, 1)}},
      "request 3 (id \"x\"): id: appears twice in one step (first as request 2)");
  check_rejected({{whole(0, task::embed, 1), whole("0", task::embed, 1)}},
                 "request 1 (id \"0\"): id: appears twice in one step (first as request 0)");
  // Rising ids leave the table as it was; others fill it.
  seqpool::step_layout layout;
  std::vector<std::uint64_t> table;
  const seqpool::batch rising{{whole(3, task::embed, 1), whole(8, task::embed, 1), whole(9, task::embed, 1)}};
  seqpool::detail::lay_out_into(rising.requests, std::nullopt, layout, table);
  CHECK(table.empty());
  const seqpool::batch falling{{whole(9, task::embed, 1), whole(8, task::embed, 1)}};
  seqpool::detail::lay_out_into(falling.requests, std::nullopt, layout, table);
  CHECK_FALSE(table.empty());
}

TEST_CASE("a padded layout's padding is right or left") {
  seqpool::batch step{{whole("a", task::embed, 2)}};
  step.padded = seqpool::padded_rows{.sequence_length = 4, .padding = static_cast<seqpool::padding>(7)};
  CHECK_THROWS_WITH_AS(seqpool::lay_out(step), "padded.padding: must be padding::right or padding::left, got 7",
                       seqpool::error);
}

TEST_CASE("a span's rows lie within its chunk's, also where it has none this step") {
  // Case 25's chunks 4 + 1: the span [0, 3) ended in the first chunk.
  const seqpool::chunk finishing{.row_begin = 10, .num_scheduled = 1, .num_computed = 4, .prompt_len = 5};
  const seqpool::chunk passed = seqpool::chunk_of_span(finishing, {0, 3});
  CHECK(passed.num_scheduled == 0);
  CHECK(passed.finished());
  CHECK(passed.row_begin == 10);
  // A span the first chunk has not reached.
  const seqpool::chunk first{.row_begin = 10, .num_scheduled = 2, .num_computed = 0, .prompt_len = 9};
  const seqpool::chunk ahead = seqpool::chunk_of_span(first, {6, 9});
  CHECK(ahead.num_scheduled == 0);
  CHECK(ahead.first_chunk());
  CHECK(ahead.row_begin == 12);
  // A span the chunk cuts: its rows, and its positions from the span's start.
  const seqpool::chunk middle{.row_begin = 10, .num_scheduled = 4, .num_computed = 2, .prompt_len = 9};
  const seqpool::chunk cut = seqpool::chunk_of_span(middle, {3, 8});
  CHECK(cut.row_begin == 11);
  CHECK(cut.num_scheduled == 3);
  CHECK(cut.num_computed == 0);
  CHECK(cut.prompt_len == 5);
}

TEST_CASE("seqpool::error is an invalid_argument") {
  CHECK_THROWS_AS(seqpool::lay_out(seqpool::batch{{whole("x", task::embed, 0)}}), std::invalid_argument);
}

TEST_CASE("task names") {
  CHECK(seqpool::name(task::embed) == "embed");
  CHECK(seqpool::name(task::token_classify) == "token_classify");
  CHECK(seqpool::is_token_task(task::token_embed));
  CHECK_FALSE(seqpool::is_token_task(task::classify));
}
