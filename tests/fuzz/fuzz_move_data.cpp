// libFuzzer target: move_data plans. Random shapes (0-3 component axes,
// small sizes), random element sizes, random and hostile movement lists
// (out-of-range samples and properties, start + length overflowing near
// SIZE_MAX, huge counts with a NULL pointer, foreign inputs, the same array
// as input and output).
//
// Invariants, checked against a naive model of the contract:
//   - the call is accepted exactly when every movement is valid for both
//     shapes (and the shapes / dtypes / inputs are compatible);
//   - rejected: the output is bit-for-bit unchanged and an error is set;
//   - accepted: the output equals a naive element-by-element copy from a
//     snapshot of the input, movements applied in order;
//   - in a process started with an invalid MTSARRAY_NUM_THREADS
//     (scripts/fuzz.sh runs one): every call on two arrays of ours fails
//     naming the variable, whatever its movements, and writes nothing.

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "fuzz_check.hpp"
#include "mtsarray.h"

namespace {

DLDataType dtype_for(size_t element_size) {
    switch (element_size) {
    case 1: return DLDataType{kDLUInt, 8, 1};
    case 2: return DLDataType{kDLInt, 16, 1};
    case 4: return DLDataType{kDLFloat, 32, 1};
    case 8: return DLDataType{kDLFloat, 64, 1};
    default: return DLDataType{kDLComplex, 128, 1};
    }
}

size_t product(const std::vector<uintptr_t>& shape) {
    size_t count = 1;
    for (auto dimension : shape) {
        count *= dimension;
    }
    return count;
}

// Host memory wrapped as an mtsarray array: ASan sees any read or write
// past its end, and wrapping works with an invalid thread count too.
struct Array {
    std::vector<uint8_t> storage;
    mts_array_t handle = {};
    std::vector<uintptr_t> shape;
    size_t element_size = 0;

    Array(std::vector<uintptr_t> dimensions, size_t size, FuzzedDataProvider& data)
        : storage(product(dimensions) * size), shape(std::move(dimensions)), element_size(size) {
        // a cheap, position-dependent pattern seeded from the input, so that
        // every element is distinguishable
        const auto seed = data.ConsumeIntegral<uint8_t>();
        for (size_t i = 0; i < storage.size(); i++) {
            storage[i] = static_cast<uint8_t>(seed + i * 131 + (i >> 8));
        }
        FUZZ_CHECK(mtsarray_wrap(storage.empty() ? nullptr : storage.data(), DLDevice{kDLCPU, 0}, dtype_for(size),
                                 shape.data(), shape.size(), nullptr, nullptr, &handle) == MTS_SUCCESS);
    }
    ~Array() { handle.destroy(handle.ptr); }
    Array(const Array&) = delete;
    Array& operator=(const Array&) = delete;

