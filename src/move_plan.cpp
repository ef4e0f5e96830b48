#include "move_plan.hpp"

#include <string>

#include "shape.hpp"
#include "error.hpp"

namespace mtsarray::detail {

namespace {

std::string movement_error(size_t index, const char* field, uintptr_t value, const std::string& why) {
    return "movement " + std::to_string(index) + ": " + field + " = " + std::to_string(value) + " " + why;
}

void check_sample(size_t index, const char* field, uintptr_t sample, uintptr_t samples, const char* side) {
    MTSARRAY_EXPECTS(sample < samples, movement_error(index, field, sample,
                                                      std::string("is out of range for an ") + side + " with " +
                                                          std::to_string(samples) + " samples"));
}

void check_properties(size_t index, const char* field, uintptr_t start, uintptr_t length, uintptr_t properties,
                      const char* side) {
    // written as a subtraction so that start + length can not overflow
    MTSARRAY_EXPECTS(start <= properties && length <= properties - start,
                     movement_error(index, field, start,
                                    "with properties_length = " + std::to_string(length) + " goes past the " +
                                        std::to_string(properties) + " properties of the " + side));
}

// Names the first bad field of a movement that failed in_range.
void validate_movement(size_t index, const mts_data_movement_t& movement, uintptr_t samples_in,
                       uintptr_t samples_out, uintptr_t properties_in, uintptr_t properties_out) {
    check_sample(index, "sample_in", movement.sample_in, samples_in, "input");
    check_sample(index, "sample_out", movement.sample_out, samples_out, "output");
    check_properties(index, "properties_start_in", movement.properties_start_in, movement.properties_length,
                     properties_in, "input");
    check_properties(index, "properties_start_out", movement.properties_start_out, movement.properties_length,
                     properties_out, "output");
}

}  // namespace

MovePlan::MovePlan(const std::vector<uintptr_t>& output_shape, const std::vector<uintptr_t>& input_shape,
                   size_t element_size, const mts_data_movement_t* movements, size_t movements_count)
    : movements_(movements), movements_count_(movements_count), element_size_(element_size) {
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

    samples_in_ = input_shape.front();
    samples_out_ = output_shape.front();
    properties_in_ = input_shape.back();
    properties_out_ = output_shape.back();
    for (size_t axis = 1; axis + 1 < input_shape.size(); axis++) {
        components_ *= input_shape[axis];
    }
    input_row_stride_ = properties_in_ * element_size;
    output_row_stride_ = properties_out_ * element_size;
}

MoveSummary MovePlan::validate() const {
    // One pass without a branch per movement (the common case is a valid
    // list), a second one only to name the first bad movement.
    bool valid = true;
    bool increasing = true;
    uint64_t elements = 0;
    uintptr_t previous_sample = 0;
    for (size_t i = 0; i < movements_count_; i++) {
        const mts_data_movement_t& movement = movements_[i];
        valid &= in_range(movement);
        increasing &= (i == 0) | (movement.sample_out > previous_sample);
        previous_sample = movement.sample_out;
        elements += movement.properties_length;
    }
    if (!valid) {
        for (size_t i = 0; i < movements_count_; i++) {
            if (!in_range(movements_[i])) {
                validate_movement(i, movements_[i], samples_in_, samples_out_, properties_in_, properties_out_);
            }
        }
    }
    return {elements * components_ * element_size_, increasing};
}

}  // namespace mtsarray::detail
