// libFuzzer target: arrays another library made, whose device() and
// as_dlpack() succeed, fail with a message or fail without one (breaking
// the contract), given to the entry points that call them --
// mtsarray_copy_into (as the source), mtsarray_move_plan_create (as the
// input), the create callback (as the fill value) -- after an unrelated
// error; and fill values at every dtype's edge (the largest finite value,
// infinity, quiet and signalling NaNs with payloads, subnormals, the
// extreme integers) through create. scripts/fuzz.sh also runs it in a
// process started with an invalid MTSARRAY_NUM_THREADS.
//
// Invariants:
//   - a failing callback: MTS_CALLBACK_ERROR, and the message is exactly
//     "<function>: <step> failed: <the callback's message>", or "... failed:
//     the callback failed without saying why" when it set none: never the
//     unrelated error, never nested; nothing is written;
//   - succeeding callbacks: copy_into writes the source's bytes, a plan is
//     made, and create's array holds the fill value's bytes in every
//     element, bit for bit (NaN payloads included);
//   - an invalid thread count: every such call that got past the callbacks
//     fails naming MTSARRAY_NUM_THREADS, and nothing is written;
//   - the fill value is destroyed exactly once, the source never.

#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_check.hpp"
#include "mtsarray.h"

namespace {

enum class Outcome { succeed, fail_with_message, fail_silently };

const char* const callback_messages[] = {"the foreign library lost its device", "", "mtsarray_copy_into: spoofed",
                                         "a message\nover two lines"};

const std::string silent_reason = "the callback failed without saying why";

// Another library's CPU array: its bytes, exported through as_dlpack.
struct ForeignArray {
    DLDataType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
    Outcome device_outcome;
    Outcome export_outcome;
    const char* message;
    int destroyed = 0;

    static ForeignArray& of(const void* pointer) { return *static_cast<ForeignArray*>(const_cast<void*>(pointer)); }

    mts_status_t fail(Outcome outcome) const {
        if (outcome == Outcome::fail_with_message) {
            mts_set_last_error(message, "foreign-library", nullptr, nullptr);
        }
        return MTS_CALLBACK_ERROR;
    }

