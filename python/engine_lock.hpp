// One call at a time on an engine: the lock a pooler's binding shares with the
// objects it hands out that call into the engine's space themselves.
#pragma once

#include <atomic>
#include <mutex>
#include <thread>

#include <nanobind/nanobind.h>

#include <seqpool/error.hpp>

namespace seqpool::python {

namespace nb = nanobind;

/// The engine, its state store, staging and the kept batch are not for two
/// threads at once: a pooler's calls, and a GraphUpload's mark_launched()
/// (which records on the engine's stream and moves the upload's phase, as
/// restage() does), hold this lock, shared so that a GraphUpload may outlive
/// its pooler. A thread waits for it with the GIL let go, so that a thread
/// holding it, whose call lets the GIL go while it waits for the device or
/// runs a step, never waits for the GIL while another waits for the lock
/// holding the GIL.
class engine_lock {
 public:
  /// The lock, held until it is destroyed.
  class held {
   public:
    explicit held(engine_lock& lock) : lock_(lock) {}
    held(const held&) = delete;
    held& operator=(const held&) = delete;
    ~held() {
      lock_.holder_.store(std::thread::id{});
      lock_.busy_.unlock();
    }

   private:
    engine_lock& lock_;
  };

  /// Waits for the engine, with the GIL let go meanwhile. A call holds the
  /// engine while it reads its arguments, which may run the caller's code;
  /// that code calling this pooler again on the same thread would wait for
  /// itself, and is refused instead (code that hands the call to another
  /// thread and waits for it would still wait for itself).
  [[nodiscard]] held hold() {
    if (holder_.load() == std::this_thread::get_id())
      detail::fail("pooler",
                   "called from code one of its own calls runs while it reads its arguments (an argument's "
                   "__index__, __len__, __iter__, __dlpack__, …): call it once that call has returned");
    {
      nb::gil_scoped_release unlocked;
      busy_.lock();
    }
    holder_.store(std::this_thread::get_id());
    return held(*this);
  }

 private:
  std::mutex busy_;
  std::atomic<std::thread::id> holder_;  ///< the thread whose call holds busy_, or none
};

}  // namespace seqpool::python
