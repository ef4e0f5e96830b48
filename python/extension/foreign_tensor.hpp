#pragma once
// A DLPack tensor of another library handed to the C API as that library's
// array: an `mts_array_t` with the two callbacks the C API reads of a foreign
// source (`device`, `as_dlpack`). So the library, not the extension, decides
// what such a source allows: `mtsarray_copy_into` refuses during a graph
// capture a source whose export it must copy first (strided, read-only),
// whose replays would upload the capture-time copy.

#include <metatensor.h>

namespace mtsarray_python {

class ForeignTensor {
public:
    /// Takes ownership of `tensor` (not null).
    explicit ForeignTensor(DLManagedTensorVersioned* tensor) noexcept : tensor_(tensor) {}
    /// Releases the tensor when no `as_dlpack` took it.
    ~ForeignTensor();
    ForeignTensor(const ForeignTensor&) = delete;
    ForeignTensor& operator=(const ForeignTensor&) = delete;

    /// The array, valid while this object lives. Its `as_dlpack` hands the
    /// tensor over once (ownership passes to the caller); a second call
    /// fails with `MTS_CALLBACK_ERROR` and a message.
    mts_array_t array() noexcept;

private:
    static mts_status_t device(const void* self, DLDevice* device);
    static mts_status_t as_dlpack(void* self, DLManagedTensorVersioned** tensor, DLDevice device,
                                  const int64_t* stream, DLPackVersion max_version);

    DLManagedTensorVersioned* tensor_;
    DLDevice device_{};
};

}  // namespace mtsarray_python