    mts_array_t as_mts_array() {
        mts_array_t array;
        std::memset(&array, 0, sizeof(array));
        array.ptr = this;
        array.destroy = [](void* pointer) { of(pointer).destroyed += 1; };
        array.device = [](const void* pointer, DLDevice* device) -> mts_status_t {
            const auto& self = of(pointer);
            if (self.device_outcome != Outcome::succeed) {
                return self.fail(self.device_outcome);
            }
            *device = DLDevice{kDLCPU, 0};
            return MTS_SUCCESS;
        };
        array.as_dlpack = [](void* pointer, DLManagedTensorVersioned** result, DLDevice, const int64_t*,
                             DLPackVersion) -> mts_status_t {
            auto& self = of(pointer);
            if (self.export_outcome != Outcome::succeed) {
                return self.fail(self.export_outcome);
            }
            auto* managed = new DLManagedTensorVersioned{};
            managed->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
            managed->deleter = [](DLManagedTensorVersioned* tensor) { delete tensor; };
            managed->dl_tensor.data = self.bytes.empty() ? nullptr : self.bytes.data();
            managed->dl_tensor.device = DLDevice{kDLCPU, 0};
            managed->dl_tensor.ndim = static_cast<int32_t>(self.shape.size());
            managed->dl_tensor.dtype = self.dtype;
            managed->dl_tensor.shape = self.shape.empty() ? nullptr : self.shape.data();
            *result = managed;
            return MTS_SUCCESS;
        };
        return array;
    }
};

struct DType {
    DLDataType dtype;
    // values at the dtype's edges, little-endian bytes of one element
    std::vector<std::vector<uint8_t>> edges;
};

template <typename T>
std::vector<uint8_t> bytes_of(T value) {
    std::vector<uint8_t> bytes(sizeof(T));
    std::memcpy(bytes.data(), &value, sizeof(T));
    return bytes;
}

const std::vector<DType>& dtypes() {
    static const std::vector<DType> all = {
        // largest finite, infinity, quiet NaN, signalling NaN with a
        // payload, smallest and largest subnormal, negative subnormal
        {{kDLFloat, 16, 1},
         {bytes_of<uint16_t>(0x7BFF), bytes_of<uint16_t>(0x7C00), bytes_of<uint16_t>(0x7E00),
          bytes_of<uint16_t>(0x7C01), bytes_of<uint16_t>(0x0001), bytes_of<uint16_t>(0x03FF),
          bytes_of<uint16_t>(0x8001)}},
        {{kDLBfloat, 16, 1},
         {bytes_of<uint16_t>(0x7F7F), bytes_of<uint16_t>(0x7F80), bytes_of<uint16_t>(0x7FC0),
          bytes_of<uint16_t>(0x7F81), bytes_of<uint16_t>(0x0001), bytes_of<uint16_t>(0x007F),
          bytes_of<uint16_t>(0x8001)}},
        {{kDLFloat, 32, 1},
         {bytes_of<uint32_t>(0x7F7FFFFF), bytes_of<uint32_t>(0x7F800000), bytes_of<uint32_t>(0x7FC00000),
          bytes_of<uint32_t>(0x7F800001), bytes_of<uint32_t>(0x00000001), bytes_of<uint32_t>(0x007FFFFF),
          bytes_of<uint32_t>(0x80000001)}},
        {{kDLFloat, 64, 1},
         {bytes_of<uint64_t>(0x7FEFFFFFFFFFFFFF), bytes_of<uint64_t>(0x7FF0000000000000),
          bytes_of<uint64_t>(0x7FF8000000000000), bytes_of<uint64_t>(0x7FF0000000000001),
          bytes_of<uint64_t>(0x0000000000000001), bytes_of<uint64_t>(0x000FFFFFFFFFFFFF),
          bytes_of<uint64_t>(0x8000000000000001)}},
        {{kDLInt, 8, 1}, {bytes_of<int8_t>(INT8_MIN), bytes_of<int8_t>(INT8_MAX)}},
        {{kDLInt, 64, 1}, {bytes_of<int64_t>(INT64_MIN), bytes_of<int64_t>(INT64_MAX)}},
        {{kDLUInt, 32, 1}, {bytes_of<uint32_t>(UINT32_MAX), bytes_of<uint32_t>(0)}},
        {{kDLBool, 8, 1}, {bytes_of<uint8_t>(0), bytes_of<uint8_t>(1)}},
        {{kDLComplex, 64, 1}, {bytes_of<uint64_t>(0x7FC000017F7FFFFF), bytes_of<uint64_t>(0x0000000180000001)}},
    };
    return all;
}

size_t element_size(DLDataType dtype) {
    return dtype.bits / 8;
}

size_t product(const std::vector<uintptr_t>& shape) {
    size_t count = 1;
    for (auto dimension : shape) {
        count *= dimension;
    }
    return count;
}

std::string last_error() {
    const char* message = nullptr;
    mts_last_error(&message, nullptr, nullptr);
    return message == nullptr ? "" : message;
}

// Host memory wrapped as an mtsarray array (wrapping is no data operation:
// it works with an invalid thread count too).
struct Wrapped {
    std::vector<uint8_t> bytes;
    mts_array_t array = {};

