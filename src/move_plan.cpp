#include "move_plan.hpp"

#include <cstddef>
#include <cstring>
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

void MovePlan::reject(const std::vector<uintptr_t>& output_shape, const std::vector<uintptr_t>& input_shape,
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

namespace {

// Two 64-bit lanes (GCC and Clang vector extensions: SSE2 on x86-64, NEON
// on AArch64, plain code elsewhere): a movement's (sample_in, sample_out)
// and (properties_start_in, properties_start_out) are each one load.
typedef uint64_t Lanes __attribute__((vector_size(16)));

inline Lanes load_lanes(const uintptr_t* first) noexcept {
    static_assert(sizeof(uintptr_t) == sizeof(uint64_t), "movement fields are 64-bit");
    Lanes lanes;
    std::memcpy(&lanes, first, sizeof(lanes));
    return lanes;
}

}  // namespace

MoveSummary MovePlan::validate() const {
    // One pass without a branch per movement. With every field and limit
    // below 2^62, `limit - value` has its two top bits set exactly when
    // value > limit, and clear otherwise: or-ing the differences (and the
    // fields themselves, so that larger ones flag too) into one word flags
    // any movement out of range. The sample limits are samples - 1, so an
    // empty sample axis flags as well. That is conservative: a flagged list
    // gets the exact check, which names the first bad movement or finds
    // that all are valid after all (huge but valid fields). Both sides of a
    // movement are checked at once, in two lanes. This loop is most of the
    // cost of each movement of a small call.
    static_assert(offsetof(mts_data_movement_t, sample_out) == offsetof(mts_data_movement_t, sample_in) + 8 &&
                      offsetof(mts_data_movement_t, properties_start_out) ==
                          offsetof(mts_data_movement_t, properties_start_in) + 8,
                  "the in and out fields of a movement are neighbours");
    constexpr uint64_t top_bits = uint64_t(3) << 62;
    const Lanes last_samples = {samples_in_ - 1, samples_out_ - 1};
    const Lanes properties = {properties_in_, properties_out_};
    Lanes flags = (last_samples | properties) & top_bits;
    const mts_data_movement_t* movement = movements_;
    const mts_data_movement_t* const end = movements_ + movements_count_;
    if (movement == end) {
        return {0, true, false};
    }
    // sample_out - (previous sample_out + 1), or-ed: 0 when every output
    // sample follows the one before, top bit set when one did not increase
    uint64_t out_of_order = 0;
    uint64_t next_sample_out = movement->sample_out;
    uint64_t elements = 0;
    for (; movement != end; movement++) {
        const Lanes samples = load_lanes(&movement->sample_in);
        const Lanes starts = load_lanes(&movement->properties_start_in);
        const uint64_t length = movement->properties_length;
        const Lanes lengths = {length, length};
        flags |= (last_samples - samples) | (properties - (starts + lengths)) | samples | starts | lengths;
        out_of_order |= movement->sample_out - next_sample_out;
        next_sample_out = movement->sample_out + 1;
        elements += length;
    }
    const bool flagged = ((flags[0] | flags[1]) & top_bits) != 0;
    if (flagged) {
        check_exactly();
    }
    // a flagged list was valid only with huge fields: no claim is made
    const bool increasing = !flagged && (out_of_order >> 63) == 0;
    // consecutive output samples (gathers into a new array mostly have
    // them): one run if the input side and the ranges follow too, which a
    // second pass checks, stopping at the first break
    const bool one_run = !flagged && out_of_order == 0 && continues_on_input();
    return {elements * components_ * element_size_, increasing, one_run};
}

bool MovePlan::continues_on_input() const noexcept {
    const mts_data_movement_t& first = movements_[0];
    for (size_t i = 1; i < movements_count_; i++) {
        const mts_data_movement_t& movement = movements_[i];
        if (movement.sample_in != first.sample_in + i || movement.properties_start_in != first.properties_start_in ||
            movement.properties_start_out != first.properties_start_out ||
            movement.properties_length != first.properties_length) {
            return false;
        }
    }
    return true;
}

void MovePlan::check_exactly() const {
    for (size_t i = 0; i < movements_count_; i++) {
        if (!in_range(movements_[i])) {
            validate_movement(i, movements_[i], samples_in_, samples_out_, properties_in_, properties_out_);
        }
    }
}

}  // namespace mtsarray::detail
