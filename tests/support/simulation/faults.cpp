// The simulated runtime's errors: its error vocabulary, the last error of
// each thread, and the runtime's teardown at exit, each rule with the
// section of the CUDA or ROCm documentation it follows.
//
// The last error (Runtime API cudaGetLastError: "Returns the last error that
//   has been produced by any of the runtime calls in the same host thread
//   and resets it to cudaSuccess"; HIP hipGetLastError, the same words).
//   Each thread has one; a kernel launch that fails sets it, and so does,
//   on the HIP flavour (MTSARRAY_SIM_FLAVOUR=hip), an event query answering
//   not-ready: it stays there until the thread reads it. ROCm's last error
//   has changed under this rule twice ("HIP API 7.0 changes": before 7.0,
//   hipGetLastError returned the result of the thread's last call; since,
//   it keeps "the last actual error caught in the current thread", not
//   cleared by later calls, with hipErrorNotReady meant to be left out --
//   which the preview builds of the change did not all do). A program
//   that reads the last error after a launch without reading it just
//   before gets whatever an earlier call left: the simulation leaves it.
// Sticky faults (Runtime API, "Data types used by CUDA Runtime":
//   cudaErrorIllegalAddress, "The device encountered a load or store
//   instruction on an invalid memory address. This leaves the process in an
//   inconsistent state and any further CUDA work will return the same
//   error. To continue using CUDA, the process must be terminated and
//   relaunched"; the same words for cudaErrorLaunchFailure, cudaErrorAssert
//   and the other faults of a kernel).
//   The process-fatal errors that are no fault of a kernel follow the same
//   rule: cudaErrorMpsClientTerminated ("the MPS client has been terminated
//   by the server. To continue using CUDA, the process must be terminated
//   and relaunched") and cudaErrorExternalDevice ("an async error has
//   occurred in a device outside of CUDA ... This leaves the process in an
//   inconsistent state and any further CUDA work will return the same
//   error"); inject_fault(device, status) makes each.
//   inject_fault(device) makes one: from then on every runtime call made
//   with the device current fails with it, the thread's last error is it
//   and stays (reading it does not reset it), the work queued on the
//   device's streams is dropped, and a host wait for one of them, under way
//   or later, returns it. clear_fault() stands for a new process.
// Failing calls (a test control, no rule of CUDA's): any runtime call may
//   fail, with an error that is not sticky (cudaErrorInvalidValue, say).
//   fail_call_after(k) makes the calling thread's (k + 1)-th runtime call
//   from now fail once, so that a test can fail every step of a call in
//   turn and check what each failure leaves behind.
// Process teardown (Runtime API, "Data types used by CUDA Runtime":
//   cudaErrorCudartUnloading, a call "being called during process shut down,
//   at a point in time after CUDA driver has been unloaded").
//   The runtime's exit handler is registered when the simulation is first
//   used, so it runs after the exit handlers of the code that used it first;
//   from then on every runtime call fails with cudaErrorCudartUnloading
//   (unload_runtime() does the same at once). A thread that outlives the
//   exit handlers, like mtsarray's deferred-work thread, meets it.

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu/runtime_error.hpp"
#include "support/simulation/state.hpp"

