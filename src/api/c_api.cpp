// The public C API (include/mtsarray.h). Every function runs through `guard`
// and leaves its outputs untouched on error.

#include "mtsarray.h"

#include <atomic>
#include <string>
#include <vector>

#include "core/installed_allocator.hpp"
#include "core/handle_registry.hpp"
#include "core/backend_registry.hpp"
#include "api/c_boundary.hpp"
#include "api/callbacks.hpp"
#include "api/foreign_array.hpp"
#include "cpu/threads/thread_count.hpp"
#include "base/device.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"
#include "operations/operations.hpp"
#include "api/tensormap_to.hpp"

using namespace mtsarray::detail;

namespace {

auto context(const char* function) {
    return [function]() { return std::string(function); };
}

Array& array_of(const mts_array_t* array) {
    check_not_null(array, "array");
    MTSARRAY_EXPECTS(is_mtsarray(*array), "array was not made by mtsarray (or was already destroyed)");
    return *find_array(array->ptr);
}

}  // namespace

extern "C" {

mts_status_t mtsarray_zeros(DLDevice device, DLDataType dtype, const uintptr_t* shape, uintptr_t shape_count,
                            mts_array_t* array) {
    return guard(context("mtsarray_zeros"), [&] {
        check_not_null(array, "array");
        const unsigned char zero[max_element_size] = {};
        *array = to_mts_array(make_filled(dtype, shape_argument(shape, shape_count), zero, Stream::default_for(device)));
    });
}

mts_status_t mtsarray_full(DLDevice device, DLDataType dtype, const uintptr_t* shape, uintptr_t shape_count,
                           const void* value, mts_array_t* array) {
    return guard(context("mtsarray_full"), [&] {
        check_not_null(array, "array");
        check_not_null(value, "value");
        *array = to_mts_array(make_filled(dtype, shape_argument(shape, shape_count), value, Stream::default_for(device)));
    });
}

mts_status_t mtsarray_wrap(void* data, DLDevice device, DLDataType dtype, const uintptr_t* shape,
                           uintptr_t shape_count, void (*deleter)(void* context), void* context_pointer,
                           mts_array_t* array) {
    return guard(context("mtsarray_wrap"), [&] {
        check_not_null(array, "array");
        check_dtype(dtype);
        check_device_usable(device);
        auto dimensions = shape_argument(shape, shape_count);
        const size_t count = checked_element_count(dimensions, element_size(dtype));
        MTSARRAY_EXPECTS(data != nullptr || count == 0, "data is NULL for a non-empty array");
        // on any error the memory stays the caller's and the deleter is not
        // called: it is armed only once the array exists
        struct Release {
            void (*deleter)(void*);
            void* context;
            bool armed;
        };
        auto release = std::make_shared<Release>(Release{deleter, context_pointer, false});
        auto buffer = Buffer::external(data, count * element_size(dtype), device, [release]() {
            if (release->armed && release->deleter != nullptr) {
                release->deleter(release->context);
            }
        });
        auto wrapped = std::make_unique<Array>(std::move(buffer), dtype, std::move(dimensions),
                                               Stream::default_for(device));
        release->armed = true;
        *array = to_mts_array(std::move(wrapped));
    });
}

mts_status_t mtsarray_from_dlpack(DLManagedTensorVersioned* tensor, mts_array_t* array) {
    return guard(context("mtsarray_from_dlpack"), [&] {
        auto imported = from_dlpack(tensor);  // owns the tensor, even on error
        check_not_null(array, "array");
        *array = to_mts_array(std::move(imported));
    });
}

mts_status_t mtsarray_set_stream(const mts_array_t* array, int64_t stream) {
    return guard(context("mtsarray_set_stream"), [&] {
        auto& target = array_of(array);
        target.set_stream(Stream::parse(target.device(), stream));
    });
}

mts_status_t mtsarray_get_stream(const mts_array_t* array, int64_t* stream) {
    return guard(context("mtsarray_get_stream"), [&] {
        check_not_null(stream, "stream");
        *stream = array_of(array).stream().number();
    });
}

mts_status_t mtsarray_synchronize(const mts_array_t* array) {
    return guard(context("mtsarray_synchronize"), [&] {
        const auto& target = array_of(array);
        if (!target.stream().is_none()) {
            target.memory_backend().synchronize(target.stream());
        }
    });
}

mts_status_t mtsarray_data(const mts_array_t* array, void** data) {
    return guard(context("mtsarray_data"), [&] {
        check_not_null(data, "data");
        const auto& target = array_of(array);
        // the caller may write through the pointer
        target.hand_out_writable_pointer();
        *data = target.data();
    });
}

mts_status_t mtsarray_copy_into(const mts_array_t* destination, const mts_array_t* source) {
    return guard(context("mtsarray_copy_into"), [&] {
        check_not_null(destination, "destination");
        check_not_null(source, "source");
        MTSARRAY_EXPECTS(is_mtsarray(*destination),
                         "destination was not made by mtsarray (or was already destroyed)");
        Array& output = *find_array(destination->ptr);
        if (is_mtsarray(*source)) {
            copy_into(output, *find_array(source->ptr));
        } else {
            const auto borrowed = borrow_foreign_array(*source, "source");
            if (!borrowed->buffer()->is_external()) {
                // mtsarray copied the export (strided, read-only): a graph
                // would replay that copy, never what the source holds then
                output.memory_backend().check_not_capturing(
                    output.stream(), "copy_into from another library's array whose export mtsarray must copy "
                                     "first (strided or read-only: a replay would upload that copy, never what "
                                     "the source holds then; export it C-contiguous and writable, or copy it into "
                                     "an mtsarray array that the graph reads)");
            }
            copy_into(output, *borrowed);
        }
    });
}

mts_status_t mtsarray_is_mtsarray(const mts_array_t* array, bool* result) {
    return guard(context("mtsarray_is_mtsarray"), [&] {
        check_not_null(array, "array");
        check_not_null(result, "result");
        *result = is_mtsarray(*array);
    });
}

mts_status_t mtsarray_backend_available(DLDeviceType device_type, bool* available) {
    return guard(context("mtsarray_backend_available"), [&] {
        check_not_null(available, "available");
        *available = unavailable_reason(device_type).empty();
    });
}

mts_status_t mtsarray_device_count(DLDeviceType device_type, int32_t* count) {
    return guard(context("mtsarray_device_count"), [&] {
        check_not_null(count, "count");
        *count = static_cast<int32_t>(device_count(device_type));
    });
}

}  // extern "C"

