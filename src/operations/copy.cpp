#include <string>
#include <vector>

#include "core/backend_registry.hpp"
#include "cpu/cpu_backend.hpp"
#include "base/device.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"
#include "operations/host_thread_count.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {


void transfer(void* destination, const Stream& destination_stream, const void* source,
              const Stream& source_stream, size_t bytes, const std::shared_ptr<Buffer>& source_buffer) {
    if (bytes == 0) {
        return;
    }
    const auto source_type = source_stream.device().device_type;
    const auto destination_type = destination_stream.device().device_type;
    const bool source_on_host = is_host_accessible(source_type);
    const bool destination_on_host = is_host_accessible(destination_type);

    if (source_on_host && destination_on_host) {
        cpu_backend().copy(source_stream, destination, source, bytes);
        return;
    }
    if (source_on_host) {
        memory_backend(destination_type)
            .copy_from_host_keeping(destination_stream, destination, source, bytes, source_buffer,
                                    source_type != kDLCPU);
        return;
    }
    const auto& source_backend = memory_backend(source_type);
    if (destination_on_host) {
        // the host is the consumer: it waits, for this copy only
        source_backend.copy_to_host(source_stream, destination, source, bytes);
        source_backend.synchronize(source_stream);
        return;
    }
    const auto& destination_backend = memory_backend(destination_type);
    if (&source_backend == &destination_backend) {
        // same runtime: a device-to-device (or peer) copy queued on the
        // destination's stream (after the destination's stream-ordered
        // allocation, already there), once the source's pending writes are
        // done: an event recorded on the source's stream, waited for by the
        // destination's. The source's stream never waits for the
        // destination's queue: stage k of a pipeline hands its output to
        // stage k + 1 and goes on at once.
        destination_backend.wait(destination_stream, source_stream);
        destination_backend.copy_peer(destination_stream, destination, source, source_stream.device(), bytes);
        // read on the destination's stream: the source is freed after that
        source_buffer->record_use(destination_stream);
        return;
    }
    // Two different GPU runtimes (CUDA <-> ROCm in one process) only meet
    // through the host, which has to wait for both copies: the one place a
    // device-to-device copy blocks, and documented as such.
    std::vector<unsigned char> staging(bytes);
    source_backend.copy_to_host(source_stream, staging.data(), source, bytes);
    source_backend.synchronize(source_stream);
    destination_backend.copy_from_host(destination_stream, destination, staging.data(), bytes);
    destination_backend.synchronize(destination_stream);
}

std::shared_ptr<Buffer> host_copy(const void* data, size_t bytes) {
    const auto stream = Stream::default_for(cpu_device());
    auto buffer = Buffer::allocate(stream, bytes);
    cpu_backend().copy(stream, buffer->data(), data, bytes);
    return buffer;
}

std::unique_ptr<Array> copy_to_device(const Array& source, DLDevice device, const Stream* stream) {
    check_host_thread_count(source.device(), device);
    check_device_usable(device);
    const bool same = same_device(device, source.device());
    const Stream target = stream != nullptr ? *stream : same ? source.stream() : Stream::default_for(device);
    MTSARRAY_EXPECTS(same_device(target.device(), device),
                     "stream " + target.describe() + " is not a stream of " + describe(device));
    if (stream != nullptr) {
        memory_backend(device.device_type).check_stream(target);  // an array's own stream was checked when set
    }
    auto copy = Array::allocate(source.dtype(), source.shape(), target);
    const auto mirror = source.host_mirror();

    if (same) {
        source.memory_backend().wait(target, source.stream());
        source.compute_backend().copy(target, copy->data(), source.data(), source.nbytes());
        // read on `target`: the source's memory is freed after that
        source.buffer()->record_use(target);
    } else if (mirror != nullptr && is_host_accessible(device.device_type)) {
        cpu_backend().copy(target, copy->data(), mirror->data(), source.nbytes());
    } else {
        transfer(copy->data(), target, source.data(), source.stream(), source.nbytes(), source.buffer());
    }

    if (mirror != nullptr) {
        copy->set_host_mirror(mirror);
    } else if (copy->wants_host_mirror() && is_host_accessible(source.device().device_type)) {
        // the bytes are on the host right now: keep them for later reads
        copy->set_host_mirror(host_copy(source.data(), source.nbytes()));
    }
    return copy;
}

}  // namespace mtsarray::detail
