// The simulated runtime's devices and kernels, each rule with the section
// of the CUDA documentation it follows, and its installation as the CUDA
// backend of test programs.
//
// Kernels (Programming Guide "Lazy Loading", "Thread Hierarchy").
//   A kernel is loaded on a device by load_kernel or, failing that, by its
//   first launch there; each load waits on the host for every stream of the
//   device, and a load by a launch is also a violation (mtsarray loads its
//   kernels when it sets a device up). Thread blocks run in a random order.
// Devices (Programming Guide "Multi-Device System"; Runtime API cudaSetDevice).
//   Two devices by default, or as many as MTSARRAY_SIM_DEVICES says, from 1
//   (as on a machine with a single GPU) to 4; the current device is per thread (0 until set). Setting a
//   device creates its context, as cudaSetDevice does since CUDA 12, and so
//   does any call that works on a device; contexts() tells which devices got
//   one. Kernels and memsets run on streams of the current device.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/backend_registry.hpp"
#include "cpu/threads/pool_host_tasks.hpp"
#include "gpu/gpu_backend.hpp"
#include "support/simulation/state.hpp"

namespace mtsarray_test {

using mtsarray::detail::Error;

namespace sim {

// Whether the deferred work of the process's GpuBackend<SimulatedRuntime>
// has settled (GpuBackend::deferred_work_settled).
bool deferred_work_settled() {
    const auto& backend =
        static_cast<const mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>&>(simulated_backend());
    return backend.deferred_work_settled();
}

uint64_t seed() { return simulator().seed; }

int device_count() { return simulator().devices; }

std::vector<int> contexts() {
    std::vector<int> result;
    for (int device = 0; device < simulator().devices; device++) {
        if (simulator().context[device].load()) {
            result.push_back(device);
        }
    }
    return result;
}

void forget_contexts() {
    for (auto& context : simulator().context) {
        context.store(false);
    }
}

int current_device() { return current; }

void set_device(int device) { SimulatedRuntime::set_device(device); }

// Kernel loading (CUDA C++ Programming Guide, "Lazy Loading", and its
// "Potential Hazards > Concurrent Execution"): since CUDA 12.2 a kernel is
// loaded on its first launch unless loaded before (cudaFuncGetAttributes
// loads it), and a load may wait for the whole device. Here every load is a
// host wait for every stream of the device, and a launch of a kernel that
// was not loaded on its device is also a violation: mtsarray loads all of
// its kernels when it sets a device up (src/gpu/kernel_loading.hpp), so one
// loaded by its launch is missing from the lists there.

void detail::enqueue_kernel(StreamState* stream, mtsarray::detail::gpu::KernelKey kernel, unsigned blocks,
                            std::vector<const void*> read, std::vector<const void*> written,
                            std::function<void(unsigned)> run_block) {
    refuse_unusable_runtime("cudaLaunchKernel");
    Simulator& state = simulator();
    std::unique_lock<std::mutex> lock(state.mutex);
    StreamState* target = resolve_locked(stream);
    if (target == nullptr || target->device != current) {
        last = Status::invalid_resource_handle;
        return;
    }
    const int device = target->device;
    if (state.loaded_kernels[device].count(kernel) == 0) {
        state.lazy_kernel_loads++;
        std::ostringstream why;
        why << "a kernel (key " << kernel << ") was launched on device " << device
            << " before it was loaded there: its lazy load waits on the host for the whole device";
        state.violations.push_back(why.str());
        wait_for_device_locked(lock, device, "a kernel's lazy load at its first launch");
        state.loaded_kernels[device].insert(kernel);
    }
    // thread blocks run in no particular order on a GPU (CUDA C++
    // Programming Guide, "Thread Hierarchy"): a random one here
    std::vector<unsigned> order(blocks);
    std::iota(order.begin(), order.end(), 0u);
    std::shuffle(order.begin(), order.end(), state.block_order);
    std::vector<const void*> touched = read;
    touched.insert(touched.end(), written.begin(), written.end());
    std::vector<Access> accesses;
    for (const void* data : read) {
        accesses.push_back(Access{data, AccessKind::read, "a kernel"});
    }
    for (const void* data : written) {
        accesses.push_back(Access{data, AccessKind::write, "a kernel"});
    }
    const Status status = push_locked(
        target, Item{[touched = std::move(touched), order = std::move(order), run_block, device]() {
                         bool usable = true;
                         for (const void* data : touched) {
                             usable = check_memory(data, 0, "a kernel", device) && usable;
                         }
                         if (!usable) {
                             return;  // not on freed memory: its poison would send it anywhere
                         }
                         for (unsigned block : order) {
                             run_block(block);
                         }
                     },
                     {},
                     NodeKind::kernel,
                     std::move(accesses)});
    if (status != Status::success) {
        last = status;
    }
}

void forget_loaded_kernels() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    for (auto& loaded : simulator().loaded_kernels) {
        loaded.clear();
    }
}

size_t lazy_kernel_loads() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().lazy_kernel_loads;
}

}  // namespace sim

