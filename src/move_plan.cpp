#include "move_plan.hpp"

#include <string>

#include "array.hpp"
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

// The common case, written for speed: no call, no string, one branch. The
// subtraction form keeps start + length from overflowing.
inline bool in_range(const mts_data_movement_t& movement, uintptr_t samples_in, uintptr_t samples_out,
                     uintptr_t properties_in, uintptr_t properties_out) noexcept {
    return (movement.sample_in < samples_in) & (movement.sample_out < samples_out) &
           (movement.properties_start_in <= properties_in) &
           (movement.properties_length <= properties_in - movement.properties_start_in) &
           (movement.properties_start_out <= properties_out) &
           (movement.properties_length <= properties_out - movement.properties_start_out);
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

    const uintptr_t samples_in = input_shape.front();
    const uintptr_t samples_out = output_shape.front();
    const uintptr_t properties_in = input_shape.back();
    const uintptr_t properties_out = output_shape.back();
    for (size_t axis = 1; axis + 1 < input_shape.size(); axis++) {
        components_ *= input_shape[axis];
    }

    // everything is validated before the plan (and so any write) exists
    bool any_data = false;
    for (size_t i = 0; i < movements_count; i++) {
        if (!in_range(movements[i], samples_in, samples_out, properties_in, properties_out)) {
            validate_movement(i, movements[i], samples_in, samples_out, properties_in, properties_out);
        }
        any_data = any_data || movements[i].properties_length != 0;
    }
    input_row_stride_ = properties_in * element_size;
    output_row_stride_ = properties_out * element_size;
    empty_ = !any_data || components_ == 0;
}

const std::vector<MoveRun>& MovePlan::runs() const {
    build_table();
    return runs_;
}

uint64_t MovePlan::total_bytes() const {
    build_table();
    return total_bytes_;
}

uint64_t MovePlan::total_rows() const {
    build_table();
    return total_rows_;
}

size_t MovePlan::alignment() const {
    build_table();
    return alignment_;
}

void MovePlan::build_table() const {
    if (table_built_) {
        return;
    }
    uint64_t alignment_bits = 0;
    for_each_run([&](const MoveRun& run) {
        runs_.push_back(run);
        if (run.rows > 1) {
            alignment_bits |= input_row_stride_ | output_row_stride_;
        }
        alignment_bits |= run.input_offset | run.output_offset | run.bytes;
        total_bytes_ += run.bytes * run.rows;
        total_rows_ += run.rows;
    });
    alignment_ = 16;
    while (alignment_ > 1 && alignment_bits % alignment_ != 0) {
        alignment_ /= 2;
    }
    table_built_ = true;
}

}  // namespace mtsarray::detail
