#pragma once
// MtsArray's DLPack C exchange API (`__dlpack_c_exchange_api__`, DLPack 1.3):
// a table of C functions on the type, for consumers written in C or C++
// (other frameworks' extensions, kernel libraries) that take an MtsArray
// without a Python call, a capsule or a keyword parse per hand-off.

#include <nanobind/nanobind.h>

namespace mtsarray_python {

/// Sets `MtsArray.__dlpack_c_exchange_api__`: a PyCapsule named
/// "dlpack_exchange_api" holding the process-lifetime table.
///
/// Streams, as PyTorch's table has them: `current_work_stream` gives the
/// stream on which a consumer's work on the exported data is ordered after
/// the array's. mtsarray has no "current" stream, each array has its own:
/// it answers NULL (the device's default stream) for every device, and
/// `managed_tensor_from_py_object_no_sync` exports as `__dlpack__` does for
/// a consumer on the default stream (stream None): the default stream waits
/// for the array's pending work with an event, and the host never waits
/// (for a CUDA or ROCm array; a CPU array has nothing pending).
void publish_exchange_api(nanobind::handle array_type);

}  // namespace mtsarray_python
