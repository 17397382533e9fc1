// seqpool: everything a user needs, in one include.
#pragma once

#include <seqpool/batch.hpp>
#include <seqpool/config.hpp>
#include <seqpool/configurable.hpp>
#include <seqpool/dispatch.hpp>
#include <seqpool/error.hpp>
#include <seqpool/head/classify.hpp>
#include <seqpool/head/embed.hpp>
#include <seqpool/hidden.hpp>
#include <seqpool/method/builtin.hpp>
#include <seqpool/multi_pooler.hpp>
#include <seqpool/part.hpp>
#include <seqpool/plan.hpp>
#include <seqpool/pooler.hpp>
#include <seqpool/quantized.hpp>
#include <seqpool/request_id.hpp>
#include <seqpool/runtime_multi_pooler.hpp>
#include <seqpool/space/audit.hpp>
#include <seqpool/space/buffer.hpp>
#include <seqpool/space/device.hpp>
#include <seqpool/space/host.hpp>
#include <seqpool/sparse.hpp>
#include <seqpool/state.hpp>
