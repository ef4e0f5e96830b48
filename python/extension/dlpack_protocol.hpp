#pragma once
// The Python side of DLPack (array API standard 2024.12): tensors travel in
// PyCapsules named "dltensor_versioned" (DLPack >= 1.0) or "dltensor" (older
// consumers and producers). A capsule owns its tensor until a consumer
// renames it "used_...": from then on the consumer calls the deleter.

#include <metatensor.h>
#include <nanobind/nanobind.h>

namespace mtsarray_python {

/// A capsule owning `tensor` until a consumer takes it: "dltensor_versioned",
/// or a pre-1.0 "dltensor" forwarding to it when `versioned` is false (which
/// refuses read-only tensors: the old struct can not say so). Ownership of
/// `tensor` passes to the capsule, also when this raises.
nanobind::object export_capsule(DLManagedTensorVersioned* tensor, bool versioned);

/// Consumes a DLPack capsule the way the protocol asks of a consumer (renames
/// it "used_..."), returning a versioned tensor the caller now owns (a
/// legacy tensor is wrapped in one whose deleter releases it). Raises
/// TypeError for anything else, and for a capsule already consumed.
DLManagedTensorVersioned* consume_capsule(nanobind::handle capsule);

/// The DLPack C exchange API (`__dlpack_c_exchange_api__`, DLPack 1.x) of
/// `type`, or null when it has none. Looked up once per type.
const DLPackExchangeAPI* exchange_api(PyTypeObject* type);

/// `producer.__dlpack__(stream=stream, max_version=(1, minor))`, with
/// `stream` left out when it is null, and again without max_version for a
/// producer older than DLPack 1.0 (TypeError). Raises TypeError when the
/// object does not speak DLPack.
nanobind::object request_capsule(nanobind::handle producer, PyObject* stream);

}  // namespace mtsarray_python
