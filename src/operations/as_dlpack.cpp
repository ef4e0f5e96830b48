#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "core/backend_registry.hpp"
#include "cpu/cpu_backend.hpp"
#include "base/device.hpp"
#include "base/error.hpp"
#include "base/fault_injection.hpp"
#include "operations/host_thread_count.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

namespace {

// One allocation holds the managed tensor, the reference to the data and
// (right after it) the shape and strides, so that the export owns all of
// them and a single deleter call releases everything.
//
// Releasing an export never names a stream the consumer made: that stream
// is the consumer's (the array API's __dlpack__ leaves it to its owner) and
// may be destroyed as soon as the export has returned -- CuPy destroys its
// Stream object whenever Python collects it, before or after the view. So a
// consumer reading on a stream of its own finishes those reads, or orders
// them before the array's work, before it releases the export (as it would
// for PyTorch's exports); the memory then goes back after the array's work
// (Buffer). A consumer reading on a default stream (the legacy or the
// per-thread one, which the runtime owns and never destroys) needs nothing:
// the DLPack convention is that it calls the deleter after queuing its last
// use, and a marker recorded on that stream then orders the eventual free
// after those reads.
struct Export {
    DLManagedTensorVersioned managed;
    std::shared_ptr<Buffer> buffer;
    std::unique_ptr<Stream> default_stream_reader;  // a default stream other than the buffer's own

    int64_t* dimensions() noexcept { return reinterpret_cast<int64_t*>(this + 1); }

    static void deleter(DLManagedTensorVersioned* self) noexcept {
        auto* holder = static_cast<Export*>(self->manager_ctx);
        if (holder->default_stream_reader != nullptr) {
            // the per-thread stream of another thread is waited for through
            // the legacy stream, which waits for every blocking stream
            const Stream& reader = *holder->default_stream_reader;
            try {
                holder->buffer->record_use(reader.usable_here());
            } catch (const std::exception& error) {
                // a deleter can not fail: the free waits for the reads here
                std::fprintf(stderr, "mtsarray: DLPack deleter could not order the free after the consumer's "
                                     "reads: %s\n", error.what());
                try {
                    memory_backend(reader.device().device_type).synchronize(reader.usable_here());
                } catch (...) {
                }
            }
        }
        holder->~Export();
        ::operator delete(holder);
    }
};

/// The stream whose reads of an export its deleter orders the free after:
/// a device's default stream, not the buffer's own; nullptr otherwise.
const Stream* default_stream_reader(const Stream& consumer, const Stream& own) {
    return !consumer.is_none() && !consumer.is_handle() && consumer != own ? &consumer : nullptr;
}
static_assert(alignof(Export) >= alignof(int64_t), "shape and strides follow Export in memory");

DLManagedTensorVersioned* make_export(std::shared_ptr<Buffer> buffer, DLDataType dtype, const Shape& shape,
                                      uint64_t flags, const Stream* reader) {
    const size_t ndim = shape.size();
    fault_injection::check("allocate");
    auto reader_copy = reader != nullptr ? std::make_unique<Stream>(*reader) : nullptr;
    void* memory = ::operator new(sizeof(Export) + 2 * ndim * sizeof(int64_t));
    auto* holder = new (memory) Export{};
    holder->buffer = std::move(buffer);
    holder->default_stream_reader = std::move(reader_copy);

    int64_t* dimensions = holder->dimensions();
    int64_t* strides = dimensions + ndim;
    const auto contiguous = contiguous_strides(shape);
    for (size_t axis = 0; axis < ndim; axis++) {
        dimensions[axis] = static_cast<int64_t>(shape[axis]);
        strides[axis] = contiguous[axis];
    }

    auto& managed = holder->managed;
    managed.version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
    managed.manager_ctx = holder;
    managed.deleter = Export::deleter;
    managed.flags = flags;
    managed.dl_tensor.data = holder->buffer->data();
    managed.dl_tensor.device = holder->buffer->device();
    managed.dl_tensor.ndim = static_cast<int32_t>(ndim);
    managed.dl_tensor.dtype = dtype;
    managed.dl_tensor.shape = dimensions;
    managed.dl_tensor.strides = strides;  // never NULL (DLPack >= 1.2)
    managed.dl_tensor.byte_offset = 0;
    return &managed;
}

}  // namespace

DLManagedTensorVersioned* as_dlpack(const Array& array, DLDevice device, const int64_t* stream,
                                    DLPackVersion max_version) {
    MTSARRAY_EXPECTS(max_version.major == DLPACK_MAJOR_VERSION,
                     "the consumer supports DLPack " + std::to_string(max_version.major) + "." +
                         std::to_string(max_version.minor) + ", mtsarray only exports DLPack " +
                         std::to_string(DLPACK_MAJOR_VERSION) + ".x");
    check_device_usable(device);
    // the consumer's stream lives on the device it asked for
    const Stream consumer = stream == nullptr ? Stream::default_for(device)
                                              : Stream::parse(device, *stream, /*allow_none=*/true);
    memory_backend(device.device_type).check_stream(consumer);

    if (same_device(device, array.device())) {
        // zero-copy: the consumer's stream waits for the array's work (an
        // event, the host does not block); -1 asks for no ordering at all
        const bool reads_on_another_stream = !consumer.is_none() && consumer != array.stream();
        if (reads_on_another_stream) {
            array.memory_backend().wait(consumer, array.stream());
        }
        // the export is writable: the device data may change behind our back
        array.hand_out_writable_pointer();
        return make_export(array.buffer(), array.dtype(), array.shape(), 0,
                           default_stream_reader(consumer, array.stream()));
    }

    // another device: a copy, queued on the consumer's stream (or the
    // device's default stream when the consumer wants no synchronisation),
    // freed on the device's default stream after a marker of that copy --
    // never on a stream of the consumer's, which may be gone by then
    check_host_thread_count(array.device(), device);
    const Stream destination = consumer.is_none() ? Stream::default_for(device) : consumer;
    memory_backend(device.device_type).check_not_capturing(destination, "a DLPack export to another device");
    auto buffer = Buffer::allocate(destination, array.nbytes());
    const Stream release = Stream::default_for(device);
    buffer->set_release_stream(release);
    const auto mirror = array.host_mirror();
    const bool to_host = is_host_accessible(device.device_type);
    if (mirror != nullptr && to_host) {
        cpu_backend().copy(destination, buffer->data(), mirror->data(), array.nbytes());
    } else {
        transfer(buffer->data(), destination, array.data(), array.stream(), array.nbytes(), array.buffer());
        buffer->record_use(destination);  // the copy, queued there
        if (to_host && array.wants_host_mirror()) {
            array.set_host_mirror(host_copy(buffer->data(), array.nbytes()));
        }
    }
    return make_export(std::move(buffer), array.dtype(), array.shape(), DLPACK_FLAG_BITMASK_IS_COPIED,
                       default_stream_reader(destination, release));
}

}  // namespace mtsarray::detail