    size_t nbytes() const { return product(shape) * element_size; }
    void* pointer() const {
        void* data = nullptr;
        FUZZ_CHECK(mtsarray_data(&handle, &data) == MTS_SUCCESS);
        return data;
    }
    std::vector<uint8_t> bytes() const {
        const auto* begin = static_cast<const uint8_t*>(pointer());
        return std::vector<uint8_t>(begin, begin + nbytes());
    }
};

uintptr_t hostile_value(FuzzedDataProvider& data, uintptr_t limit) {
    constexpr uintptr_t max = std::numeric_limits<uintptr_t>::max();
    switch (data.ConsumeIntegralInRange<int>(0, 9)) {
    case 0: return limit;                                        // one past the end
    case 1: return max;                                          // SIZE_MAX
    case 2: return max - data.ConsumeIntegralInRange<uintptr_t>(0, 8);
    case 3: return data.ConsumeIntegral<uintptr_t>();            // anything
    case 4: return limit + data.ConsumeIntegralInRange<uintptr_t>(0, 4);
    default: return limit == 0 ? 0 : data.ConsumeIntegralInRange<uintptr_t>(0, limit - 1);  // valid
    }
}

// A movement: usually valid, with hostile fields now and then.
mts_data_movement_t make_movement(FuzzedDataProvider& data, const Array& output, const Array& input) {
    const uintptr_t samples_in = input.shape.front();
    const uintptr_t samples_out = output.shape.front();
    const uintptr_t properties_in = input.shape.back();
    const uintptr_t properties_out = output.shape.back();
    mts_data_movement_t movement;
    const bool hostile = data.ConsumeIntegralInRange<int>(0, 3) == 0;
    if (!hostile) {
        const uintptr_t longest = std::min(properties_in, properties_out);
        movement.properties_length = data.ConsumeIntegralInRange<uintptr_t>(0, longest);
        movement.sample_in = samples_in == 0 ? 0 : data.ConsumeIntegralInRange<uintptr_t>(0, samples_in - 1);
        movement.sample_out = samples_out == 0 ? 0 : data.ConsumeIntegralInRange<uintptr_t>(0, samples_out - 1);
        movement.properties_start_in =
            data.ConsumeIntegralInRange<uintptr_t>(0, properties_in - movement.properties_length);
        movement.properties_start_out =
            data.ConsumeIntegralInRange<uintptr_t>(0, properties_out - movement.properties_length);
        return movement;
    }
    movement.sample_in = hostile_value(data, samples_in);
    movement.sample_out = hostile_value(data, samples_out);
    movement.properties_start_in = hostile_value(data, properties_in);
    movement.properties_start_out = hostile_value(data, properties_out);
    movement.properties_length = hostile_value(data, std::min(properties_in, properties_out) + 1);
    return movement;
}

bool movement_valid(const mts_data_movement_t& m, const std::vector<uintptr_t>& output,
                    const std::vector<uintptr_t>& input) {
    // in unbounded arithmetic, not the library's subtraction form
    const unsigned __int128 end_in = static_cast<unsigned __int128>(m.properties_start_in) + m.properties_length;
    const unsigned __int128 end_out = static_cast<unsigned __int128>(m.properties_start_out) + m.properties_length;
    return m.sample_in < input.front() && m.sample_out < output.front() && end_in <= input.back() &&
           end_out <= output.back();
}

std::vector<uintptr_t> make_shape(FuzzedDataProvider& data, const std::vector<uintptr_t>& components) {
    std::vector<uintptr_t> shape;
    shape.push_back(data.ConsumeIntegralInRange<uintptr_t>(0, 6));
    shape.insert(shape.end(), components.begin(), components.end());
    shape.push_back(data.ConsumeIntegralInRange<uintptr_t>(0, 7));
    return shape;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    const LiveArraysUnchanged leak_check;
    const bool invalid_threads = invalid_thread_count();
    FuzzedDataProvider data(bytes, size);
    const size_t element_sizes[] = {1, 2, 4, 8, 16};
    const size_t element_size = element_sizes[data.ConsumeIntegralInRange<int>(0, 4)];

    std::vector<uintptr_t> components(data.ConsumeIntegralInRange<size_t>(0, 3));
    for (auto& dimension : components) {
        dimension = data.ConsumeIntegralInRange<uintptr_t>(0, 3);
    }
    auto output_components = components;
    const int variant = data.ConsumeIntegralInRange<int>(0, 15);
    if (variant == 0 && !output_components.empty()) {
        output_components.back() += 1;  // different component axes: rejected
    } else if (variant == 1) {
        output_components.push_back(1);  // a different number of axes: rejected
    }
    const bool other_dtype = variant == 2;
    const bool in_place = variant >= 12;  // the snapshot path
    const bool foreign_input = variant == 3;

    Array output(make_shape(data, output_components), element_size, data);
    Array separate_input(make_shape(data, components), other_dtype ? (element_size == 8 ? 4 : 8) : element_size, data);
    const Array& input = in_place ? output : separate_input;

    std::vector<mts_data_movement_t> movements;
    const mts_data_movement_t* movement_pointer = nullptr;
    uintptr_t count = data.ConsumeIntegralInRange<uintptr_t>(0, 24);
    const bool null_movements = data.ConsumeIntegralInRange<int>(0, 31) == 0;
    if (null_movements) {
        // NULL with a count: huge, small or zero
        count = data.ConsumeBool() ? std::numeric_limits<uintptr_t>::max() - data.ConsumeIntegralInRange<uintptr_t>(0, 3)
                                   : data.ConsumeIntegralInRange<uintptr_t>(0, 3);
    } else {
        for (uintptr_t i = 0; i < count; i++) {
            movements.push_back(make_movement(data, output, input));
        }
        movement_pointer = movements.empty() ? nullptr : movements.data();
    }

    // the model of the contract
    const bool same_components = input.shape.size() == output.shape.size() &&
                                 std::equal(input.shape.begin() + 1, input.shape.end() - 1, output.shape.begin() + 1);
    bool accept = same_components && input.element_size == output.element_size && !foreign_input &&
                  (movement_pointer != nullptr || count == 0);
    for (const auto& movement : movements) {
        accept = accept && movement_valid(movement, output.shape, input.shape);
    }

    const auto input_before = input.bytes();
    const auto output_before = output.bytes();
    mts_data_movement_t stack_object = {};
    const void* input_handle = foreign_input ? static_cast<const void*>(&stack_object) : input.handle.ptr;

    const auto status = output.handle.move_data(output.handle.ptr, input_handle, movement_pointer, count);

    // rejected: an invalid thread count (once the input is known to be
    // ours), or what the model refuses
    const char* expected_error = invalid_threads && !foreign_input ? "): MTSARRAY_NUM_THREADS="
                                 : !accept                         ? "move_data"
                                                                   : nullptr;
    if (expected_error != nullptr) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        FUZZ_CHECK(output.bytes() == output_before);
        const char* message = nullptr;
        mts_last_error(&message, nullptr, nullptr);
        FUZZ_CHECK(message != nullptr && std::strstr(message, expected_error) != nullptr);
        return 0;
    }
    FUZZ_CHECK(status == MTS_SUCCESS);
    if (!in_place) {
        FUZZ_CHECK(input.bytes() == input_before);
    }
    std::vector<uint8_t> expected = output_before;
    size_t rows = 1;
    for (auto dimension : components) {
        rows *= dimension;
    }
    const size_t properties_in = input.shape.back();
    const size_t properties_out = output.shape.back();
    for (const auto& m : movements) {
        for (size_t c = 0; c < rows; c++) {
            for (size_t x = 0; x < m.properties_length; x++) {
                const size_t from = ((m.sample_in * rows + c) * properties_in + m.properties_start_in + x) * element_size;
                const size_t to = ((m.sample_out * rows + c) * properties_out + m.properties_start_out + x) * element_size;
                std::memcpy(&expected[to], &input_before[from], element_size);
            }
        }
    }
    FUZZ_CHECK(output.bytes() == expected);
    return 0;
}
