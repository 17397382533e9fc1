// A dispatch table whose methods are chosen at run time.
#pragma once

#include <seqpool/dispatch.hpp>
#include <seqpool/head/classify.hpp>
#include <seqpool/head/embed.hpp>
#include <seqpool/method/builtin.hpp>
#include <seqpool/pooler.hpp>
#include <seqpool/sparse.hpp>

namespace seqpool {

/// One pooler per task, each holding a method chosen by name: the table for
/// tools and servers that read their pooling configuration from a file. Four
/// entries serve every configuration, where a table per combination of methods
/// would multiply compile time; leave an entry empty for a task not served.
/// With sparse_entry results every entry lists weights (SPEC section 3): the
/// sequence tasks' rows by column, the token tasks' rows by token id (their
/// heads' last layers of one output).
template <class Space, class Result = float>
  requires result_element<Result> || sparse_element<Result>
using configurable_table =
    dispatch_table<task_entry<task::embed, pooler<method::any_sequence, head::embed, Space, Result>>,
                   task_entry<task::classify, pooler<method::any_sequence, head::classify, Space, Result>>,
                   task_entry<task::token_embed, pooler<method::any_token, head::embed, Space, Result>>,
                   task_entry<task::token_classify, pooler<method::any_token, head::classify, Space, Result>>>;

}  // namespace seqpool
