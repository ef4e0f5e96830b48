#include <string>

#include "base/device.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"
#include "operations/host_thread_count.hpp"
#include "operations/operations.hpp"

namespace mtsarray::detail {

void move_data(Array& output, const Array& input, const mts_data_movement_t* movements, size_t count) {
    check_host_thread_count(output.device(), input.device());
    MTSARRAY_EXPECTS(same_dtype(output.dtype(), input.dtype()),
                     "input (" + input.describe() + ") and output have different dtypes");
    MTSARRAY_EXPECTS(same_device(output.device(), input.device()),
                     "input (" + input.describe() + ") is not on the output's device");
    const MovePlan plan(output.shape(), input.shape(), element_size(output.dtype()), movements, count);
    if (plan.trivially_empty()) {
        plan.validate();
        return;
    }

    // The backend checks every movement before it queues anything, then
    // runs the copy on the output's stream after the input's pending work;
    // the host never waits for either.
    const auto& stream = output.stream();
    const auto& backend = output.compute_backend();
    output.prepare_write(stream);
    if (!output.overlaps(input)) {
        backend.move_data(stream, output.data(), input.data(), input.stream(), plan);
    } else {
        // moving within one buffer: read from a snapshot so that no movement
        // sees another one's writes (freed on `stream`, after the copy)
        plan.validate();
        output.memory_backend().check_not_capturing(stream, "move_data within one buffer (through a snapshot)");
        output.memory_backend().wait(stream, input.stream());
        auto snapshot = Buffer::allocate(stream, input.nbytes());
        backend.copy(stream, snapshot->data(), input.data(), input.nbytes());
        backend.move_data(stream, output.data(), snapshot->data(), stream, plan);
    }
    // the input may belong to another stream: its memory must not be freed
    // there before this read
    input.buffer()->record_use(stream);
}

}  // namespace mtsarray::detail