namespace mtsarray_test {

using mtsarray::detail::Error;

namespace sim {

[[noreturn]] void fail(Status status, const char* call) {
    mtsarray::detail::gpu::throw_error<SimulatedErrors>(status, call, "simulated_runtime", 0);
}

void check(Status status, const char* call) {
    if (status != Status::success) {
        fail(status, call);
    }
}

void report(Status status, const char* call) noexcept {
    mtsarray::detail::gpu::check_nothrow<SimulatedErrors>(status, call, "simulated_runtime", 0);
}

namespace {

Flavour initial_flavour() {
    const char* value = std::getenv("MTSARRAY_SIM_FLAVOUR");
    return value != nullptr && std::string(value) == "hip" ? Flavour::hip : Flavour::cuda;
}

std::atomic<Flavour> current_flavour{initial_flavour()};

}  // namespace

Flavour set_flavour(Flavour flavour) { return current_flavour.exchange(flavour); }

Flavour flavour() { return current_flavour.load(); }

void leave_not_ready() {
    if (flavour() == Flavour::hip) {
        last = Status::not_ready;
    }
}

Status fault_of(int device) {
    if (device < 0 || device >= max_devices) {
        return Status::success;
    }
    return static_cast<Status>(simulator().fault[device].load(std::memory_order_acquire));
}

namespace {
// calls of this thread that still pass before one fails; < 0: none armed
thread_local int64_t calls_before_failure = -1;
thread_local Status failure_status = Status::invalid_value;
}  // namespace

void fail_call_after(int64_t calls, Status status) {
    calls_before_failure = calls;
    failure_status = status;
}

bool call_failure_pending() { return calls_before_failure >= 0; }

void refuse_unusable_runtime(const char* call) {
    if (calls_before_failure >= 0 && calls_before_failure-- == 0) {
        fail(failure_status, call);
    }
    if (simulator().unloaded.load(std::memory_order_acquire)) {
        simulator().calls_after_unload.fetch_add(1);
        fail(Status::runtime_unloading, call);
    }
    const Status fault = fault_of(current);
    if (fault != Status::success) {
        fail(fault, call);
    }
}

bool refused_unusable_runtime(const char* call) noexcept {
    if (simulator().unloaded.load(std::memory_order_acquire)) {
        simulator().calls_after_unload.fetch_add(1);
        report(Status::runtime_unloading, call);
        return true;
    }
    const Status fault = fault_of(current);
    if (fault != Status::success) {
        report(fault, call);
        return true;
    }
    return false;
}

void inject_fault(int device, Status status) {
    MTSARRAY_EXPECTS(device >= 0 && device < simulator().devices, "no simulated device " + std::to_string(device));
    simulator().fault[device].store(static_cast<int>(status), std::memory_order_release);
    // the host waits under way see it
    std::vector<StreamState*> streams;
    {
        std::lock_guard<std::mutex> lock(simulator().mutex);
        streams.assign(simulator().streams.begin(), simulator().streams.end());
    }
    for (auto* stream : streams) {
        std::lock_guard<std::mutex> lock(stream->mutex);
        stream->changed.notify_all();
    }
}

void clear_fault() {
    for (auto& fault : simulator().fault) {
        fault.store(0, std::memory_order_release);
    }
    mtsarray::detail::gpu::DeviceFaults<SimulatedErrors>::forget();
}

// ---- test controls -----------------------------------------------------------------

void unload_runtime() {
    simulator().unloaded.store(true, std::memory_order_release);
}

void reload_runtime() {
    simulator().unloaded.store(false, std::memory_order_release);
}

size_t calls_after_unload() {
    return simulator().calls_after_unload.load();
}

}  // namespace sim

// ---- errors ----------------------------------------------------------------------------

const char* SimulatedErrors::name(Status status) noexcept {
    switch (status) {
    case Status::success: return "cudaSuccess";
    case Status::memory_allocation: return "cudaErrorMemoryAllocation";
    case Status::not_ready: return "cudaErrorNotReady";
    case Status::invalid_value: return "cudaErrorInvalidValue";
    case Status::invalid_device: return "cudaErrorInvalidDevice";
    case Status::invalid_resource_handle: return "cudaErrorInvalidResourceHandle";
    case Status::capture_unsupported: return "cudaErrorStreamCaptureUnsupported";
    case Status::capture_invalidated: return "cudaErrorStreamCaptureInvalidated";
    case Status::capture_implicit: return "cudaErrorStreamCaptureImplicit";
    case Status::capture_isolation: return "cudaErrorStreamCaptureIsolation";
    case Status::captured_event: return "cudaErrorCapturedEvent";
    case Status::host_wait_timeout: return "simulatedHostWaitTimeout";
    case Status::runtime_unloading: return "cudaErrorCudartUnloading";
    case Status::illegal_address: return "cudaErrorIllegalAddress";
    case Status::mps_client_terminated: return "cudaErrorMpsClientTerminated";
    case Status::external_device: return "cudaErrorExternalDevice";
    case Status::peer_access_already_enabled: return "cudaErrorPeerAccessAlreadyEnabled";
    }
    return "unknown";
}

const char* SimulatedErrors::description(Status status) noexcept {
    switch (status) {
    case Status::success: return "no error";
    case Status::memory_allocation: return "out of memory";
    case Status::not_ready: return "device not ready";
    case Status::invalid_value: return "invalid argument";
    case Status::invalid_device: return "invalid device ordinal";
    case Status::invalid_resource_handle: return "invalid resource handle";
    case Status::capture_unsupported: return "operation not permitted when stream is capturing";
    case Status::capture_invalidated: return "operation failed due to a previous error during capture";
    case Status::capture_implicit:
        return "operation would make the legacy stream depend on a capturing blocking stream";
    case Status::capture_isolation: return "operation would have resulted in a merge of two independent captures";
    case Status::captured_event:
        return "operation not permitted on an event last recorded in a capturing stream";
    case Status::host_wait_timeout: return "the host waited for a stream held by the test (simulation)";
    case Status::runtime_unloading: return "driver shutting down";
    case Status::illegal_address: return "an illegal memory access was encountered";
    case Status::mps_client_terminated: return "MPS client terminated";
    case Status::external_device: return "external device encountered an error";
    case Status::peer_access_already_enabled: return "peer access is already enabled";
    }
    return "unknown";
}

SimulatedErrors::Status SimulatedErrors::last_error() noexcept {
    const Status fault = sim::fault_of(sim::current);
    if (fault != Status::success) {
        return fault;  // sticky: reading it does not reset it
    }
    const Status status = sim::last;
    sim::last = Status::success;
    return status;
}

}  // namespace mtsarray_test