// ---- the traits -----------------------------------------------------------------------

using sim::Status;
using sim::simulator;

int SimulatedRuntime::current_device() {
    sim::refuse_unusable_runtime("cudaGetDevice");
    return sim::current;
}

void SimulatedRuntime::set_device(int device) {
    sim::refuse_unusable_runtime("cudaSetDevice");
    if (device < 0 || device >= simulator().devices) {
        sim::fail(Status::invalid_device, "cudaSetDevice");
    }
    sim::current = device;
    sim::touch_device(device);  // cudaSetDevice initialises the device's context
}

void SimulatedRuntime::restore_device(int device) noexcept {
    if (sim::refused_unusable_runtime("cudaSetDevice")) {
        return;
    }
    if (device < 0 || device >= simulator().devices) {
        sim::report(Status::invalid_device, "cudaSetDevice");
        return;
    }
    sim::current = device;
    sim::touch_device(device);
}

bool SimulatedRuntime::device_active(int device) noexcept {
    return device >= 0 && device < simulator().devices && simulator().context[device].load();
}

void SimulatedRuntime::load_kernel(mtsarray::detail::gpu::KernelKey kernel) {
    sim::refuse_unusable_runtime("cudaFuncGetAttributes");
    std::unique_lock<std::mutex> lock(simulator().mutex);
    const int device = sim::current;
    sim::touch_device(device);
    if (simulator().loaded_kernels[device].count(kernel) != 0) {
        return;
    }
    sim::wait_for_device_locked(lock, device, "cudaFuncGetAttributes (loading a kernel)");
    simulator().loaded_kernels[device].insert(kernel);
}

// ---- installation -------------------------------------------------------------------------

const mtsarray::detail::Backend& simulated_backend() {
    static const mtsarray::detail::Backend* const backend =
        new mtsarray::detail::gpu::GpuBackend<SimulatedRuntime>(&mtsarray::detail::cpu::pool_host_tasks());
    return *backend;
}

namespace {

// MTSARRAY_TEST_GPU: "simulated" always uses the simulation, "real" never;
// by default it serves when no real GPU can be used.
bool install() {
    const char* choice = std::getenv("MTSARRAY_TEST_GPU");
    const std::string wanted = choice == nullptr ? "" : choice;
    if (wanted == "real") {
        return false;
    }
    if (wanted != "simulated" && mtsarray::detail::unavailable_reason(kDLCUDA).empty()) {
        return false;  // a real GPU: the tests run on it
    }
    mtsarray::detail::set_cuda_backend_for_testing(&simulated_backend());
    return true;
}

const bool installed = install();

class SeedPrinter : public ::testing::EmptyTestEventListener {
    void OnTestEnd(const ::testing::TestInfo& info) override {
        if (installed && info.result() != nullptr && info.result()->Failed()) {
            std::printf("[simulated GPU] seed %llu: MTSARRAY_SIM_SEED=%llu replays these delays\n",
                        static_cast<unsigned long long>(sim::seed()), static_cast<unsigned long long>(sim::seed()));
        }
    }
};

const bool seed_printer = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new SeedPrinter());
    return true;
}();

}  // namespace

bool sim::in_use() { return installed; }


}  // namespace mtsarray_test
