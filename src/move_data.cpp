#include <string>

#include "device.hpp"
#include "dtype.hpp"
#include "error.hpp"
#include "operations.hpp"

namespace mtsarray::detail {

namespace {

bool overlaps(const Array& a, const Array& b) {
    const auto* a_begin = static_cast<const unsigned char*>(a.data());
    const auto* b_begin = static_cast<const unsigned char*>(b.data());
    return a.nbytes() != 0 && b.nbytes() != 0 && a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
}

}  // namespace

void move_data(Array& output, const Array& input, const mts_data_movement_t* movements, size_t count) {
    MTSARRAY_EXPECTS(same_dtype(output.dtype(), input.dtype()),
                     "input (" + input.describe() + ") and output have different dtypes");
    MTSARRAY_EXPECTS(same_device(output.device(), input.device()),
                     "input (" + input.describe() + ") is not on the output's device");
    const MovePlan plan(output.shape(), input.shape(), element_size(output.dtype()), movements, count);
    if (plan.empty()) {
        return;
    }

    const auto& stream = output.stream();
    const auto& backend = output.compute_backend();
    if (input.stream() != stream && !input.stream().is_none() && !stream.is_none()) {
        output.memory_backend().wait(stream, input.stream());
    }
    input.prepare_host_access();
    output.prepare_host_access();
    output.invalidate_host_mirror();

    if (!overlaps(output, input)) {
        backend.move_data(stream, output.data(), input.data(), plan);
        return;
    }
    // moving within one buffer: read from a snapshot so that no movement
    // sees another one's writes
    auto snapshot = Buffer::allocate(stream, input.nbytes());
    backend.copy(stream, snapshot->data(), input.data(), input.nbytes());
    backend.move_data(stream, output.data(), snapshot->data(), plan);
}

}  // namespace mtsarray::detail