    Wrapped(DLDataType dtype, const std::vector<uintptr_t>& shape, uint8_t seed)
        : bytes(product(shape) * element_size(dtype)) {
        for (size_t i = 0; i < bytes.size(); i++) {
            bytes[i] = static_cast<uint8_t>(seed + i * 29);
        }
        FUZZ_CHECK(mtsarray_wrap(bytes.empty() ? nullptr : bytes.data(), DLDevice{kDLCPU, 0}, dtype, shape.data(),
                                 shape.size(), nullptr, nullptr, &array) == MTS_SUCCESS);
    }
    ~Wrapped() { array.destroy(array.ptr); }
    Wrapped(const Wrapped&) = delete;
    Wrapped& operator=(const Wrapped&) = delete;
};

Outcome consume_outcome(FuzzedDataProvider& data) {
    return static_cast<Outcome>(data.ConsumeIntegralInRange<int>(0, 2));
}

// An unrelated error left on the thread before the call: a failed mtsarray
// call, or a message another library set.
void leave_an_unrelated_error(FuzzedDataProvider& data) {
    if (data.ConsumeBool()) {
        FUZZ_CHECK(mtsarray_set_num_threads(0) == MTS_CALLBACK_ERROR);
    } else {
        mts_set_last_error("unrelated: an earlier failure", "elsewhere", nullptr, nullptr);
    }
}

// The message of a failed callback, as mtsarray must report it.
std::string expected_reason(Outcome outcome, const char* message) {
    if (outcome == Outcome::fail_silently || *message == '\0') {
        return silent_reason;
    }
    return message;
}

void check_thread_count_error(const std::string& function) {
    FUZZ_CHECK(last_error().rfind(function + ": MTSARRAY_NUM_THREADS=", 0) == 0);
}

void fuzz_copy_into(FuzzedDataProvider& data, ForeignArray& foreign, const std::vector<uintptr_t>& shape) {
    Wrapped destination(foreign.dtype, shape, data.ConsumeIntegral<uint8_t>());
    const auto before = destination.bytes;
    mts_array_t source = foreign.as_mts_array();
    leave_an_unrelated_error(data);
    const auto status = mtsarray_copy_into(&destination.array, &source);
    if (foreign.device_outcome != Outcome::succeed) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        FUZZ_CHECK(last_error() == "mtsarray_copy_into: reading the device of source failed: " +
                                       expected_reason(foreign.device_outcome, foreign.message));
        FUZZ_CHECK(destination.bytes == before);
    } else if (foreign.export_outcome != Outcome::succeed) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        FUZZ_CHECK(last_error() == "mtsarray_copy_into: exporting source through DLPack failed: " +
                                       expected_reason(foreign.export_outcome, foreign.message));
        FUZZ_CHECK(destination.bytes == before);
    } else if (invalid_thread_count()) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        check_thread_count_error("mtsarray_copy_into");
        FUZZ_CHECK(destination.bytes == before);
    } else {
        FUZZ_CHECK(status == MTS_SUCCESS);
        FUZZ_CHECK(destination.bytes == foreign.bytes);
    }
    FUZZ_CHECK(foreign.destroyed == 0);
}

void fuzz_move_plan_create(FuzzedDataProvider& data, ForeignArray& foreign, const std::vector<uintptr_t>& shape) {
    Wrapped output(foreign.dtype, shape, data.ConsumeIntegral<uint8_t>());
    const auto before = output.bytes;
    mts_array_t input = foreign.as_mts_array();
    // none, or one movement: the input's first sample into the output's last
    std::vector<mts_data_movement_t> movements;
    if (shape.size() >= 2 && shape.front() != 0 && data.ConsumeBool()) {
        movements.push_back({0, shape.front() - 1, 0, 0, shape.back()});
    }
    leave_an_unrelated_error(data);
    mtsarray_move_plan_t* plan = nullptr;
    const auto status =
        mtsarray_move_plan_create(&output.array, &input, movements.data(), movements.size(), &plan);
    if (foreign.device_outcome != Outcome::succeed) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        FUZZ_CHECK(last_error() == "mtsarray_move_plan_create: reading the device of input failed: " +
                                       expected_reason(foreign.device_outcome, foreign.message));
    } else if (foreign.export_outcome != Outcome::succeed) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        FUZZ_CHECK(last_error() == "mtsarray_move_plan_create: exporting input through DLPack failed: " +
                                       expected_reason(foreign.export_outcome, foreign.message));
    } else if (invalid_thread_count()) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        check_thread_count_error("mtsarray_move_plan_create");
    } else {
        FUZZ_CHECK(status == MTS_SUCCESS);
        FUZZ_CHECK(mtsarray_move_plan_execute(plan, &output.array, &input) == MTS_SUCCESS);
        const size_t row = product({shape.begin() + 1, shape.end()}) * element_size(foreign.dtype);
        if (!movements.empty() && row != 0) {
            // the last sample of the output is the first of the input
            FUZZ_CHECK(std::memcmp(output.bytes.data() + output.bytes.size() - row, foreign.bytes.data(), row) == 0);
        }
        FUZZ_CHECK(mtsarray_move_plan_free(plan) == MTS_SUCCESS);
        FUZZ_CHECK(mtsarray_move_plan_free(plan) == MTS_CALLBACK_ERROR);
        return;
    }
    FUZZ_CHECK(plan == nullptr);
    FUZZ_CHECK(output.bytes == before);
    FUZZ_CHECK(foreign.destroyed == 0);
}

