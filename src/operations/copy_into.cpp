// copy_into: every element of one array written into another that already
// exists, on any pair of devices, queued on the destination's stream.

#include <cstring>
#include <string>

#include "base/device.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"
#include "base/shape.hpp"
#include "core/backend_registry.hpp"
#include "operations/host_thread_count.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

void copy_into(Array& destination, const Array& source) {
    check_host_thread_count(destination.device(), source.device());
    MTSARRAY_EXPECTS(same_dtype(destination.dtype(), source.dtype()),
                     "the source (" + source.describe() + ") has another dtype than the destination");
    MTSARRAY_EXPECTS(destination.shape() == source.shape(),
                     "the source (" + source.describe() + ") has another shape than the destination");
    check_device_usable(destination.device());
    check_device_usable(source.device());
    const size_t bytes = source.nbytes();
    if (bytes == 0 || (destination.data() == source.data() && same_device(destination.device(), source.device()))) {
        return;  // nothing to write: every element is already where it goes
    }
    const Stream& stream = destination.stream();
    // after the reads of the destination on other streams, whichever stream
    // the copy is queued on (transfer() orders its stream after the
    // destination's)
    destination.prepare_write(stream);

    if (same_device(destination.device(), source.device())) {
        const Backend& memory = destination.memory_backend();
        const Backend& compute = destination.compute_backend();
        memory.wait(stream, source.stream());
        if (!destination.overlaps(source)) {
            compute.copy(stream, destination.data(), source.data(), bytes);
        } else {
            // two views of one buffer: through a snapshot, as memmove would
            memory.check_not_capturing(stream, "copy_into between overlapping arrays (through a snapshot)");
            auto snapshot = Buffer::allocate(stream, bytes);
            compute.copy(stream, snapshot->data(), source.data(), bytes);
            try {
                compute.copy(stream, destination.data(), snapshot->data(), bytes);
            } catch (...) {
                // the source's read is queued: recorded all the same, so
                // that its memory is not freed before it
                source.buffer()->record_use(stream);
                throw;
            }
        }
        // read on the destination's stream: the source's memory must not be
        // freed on its own stream before that read
        source.buffer()->record_use(stream);
    } else {
        // host <-> device, device <-> device of one runtime (peer), or two
        // runtimes through the host: transfer() queues the copy on the
        // destination's stream after the source's pending work, and only a
        // pageable host side waits (a device source is read on the
        // destination's stream and freed after that read; a page-locked or
        // managed one straight from its buffer, kept alive until read)
        transfer(destination.data(), stream, source.data(), source.stream(), bytes, source.buffer());
    }
}

}  // namespace mtsarray::detail
