#pragma once
// load_every_kernel<Runtime>(): loads every kernel of the library on the
// current device, so that no launch loads one.
//
// Why. Since CUDA 12.2 on Linux, modules and kernels are loaded lazily, on
// first use (CUDA C++ Programming Guide, "Lazy Loading"), and loading a
// kernel may need a context synchronisation ("Potential Hazards >
// Concurrent Execution"): the first launch of each kernel would wait on the
// host for whatever the device runs -- a long kernel of the training loop,
// or forever behind a persistent kernel (NCCL's documented hazard). Asking
// for a kernel's attributes loads it (cudaFuncGetAttributes,
// hipFuncGetAttributes). GpuBackend does it for every kernel when it sets
// a device up, before its first launch there, as NCCL does when it creates
// a communicator; the user needs no CUDA_MODULE_LOADING=EAGER.
//
// Every launcher lists the kernels it may launch (visit_*_kernels, next to
// the kernels); the simulated runtime of the tests makes a launch of a
// kernel that was not loaded a device-wide host wait and a violation, so a
// kernel missing from these lists fails the tests.
//
// Traits used:
//   static void load_kernel(KernelKey);  // on the current device; throws

#include "gpu/fill.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/move_data.hpp"
#include "gpu/strided_copy.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> void load_every_kernel() {
    auto load = [](KernelKey kernel) { Runtime::load_kernel(kernel); };
    visit_fill_kernels<Runtime>(load);
    visit_move_data_kernels<Runtime>(load);
    visit_strided_copy_kernels<Runtime>(load);
}

}  // namespace gpu
}  // namespace mtsarray::detail