void fuzz_create(FuzzedDataProvider& data, ForeignArray& fill, const std::vector<uintptr_t>& shape) {
    // the prototype has the fill value's dtype, or now and then another
    const auto& all = dtypes();
    const bool same_dtype = data.ConsumeIntegralInRange<int>(0, 7) != 0;
    const DLDataType prototype_dtype =
        same_dtype ? fill.dtype : all[data.ConsumeIntegralInRange<size_t>(0, all.size() - 1)].dtype;
    const bool dtypes_match = prototype_dtype.code == fill.dtype.code && prototype_dtype.bits == fill.dtype.bits;
    Wrapped prototype(prototype_dtype, {2}, 7);
    leave_an_unrelated_error(data);
    mts_array_t created = {};
    const auto status =
        prototype.array.create(prototype.array.ptr, shape.data(), shape.size(), fill.as_mts_array(), &created);
    FUZZ_CHECK(fill.destroyed == 1);
    // "mtsarray: create (<the prototype>): <what failed>"
    const auto message = last_error();
    const auto context_end = message.find("): ");
    const auto failure = context_end == std::string::npos ? std::string() : message.substr(context_end + 3);
    if (status != MTS_SUCCESS) {
        FUZZ_CHECK(message.rfind("mtsarray: create (", 0) == 0 && context_end != std::string::npos);
    }
    if (fill.export_outcome != Outcome::succeed) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        FUZZ_CHECK(failure == "reading fill_value on the CPU through its as_dlpack failed: " +
                                  expected_reason(fill.export_outcome, fill.message));
    } else if (!dtypes_match) {
        // the fill value is read and checked before the array is made
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        FUZZ_CHECK(failure.rfind("fill_value has dtype", 0) == 0);
    } else if (invalid_thread_count()) {
        FUZZ_CHECK(status == MTS_CALLBACK_ERROR);
        FUZZ_CHECK(failure.rfind("MTSARRAY_NUM_THREADS=", 0) == 0);
    } else {
        FUZZ_CHECK(status == MTS_SUCCESS);
        void* pointer = nullptr;
        FUZZ_CHECK(mtsarray_data(&created, &pointer) == MTS_SUCCESS);
        const size_t size = element_size(fill.dtype);
        const auto* values = static_cast<const uint8_t*>(pointer);
        for (size_t i = 0; i < product(shape); i++) {
            FUZZ_CHECK(std::memcmp(values + i * size, fill.bytes.data(), size) == 0);
        }
        created.destroy(created.ptr);
        return;
    }
    FUZZ_CHECK(created.ptr == nullptr);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    const LiveArraysUnchanged leak_check;
    (void)invalid_thread_count();  // decided before any call under test
    FuzzedDataProvider data(bytes, size);
    const auto& all = dtypes();
    const DType& dtype = all[data.ConsumeIntegralInRange<size_t>(0, all.size() - 1)];
    const int entry_point = data.ConsumeIntegralInRange<int>(0, 2);

    std::vector<uintptr_t> shape(data.ConsumeIntegralInRange<size_t>(entry_point == 1 ? 2 : 0, 3));
    for (auto& dimension : shape) {
        dimension = data.ConsumeIntegralInRange<uintptr_t>(0, 4);
    }

    ForeignArray foreign;
    foreign.dtype = dtype.dtype;
    foreign.device_outcome = consume_outcome(data);
    foreign.export_outcome = consume_outcome(data);
    foreign.message = callback_messages[data.ConsumeIntegralInRange<size_t>(0, 3)];
    const size_t element = element_size(dtype.dtype);
    if (entry_point == 2) {
        // a scalar fill value: an edge of its dtype, or any bytes
        foreign.bytes = data.ConsumeBool() ? dtype.edges[data.ConsumeIntegralInRange<size_t>(0, dtype.edges.size() - 1)]
                                           : data.ConsumeBytes<uint8_t>(element);
        foreign.bytes.resize(element);
    } else {
        for (auto dimension : shape) {
            foreign.shape.push_back(static_cast<int64_t>(dimension));
        }
        foreign.bytes = data.ConsumeBytes<uint8_t>(product(shape) * element);
        foreign.bytes.resize(product(shape) * element);
    }

    switch (entry_point) {
    case 0: fuzz_copy_into(data, foreign, shape); break;
    case 1: fuzz_move_plan_create(data, foreign, shape); break;
    default: fuzz_create(data, foreign, shape); break;
    }
    return 0;
}
