#pragma once
// DeferredWork<Runtime>: host work that must wait for the device, done on a
// thread of mtsarray's instead of the caller's, so that no call blocks its
// caller on a GPU stream:
//  - after_event: hand memory back to its owner (a wrapped buffer's deleter,
//    an imported DLPack tensor) once the work recorded before an event is
//    done; a wait that fails is retried later, never skipped: the memory
//    may still be read by the device (reported on a line per doubling of
//    the failures in a row, not at every retry) -- but after a device
//    fault (a sticky error, runtime_error.hpp), which every wait would
//    meet again, the work is kept and never run, and the fault is
//    reported once;
//  - soon: calls that synchronise the device by themselves (allocating and
//    freeing page-locked or managed memory);
//  - after_capture: the free of a buffer whose stream is capturing a graph
//    (a free queued during a capture would become a node of the graph), run
//    once that stream has left capture mode.
//
// One thread per backend, started on first use and never joined: it only
// touches this object (which lives as long as the program) and the runtime.
// It runs in the Relaxed capture mode (capture_mode.hpp): its waits are for
// events recorded outside any capture, and in the default mode they would
// invalidate a Global-mode capture of another thread. Each wait runs with
// the event's device current.
// At exit the work still pending is dropped, not run: the owners' deleters
// may belong to an interpreter that has already shut down. The thread is
// never joined, so it may still be working when the process exits, after
// the runtime's own exit handler has shut the runtime down (registered at
// its initialisation, before this thread was started, it runs after the
// program's exit handlers and before this thread stops): work that meets a
// runtime shut down (RuntimeShutDown, runtime_error.hpp) is dropped without
// a word, and so is a release whose wait meets it -- no device work will
// ever read that memory again.

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "base/stream.hpp"
#include "gpu/capture_mode.hpp"
#include "gpu/device_guard.hpp"
#include "gpu/event_pool.hpp"
#include "gpu/runtime_error.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class DeferredWork {
public:
    using Lease = typename EventPool<Runtime>::Lease;

    DeferredWork() = default;
    DeferredWork(const DeferredWork&) = delete;
    DeferredWork& operator=(const DeferredWork&) = delete;

    /// Runs `work` once the event held by `event` (already recorded, an
    /// event of `device`) has completed. When this throws, `work` was not
    /// moved from.
    void after_event(int device, Lease&& event, std::function<void()>&& work) {
        std::lock_guard<std::mutex> lock(mutex_);
        start();
        events_.emplace_back(EventWork{device, std::move(event), std::move(work)});
        wake_.notify_one();
    }

    /// Runs `work` on the deferred-work thread, soon.
    void soon(std::function<void()>&& work) {
        std::lock_guard<std::mutex> lock(mutex_);
        start();
        soon_.push_back(std::move(work));
        wake_.notify_one();
    }

    /// Runs `work` once `is_capturing()` returns false (polled).
    void after_capture(std::function<bool()>&& is_capturing, std::function<void()>&& work) {
        std::lock_guard<std::mutex> lock(mutex_);
        start();
        captures_.emplace_back(CaptureWork{std::move(is_capturing), std::move(work), false});
        wake_.notify_one();
    }

    /// Whether no work is running and none queued could run now: only
    /// work waiting for a capture still under way is left, and this thread
    /// has polled each such work at least once itself (a snapshot: another
    /// thread may queue work right after). Tests wait for it, with the device
    /// idle, before counting what is still allocated: what this thread saw
    /// of a capture (from here, stream 2 names its own per-thread stream,
    /// not the capturing thread's) has been acted on by then.
    bool settled() const {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!events_.empty() || !soon_.empty() || running_ != 0) {
            return false;
        }
        for (const auto& item : captures_) {
            if (!item.polled) {
                return false;
            }
            try {
                if (!item.is_capturing()) {
                    return false;
                }
            } catch (...) {
                return false;  // run() does such work at once
            }
        }
        return true;
    }

