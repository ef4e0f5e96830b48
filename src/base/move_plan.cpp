#include "base/move_plan.hpp"

#include <cstddef>
#include <string>

#include "base/error.hpp"
#include "base/move_plan_scan.hpp"
#include "base/shape.hpp"

namespace mtsarray::detail {

using move_scan::join_part;
using move_scan::Lanes;
using move_scan::scan_range;
using move_scan::ScanOneAtATime;
using move_scan::top_bits;

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

void MovePlan::reject(const Shape& output_shape, const Shape& input_shape,
                      const mts_data_movement_t* movements, size_t movements_count) {
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
    throw Error("move_data: invalid shapes");  // not reached: one of the checks above failed
}


MoveScan MovePlan::scan_part(size_t begin, size_t end, mts_data_movement_t* copy) const noexcept {
    const Lanes last_samples = {samples_in_ - 1, samples_out_ - 1};
    const Lanes properties = {properties_in_, properties_out_};
    return scan_range(movements_, copy, begin, end, last_samples, properties, ScanOneAtATime{});
}

MoveSummary MovePlan::summarize(MoveScan* parts, size_t count, mts_data_movement_t* copy) const {
    const mts_data_movement_t* const checked = copy != nullptr ? copy : movements_;
    if (copy != nullptr) {
        // a part that stayed one run stored its first movement only: its
        // last one, which the next part is joined to, follows from it
        for (size_t i = 0; i < count; i++) {
            if (!parts[i].copied) {
                const mts_data_movement_t first = copy[parts[i].begin];
                const uintptr_t step = parts[i].end - 1 - parts[i].begin;
                copy[parts[i].end - 1] = {first.sample_in + step, first.sample_out + step, first.properties_start_in,
                                          first.properties_start_out, first.properties_length};
            }
        }
    }
    MoveScan all = {0, 0, 0, 0, 0, 0, true};
    for (size_t i = 0; i < count; i++) {
        if (copy != nullptr && parts[i].begin != 0 && parts[i].begin < movements_count_) {
            join_part(parts[i], copy);
        }
        all.out_of_range |= parts[i].out_of_range;
        all.not_one_run |= parts[i].not_one_run;
        all.out_of_order |= parts[i].out_of_order;
        all.elements += parts[i].elements;
    }
    if (movements_count_ == 0) {
        return {0, true, false};
    }
    const bool flagged = (all.out_of_range & top_bits) != 0;
    if (copy != nullptr && (flagged || all.not_one_run != 0)) {
        // the exact check and the copy by movements read the whole copy
        for (size_t i = 0; i < count; i++) {
            if (!parts[i].copied) {
                fill_run(copy, parts[i].begin, parts[i].end - 1);
                parts[i].copied = true;
            }
        }
    }
    if (flagged) {
        check_exactly(checked);
    }
    // a flagged list was valid only with huge fields: no claim is made
    const bool increasing = !flagged && (all.out_of_order & top_bits) == 0;
    const bool one_run = !flagged && all.not_one_run == 0;
    return {all.elements * components_ * element_size_, increasing, one_run};
}

MoveSummary MovePlan::validate() const {
    if (movements_count_ == 0) {
        return {0, true, false};
    }
    MoveScan all = scan_part(0, movements_count_, nullptr);
    return summarize(&all, 1, nullptr);
}

void MovePlan::check_exactly(const mts_data_movement_t* movements) const {
    for (size_t i = 0; i < movements_count_; i++) {
        const mts_data_movement_t movement = movements[i];
        if (!in_range(movement)) {
            validate_movement(i, movement, samples_in_, samples_out_, properties_in_, properties_out_);
        }
    }
}

}  // namespace mtsarray::detail