namespace {

/// One device type's reason, kept for the program's life in a list that
/// only grows at its head. Lock-free, so that a fork() child never finds it
/// locked by a thread of the parent that no longer exists there.
struct UnavailableReason {
    DLDeviceType type;
    std::string text;
    const UnavailableReason* next;
};

std::atomic<const UnavailableReason*>& unavailable_reasons() {
    static std::atomic<const UnavailableReason*> head{nullptr};
    return head;
}

const UnavailableReason* find_reason(const UnavailableReason* from, const UnavailableReason* to,
                                     DLDeviceType type) noexcept {
    for (; from != to; from = from->next) {
        if (from->type == type) {
            return from;
        }
    }
    return nullptr;
}

}  // namespace

extern "C" {

const char* mtsarray_backend_unavailable_reason(DLDeviceType device_type) {
    auto& head = unavailable_reasons();
    const UnavailableReason* seen = head.load(std::memory_order_acquire);
    if (const auto* known = find_reason(seen, nullptr, device_type)) {
        return known->text.c_str();
    }
    try {
        // computed outside any lock; two threads asking at once may both
        // compute it, and the first to publish wins
        auto* made = new UnavailableReason{device_type, unavailable_reason(device_type), seen};
        while (!head.compare_exchange_weak(made->next, made, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
            if (const auto* known = find_reason(made->next, seen, device_type)) {
                delete made;
                return known->text.c_str();
            }
            seen = made->next;
        }
        return made->text.c_str();
    } catch (...) {
        return "could not determine the backend's availability";
    }
}

mts_status_t mtsarray_tensormap_to(const mts_tensormap_t* tensor, DLDevice device, int64_t stream,
                                   mts_tensormap_t** result) {
    return guard(context("mtsarray_tensormap_to"), [&] {
        check_not_null(tensor, "tensor");
        check_not_null(result, "result");
        check_device_usable(device);
        *result = tensormap_to(tensor, Stream::parse(device, stream));
    });
}

mts_status_t mtsarray_set_allocator(DLDeviceType device_type, const mtsarray_allocator_t* allocator) {
    return guard(context("mtsarray_set_allocator"), [&] { set_user_allocator(device_type, allocator); });
}

mts_status_t mtsarray_release_cached_memory(DLDevice device) {
    return guard(context("mtsarray_release_cached_memory"), [&] {
        const auto& backend = memory_backend(device.device_type);
        if (backend.available()) {
            backend.check_device(device);
            backend.release_cached_memory(device);
        }
    });
}

mts_status_t mtsarray_set_release_threshold(DLDevice device, uint64_t bytes) {
    return guard(context("mtsarray_set_release_threshold"), [&] {
        const auto& backend = memory_backend(device.device_type);
        if (backend.available()) {
            backend.check_device(device);
            backend.set_release_threshold(device, bytes);
        }
    });
}

mts_status_t mtsarray_get_release_threshold(DLDevice device, uint64_t* bytes) {
    return guard(context("mtsarray_get_release_threshold"), [&] {
        check_not_null(bytes, "bytes");
        const auto& backend = memory_backend(device.device_type);
        uint64_t threshold = 0;
        if (backend.available()) {
            backend.check_device(device);
            threshold = backend.release_threshold(device);
        }
        *bytes = threshold;  // only once nothing can fail: untouched on error
    });
}

mts_status_t mtsarray_set_num_threads(int32_t count) {
    return guard(context("mtsarray_set_num_threads"), [&] { cpu::set_thread_count(count); });
}

mts_status_t mtsarray_get_num_threads(int32_t* count) {
    return guard(context("mtsarray_get_num_threads"), [&] {
        check_not_null(count, "count");
        *count = static_cast<int32_t>(cpu::thread_count());
    });
}

const char* mtsarray_version(void) {
    return MTSARRAY_VERSION;
}

}  // extern "C"