private:
    struct EventWork {
        int device;
        Lease event;
        std::function<void()> work;
    };
    struct CaptureWork {
        std::function<bool()> is_capturing;
        std::function<void()> work;
        bool polled = false;  // by this thread, at least once
    };

    // with mutex_ held
    void start() {
        if (!started_) {
            std::thread(&DeferredWork::run, this).detach();
            started_ = true;
        }
    }

    static void run_reporting(std::function<void()>& work) noexcept {
        try {
            work();
        } catch (const RuntimeShutDown&) {
            // the process is exiting: nothing left to do, nobody to tell
        } catch (const DeviceFault&) {
            DeviceFaults<typename Runtime::Errors>::report_once();
        } catch (const std::exception& error) {
            std::fprintf(stderr, "mtsarray: deferred work failed: %s\n", error.what());
        } catch (...) {
            std::fprintf(stderr, "mtsarray: deferred work failed\n");
        }
    }

    /// A wait that failed with an error that is not a fault: retried every
    /// 10 ms for as long as it fails, and reported on a bounded number of
    /// lines whatever the error -- the first failure of a run of failures,
    /// then the 2nd, 4th, 8th, ... (a line per doubling: about 20 in a day
    /// of retries). Only the deferred-work thread calls it.
    void report_failed_wait(const char* what) noexcept {
        failed_waits_++;
        if ((failed_waits_ & (failed_waits_ - 1)) != 0) {
            return;  // not a power of two
        }
        if (failed_waits_ == 1) {
            std::fprintf(stderr, "mtsarray: waiting for a deferred release (will retry): %s\n", what);
        } else {
            std::fprintf(stderr,
                         "mtsarray: waiting for a deferred release (will retry; %llu failed waits in a row, the "
                         "next line at %llu): %s\n",
                         static_cast<unsigned long long>(failed_waits_),
                         static_cast<unsigned long long>(failed_waits_ * 2), what);
        }
    }

    void run() noexcept {
        RelaxedCaptureMode<Runtime> relaxed;
        std::unique_lock<std::mutex> lock(mutex_);
        while (true) {
            wake_.wait(lock, [&] { return !events_.empty() || !soon_.empty() || !captures_.empty(); });
            if (!soon_.empty()) {
                auto work = std::move(soon_.front());
                soon_.pop_front();
                running_++;
                lock.unlock();
                run_reporting(work);
                lock.lock();
                running_--;
                continue;
            }
            if (!events_.empty()) {
                auto item = std::move(events_.front());
                events_.pop_front();
                running_++;
                lock.unlock();
                // blocks this thread only, never a caller of mtsarray
                bool done = false;
                bool abandoned = false;
                try {
                    DeviceFaults<typename Runtime::Errors>::check();
                    DeviceGuard<Runtime> guard(item.device);
                    Runtime::synchronize_event(item.event.get());
                    done = true;
                } catch (const RuntimeShutDown&) {
                    abandoned = true;  // dropped: no device work runs any more
                } catch (const DeviceFault&) {
                    // every wait would meet it again: no retry loop burying it
                    DeviceFaults<typename Runtime::Errors>::report_once();
                    abandoned = true;
                } catch (const std::exception& error) {
                    report_failed_wait(error.what());
                }
                if (done) {
                    failed_waits_ = 0;
                    run_reporting(item.work);
                    lock.lock();
                } else if (abandoned) {
                    // kept, never run nor destroyed: what it holds may
                    // call an owner's deleter when destroyed
                    lock.lock();
                    dropped_.push_back(std::move(item));
                } else {
                    // the device may still read the memory: keep it, retry later
                    std::this_thread::sleep_for(std::chrono::milliseconds(10));
                    lock.lock();
                    events_.push_back(std::move(item));
                }
                running_--;
                continue;
            }
            // only captures left: poll them, then sleep a little
            std::deque<CaptureWork> waiting = std::move(captures_);
            captures_.clear();
            running_++;
            lock.unlock();
            std::deque<CaptureWork> still_capturing;
            for (auto& item : waiting) {
                bool capturing = false;
                try {
                    capturing = item.is_capturing();
                } catch (...) {
                    capturing = false;  // the stream is gone or broken: do the work now
                }
                if (capturing) {
                    item.polled = true;
                    still_capturing.push_back(std::move(item));
                } else {
                    run_reporting(item.work);
                }
            }
            lock.lock();
            for (auto& item : still_capturing) {
                captures_.push_back(std::move(item));
            }
            running_--;
            if (!still_capturing.empty()) {
                lock.unlock();
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
                lock.lock();
            }
        }
    }

    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool started_ = false;
    unsigned running_ = 0;  // work taken from the queues and not finished
    std::deque<EventWork> events_;
    std::deque<std::function<void()>> soon_;
    std::deque<CaptureWork> captures_;
    std::deque<EventWork> dropped_;  // releases the runtime's shut-down left undone
    unsigned long long failed_waits_ = 0;  // in a row, on the deferred-work thread only
};

}  // namespace gpu
}  // namespace mtsarray::detail
