// libFuzzer target: move_data with a movement list that changes while the
// call runs. Two ways, chosen by the input:
//   - aliased: the list lives in the output's own memory (uint64 elements,
//     rows of 5 properties: one row is one movement), so that the call's
//     own writes overwrite movements it has not applied yet, with values
//     taken from the input (in range or not);
//   - edited: another thread writes fuzzer-chosen values (in range, just
//     out of range, huge) into fuzzer-chosen fields of the list, over and
//     over, while move_data runs.
// The output is a view of the first rows of a larger buffer: the rows after
// it are a guard that nothing may write (AddressSanitizer sees the rest).
//
// Invariants:
//   - aliased: movements are read once, before anything is written: the
//     call succeeds exactly when the list as it was at the start is valid,
//     and the output then equals a naive copy by that list; rejected, the
//     memory is unchanged;
//   - edited: the call succeeds or fails with an error naming a movement;
//     either way the guard is untouched, and the input is never written.

#include <fuzzer/FuzzedDataProvider.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fuzz_check.hpp"
#include "mtsarray.h"

namespace {

constexpr uint64_t fields = 5;
constexpr size_t guard_rows = 8;

const DLDataType uint64_dtype = {kDLUInt, 64, 1};

bool in_range(const mts_data_movement_t& m, uint64_t samples_in, uint64_t samples_out) {
    return m.sample_in < samples_in && m.sample_out < samples_out && m.properties_start_in <= fields &&
           m.properties_length <= fields - m.properties_start_in && m.properties_start_out <= fields &&
           m.properties_length <= fields - m.properties_start_out;
}

uint64_t field_value(FuzzedDataProvider& data, uint64_t limit) {
    switch (data.ConsumeIntegralInRange<int>(0, 5)) {
    case 0: return limit;                   // just out of range
    case 1: return uint64_t(1) << 40;       // far out
    case 2: return ~uint64_t(0);            // wraps around in any sum
    case 3: return data.ConsumeIntegral<uint64_t>();
    default: return limit == 0 ? 0 : data.ConsumeIntegralInRange<uint64_t>(0, limit - 1);
    }
}

mts_data_movement_t movement_for(FuzzedDataProvider& data, uint64_t samples_in, uint64_t samples_out) {
    if (data.ConsumeIntegralInRange<int>(0, 7) != 0) {
        const uint64_t length = data.ConsumeIntegralInRange<uint64_t>(0, fields);
        return {data.ConsumeIntegralInRange<uint64_t>(0, samples_in - 1),
                data.ConsumeIntegralInRange<uint64_t>(0, samples_out - 1),
                data.ConsumeIntegralInRange<uint64_t>(0, fields - length),
                data.ConsumeIntegralInRange<uint64_t>(0, fields - length), length};
    }
    return {field_value(data, samples_in), field_value(data, samples_out), field_value(data, fields),
            field_value(data, fields), field_value(data, fields + 1)};
}

mts_array_t wrap(uint64_t* data, uint64_t rows) {
    const uintptr_t shape[] = {static_cast<uintptr_t>(rows), fields};
    mts_array_t array = {};
    FUZZ_CHECK(mtsarray_wrap(data, DLDevice{kDLCPU, 0}, uint64_dtype, shape, 2, nullptr, nullptr, &array) ==
               MTS_SUCCESS);
    return array;
}

void aliased(FuzzedDataProvider& data) {
    const uint64_t samples_in = data.ConsumeIntegralInRange<uint64_t>(1, 16);
    const size_t count = data.ConsumeIntegralInRange<size_t>(1, 300);
    const uint64_t list_row = data.ConsumeIntegralInRange<uint64_t>(0, 8);
    const uint64_t samples_out = list_row + count + data.ConsumeIntegralInRange<uint64_t>(0, 16);

    // input rows: movements too, so that copying one over the list puts a
    // fuzzer-chosen movement there
    std::vector<uint64_t> input(samples_in * fields);
    for (uint64_t row = 0; row < samples_in; row++) {
        const mts_data_movement_t m = movement_for(data, samples_in, samples_out + 2);
        std::memcpy(&input[row * fields], &m, sizeof(m));
    }
    std::vector<uint64_t> memory((samples_out + guard_rows) * fields, 0);
    auto* list = reinterpret_cast<mts_data_movement_t*>(&memory[list_row * fields]);
    for (size_t i = 0; i < count; i++) {
        list[i] = movement_for(data, samples_in, samples_out);
        // mostly aimed at the list itself
        if (data.ConsumeBool() && in_range(list[i], samples_in, samples_out)) {
            list[i].sample_out = list_row + data.ConsumeIntegralInRange<uint64_t>(0, count - 1);
        }
    }
    const std::vector<mts_data_movement_t> at_start(list, list + count);
    bool valid = true;
    for (const auto& m : at_start) {
        valid &= in_range(m, samples_in, samples_out);
    }
    std::vector<uint64_t> expected = memory;
    if (valid) {
        for (const auto& m : at_start) {
            std::memcpy(&expected[m.sample_out * fields + m.properties_start_out],
                        &input[m.sample_in * fields + m.properties_start_in], m.properties_length * 8);
        }
    }
    const std::vector<uint64_t> input_before = input;

    mts_array_t output = wrap(memory.data(), samples_out);
    mts_array_t source = wrap(input.data(), samples_in);
    const mts_status_t status = output.move_data(output.ptr, source.ptr, list, count);
    FUZZ_CHECK((status == MTS_SUCCESS) == valid);
    FUZZ_CHECK(memory == expected);
    FUZZ_CHECK(input == input_before);
    source.destroy(source.ptr);
    output.destroy(output.ptr);
}

void edited(FuzzedDataProvider& data) {
    const uint64_t samples_in = data.ConsumeIntegralInRange<uint64_t>(1, 64);
    const uint64_t samples_out = data.ConsumeIntegralInRange<uint64_t>(1, 64);
    const size_t count = data.ConsumeIntegralInRange<size_t>(1, 6000);
    std::vector<mts_data_movement_t> list(count);
    for (size_t i = 0; i < count; i++) {
        const uint64_t length = (i % fields) + 1;
        list[i] = {i % samples_in, (i * 7) % samples_out, 0, fields - length, length};
    }
    struct Edit {
        size_t movement;
        size_t field;
        uint64_t value;
    };
    std::vector<Edit> edits;
    const size_t edit_count = data.ConsumeIntegralInRange<size_t>(1, 8);
    for (size_t i = 0; i < edit_count; i++) {
        edits.push_back({data.ConsumeIntegralInRange<size_t>(0, count - 1), data.ConsumeIntegralInRange<size_t>(0, 4),
                         field_value(data, i % 2 == 0 ? samples_out : fields)});
    }
    std::vector<uint64_t> input(samples_in * fields, 7);
    std::vector<uint64_t> memory((samples_out + guard_rows) * fields, 0);
    mts_array_t output = wrap(memory.data(), samples_out);
    mts_array_t source = wrap(input.data(), samples_in);

    std::atomic<bool> stop{false};
    std::thread editor([&] {
        for (size_t round = 0; !stop.load(std::memory_order_relaxed); round++) {
            const Edit& edit = edits[round % edits.size()];
            // a plain store, as a user's thread would do it (the library
            // must not read the field twice); atomic only to keep the
            // sanitizers on the library's side of the race
            auto* field = reinterpret_cast<uintptr_t*>(&list[edit.movement]) + edit.field;
            __atomic_store_n(field, round % 2 == 0 ? edit.value : uintptr_t(0), __ATOMIC_RELAXED);
        }
    });
    for (int call = 0; call < 4; call++) {
        const mts_status_t status = output.move_data(output.ptr, source.ptr, list.data(), count);
        if (status != MTS_SUCCESS) {
            const char* message = nullptr;
            mts_last_error(&message, nullptr, nullptr);
            FUZZ_CHECK(message != nullptr && std::string(message).find("movement") != std::string::npos);
        }
    }
    stop.store(true);
    editor.join();
    for (size_t i = samples_out * fields; i < memory.size(); i++) {
        FUZZ_CHECK(memory[i] == 0);
    }
    for (uint64_t value : input) {
        FUZZ_CHECK(value == 7);
    }
    source.destroy(source.ptr);
    output.destroy(output.ptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    FuzzedDataProvider data(bytes, size);
    LiveArraysUnchanged live_arrays;
    const int threads = data.ConsumeIntegralInRange<int>(1, 3);
    FUZZ_CHECK(mtsarray_set_num_threads(threads) == MTS_SUCCESS);
    if (data.ConsumeBool()) {
        aliased(data);
    } else {
        edited(data);
    }
    return 0;
}
