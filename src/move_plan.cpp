#include "move_plan.hpp"

#include <string>

#include "array.hpp"
#include "error.hpp"

namespace mtsarray {

namespace {

std::string movement_error(size_t index, const char* field, uintptr_t value, const std::string& why) {
    return "movement " + std::to_string(index) + ": " + field + " = " + std::to_string(value) + " " + why;
}

void validate_movement(size_t index, const mts_data_movement_t& movement, uintptr_t samples_in,
                       uintptr_t samples_out, uintptr_t properties_in, uintptr_t properties_out) {
    MTSARRAY_EXPECTS(movement.sample_in < samples_in,
                     movement_error(index, "sample_in", movement.sample_in,
                                    "is out of range for an input with " + std::to_string(samples_in) + " samples"));
    MTSARRAY_EXPECTS(movement.sample_out < samples_out,
                     movement_error(index, "sample_out", movement.sample_out,
                                    "is out of range for an output with " + std::to_string(samples_out) + " samples"));
    // written as subtractions so that start + length can not overflow
    MTSARRAY_EXPECTS(movement.properties_start_in <= properties_in &&
                         movement.properties_length <= properties_in - movement.properties_start_in,
                     movement_error(index, "properties_start_in", movement.properties_start_in,
                                    "with properties_length = " + std::to_string(movement.properties_length) +
                                        " goes past the " + std::to_string(properties_in) +
                                        " properties of the input"));
    MTSARRAY_EXPECTS(movement.properties_start_out <= properties_out &&
                         movement.properties_length <= properties_out - movement.properties_start_out,
                     movement_error(index, "properties_start_out", movement.properties_start_out,
                                    "with properties_length = " + std::to_string(movement.properties_length) +
                                        " goes past the " + std::to_string(properties_out) +
                                        " properties of the output"));
}

}  // namespace

MovePlan::MovePlan(const std::vector<uintptr_t>& output_shape, const std::vector<uintptr_t>& input_shape,
                   size_t element_size, const mts_data_movement_t* movements, size_t movements_count)
    : element_size_(element_size) {
    MTSARRAY_EXPECTS(input_shape.size() >= 2 && output_shape.size() >= 2,
                     "move_data needs arrays with at least two axes (samples and properties), got input " +
                         describe_shape(input_shape) + " and output " + describe_shape(output_shape));
    bool same_components = input_shape.size() == output_shape.size();
    for (size_t axis = 1; same_components && axis + 1 < input_shape.size(); axis++) {
        same_components = input_shape[axis] == output_shape[axis];
    }
    MTSARRAY_EXPECTS(same_components, "input " + describe_shape(input_shape) + " and output " +
                                          describe_shape(output_shape) +
                                          " do not have the same component axes");
    MTSARRAY_EXPECTS(movements != nullptr || movements_count == 0,
                     "movements is NULL but movements_count = " + std::to_string(movements_count));

    const uintptr_t samples_in = input_shape.front();
    const uintptr_t samples_out = output_shape.front();
    const uintptr_t properties_in = input_shape.back();
    const uintptr_t properties_out = output_shape.back();
    uint64_t components = 1;
    for (size_t axis = 1; axis + 1 < input_shape.size(); axis++) {
        components *= input_shape[axis];
    }

    // everything is validated before the plan (and so any write) exists
    for (size_t i = 0; i < movements_count; i++) {
        validate_movement(i, movements[i], samples_in, samples_out, properties_in, properties_out);
    }

    input_row_stride_ = properties_in * element_size;
    output_row_stride_ = properties_out * element_size;
    if (components == 0) {
        return;
    }

    for (size_t i = 0; i < movements_count; i++) {
        const auto& movement = movements[i];
        if (movement.properties_length == 0) {
            continue;
        }
        const MoveRun run = {
            (movement.sample_in * components * properties_in + movement.properties_start_in) * element_size,
            (movement.sample_out * components * properties_out + movement.properties_start_out) * element_size,
            movement.properties_length * element_size,
            components,
        };
        if (!runs_.empty()) {
            auto& last = runs_.back();
            if (last.bytes == run.bytes &&
                run.input_offset == last.input_offset + last.rows * input_row_stride_ &&
                run.output_offset == last.output_offset + last.rows * output_row_stride_) {
                last.rows += run.rows;
                continue;
            }
        }
        runs_.push_back(run);
    }

    uint64_t alignment_bits = 0;
    for (auto& run : runs_) {
        // whole rows on both sides: the run is one contiguous block
        if (run.bytes == input_row_stride_ && run.bytes == output_row_stride_) {
            run.bytes *= run.rows;
            run.rows = 1;
        }
        if (run.rows > 1) {
            alignment_bits |= input_row_stride_ | output_row_stride_;
        }
        total_bytes_ += run.bytes * run.rows;
        total_rows_ += run.rows;
        alignment_bits |= run.input_offset | run.output_offset | run.bytes;
    }
    alignment_ = 16;
    while (alignment_ > 1 && alignment_bits % alignment_ != 0) {
        alignment_ /= 2;
    }
}

}  // namespace mtsarray
