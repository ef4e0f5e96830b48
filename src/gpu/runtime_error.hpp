#pragma once
// Checking GPU runtime calls, written once for CUDA and HIP (after RMM's
// error macros): a failed call throws mtsarray::Error, or OutOfMemory for an
// allocation failure, naming file:line, the call and the runtime's own error
// name and string; the no-throw form reports on stderr, for destructors and
// deleters. No runtime call is made here: `Errors` is the runtime's error
// vocabulary (src/cuda/cuda_error.hpp, src/hip/hip_error.hpp):
//
//   using Status = cudaError_t;
//   static constexpr const char* display_name;  // "CUDA", "HIP"
//   static constexpr Status success, out_of_memory;
//   static const char* name(Status) noexcept;
//   static const char* description(Status) noexcept;
//   static Status last_error() noexcept;        // and reset it
//   static bool is_silent(Status) noexcept;     // the runtime has shut down
//   static bool is_sticky(Status) noexcept;     // a device fault: every later
//                                               // call fails with it

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "base/error.hpp"

namespace mtsarray::detail {
namespace gpu {

/// "cudaErrorInvalidValue: invalid argument". ROCm 5 describes an error by
/// its name, which is then said once.
template <class Errors> std::string error_text(typename Errors::Status status) {
    const std::string name = Errors::name(status);
    const std::string description = Errors::description(status);
    return description == name ? name : name + ": " + description;
}

/// A call failed because the runtime has shut down (Errors::is_silent: the
/// process is exiting and the runtime's own exit handler ran first). Work
/// that meets it has nothing left to do: the driver reclaims every
/// allocation with the process, and no device work runs any more.
class RuntimeShutDown : public Error {
public:
    using Error::Error;
};

/// The first sticky fault met in this process, per runtime: from then on
/// every call of the backend fails fast with it (check), without a runtime
/// call, and whatever meets it again says nothing more -- one clear error
/// naming the fault, not one per free or retry burying it.
template <class Errors> class DeviceFaults {
public:
    /// Records `message` if it is the first fault; returns whether it was.
    static bool record(const std::string& message) noexcept {
        std::lock_guard<std::mutex> lock(mutex());
        if (met()) {
            return false;
        }
        try {
            first() = message;
        } catch (...) {
            // no room for the words: the fault is still recorded
        }
        flag().store(true, std::memory_order_release);
        return true;
    }

    static bool met() noexcept { return flag().load(std::memory_order_acquire); }

    /// Throws DeviceFault naming the first fault, once one was met.
    static void check() {
        if (met()) {
            std::lock_guard<std::mutex> lock(mutex());
            throw DeviceFault(std::string("the ") + Errors::display_name +
                              " device had a fault earlier in this process, and every call fails with it since (" +
                              first() + "): restart the process to use the GPU again");
        }
    }

    /// Reports the fault on stderr, the first time anyone asks (for the
    /// threads that can not throw to a caller).
    static void report_once() noexcept {
        static std::atomic<bool> reported{false};
        if (met() && !reported.exchange(true)) {
            std::lock_guard<std::mutex> lock(mutex());
            std::fprintf(stderr,
                         "mtsarray: %s; mtsarray stops handing memory back to its owners, which the device may "
                         "never finish using: restart the process to use the GPU again\n",
                         first().c_str());
        }
    }

    /// Forgets the fault, as a new process would: for the simulated
    /// runtime's tests only.
    static void forget() noexcept {
        std::lock_guard<std::mutex> lock(mutex());
        flag().store(false, std::memory_order_release);
    }

private:
    static std::mutex& mutex() {
        static std::mutex instance;
        return instance;
    }
    static std::string& first() {
        static std::string message;
        return message;
    }
    static std::atomic<bool>& flag() {
        static std::atomic<bool> instance{false};
        return instance;
    }
};

/// Throws the exception for a failed `what` (a call, or a description).
template <class Errors>
[[noreturn]] void throw_error(typename Errors::Status status, const char* what, const char* file,
                              int line) {
    // Reset the runtime's last-error state so that a later, unrelated check
    // does not report this failure again (sticky errors stay regardless).
    (void)Errors::last_error();
    const std::string message = std::string(Errors::display_name) + " error at " + file + ":" +
                                std::to_string(line) + ": " + what + " failed with " +
                                error_text<Errors>(status);
    if (status == Errors::out_of_memory) {
        throw OutOfMemory(message);
    }
    if (Errors::is_silent(status)) {
        throw RuntimeShutDown(message);
    }
    if (Errors::is_sticky(status)) {
        DeviceFaults<Errors>::record(message);
        throw DeviceFault(message + ": the device had a fault, which every later call fails with; restart the "
                                    "process to use the GPU again");
    }
    throw Error(message);
}

template <class Errors>
void check(typename Errors::Status status, const char* what, const char* file, int line) {
    if (status != Errors::success) {
        throw_error<Errors>(status, what, file, line);
    }
}

template <class Errors>
bool check_nothrow(typename Errors::Status status, const char* what, const char* file,
                   int line) noexcept {
    if (status == Errors::success) {
        return true;
    }
    (void)Errors::last_error();
    if (Errors::is_sticky(status)) {
        // said once, not at every free that meets it again
        const std::string what_failed = std::string(Errors::display_name) + " error at " + file + ":" +
                                        std::to_string(line) + ": " + what + " failed with " +
                                        error_text<Errors>(status);
        DeviceFaults<Errors>::record(what_failed);
        DeviceFaults<Errors>::report_once();
        return false;
    }
    if (!Errors::is_silent(status)) {
        const char* name = Errors::name(status);
        const char* description = Errors::description(status);
        const bool same = std::strcmp(name, description) == 0;
        std::fprintf(stderr, "mtsarray: %s error at %s:%d: %s failed with %s%s%s\n",
                     Errors::display_name, file, line, what, name, same ? "" : ": ",
                     same ? "" : description);
    }
    return false;
}

/// Checks an allocation call: the message names the size.
template <class Errors>
void check_allocation(typename Errors::Status status, const char* function, size_t bytes,
                      const char* file, int line) {
    if (status != Errors::success) {
        const std::string what = function + std::string(" of ") + std::to_string(bytes) + " bytes";
        throw_error<Errors>(status, what.c_str(), file, line);
    }
}

/// Reads, and so resets, the thread's last error just before a launch,
/// whatever an earlier call left there (ROCm keeps a not-ready event query
/// as the last error; another library's failed call stays until read):
/// the error read after the launch is then the launch's own, as the CUDA
/// Programming Guide ("Error Checking") advises -- make sure the error
/// variable is cudaSuccess just before the launch, by calling
/// cudaGetLastError then. A sticky error is not reset: the launch fails
/// with it.
template <class Errors> void forget_last_error() noexcept { (void)Errors::last_error(); }

/// Reports a failed kernel launch (bad configuration, no kernel image for
/// this GPU, ...) as an Error naming the operation and where it was
/// launched; use it through MTSARRAY_CHECKED_LAUNCH.
template <class Errors> void check_launch(const char* operation, const char* file, int line) {
    const typename Errors::Status status = Errors::last_error();
    if (status != Errors::success) {
        throw_error<Errors>(status, ("launching the " + std::string(operation) + " kernel").c_str(), file, line);
    }
}

}  // namespace gpu
}  // namespace mtsarray::detail

/// Launches (the statement `...`) and checks the kernel launch of
/// `operation`, with the last error read just before: the error names the
/// launching line and is the launch's own.
#define MTSARRAY_CHECKED_LAUNCH(Errors, operation, ...)                          \
    do {                                                                         \
        ::mtsarray::detail::gpu::forget_last_error<Errors>();                    \
        __VA_ARGS__;                                                             \
        ::mtsarray::detail::gpu::check_launch<Errors>((operation), __FILE__, __LINE__); \
    } while (false)
