// libFuzzer target: mtsarray_from_dlpack (and the from_dlpack callback) with
// malformed DLPack tensors: negative or huge ndim, NULL shape, negative or
// huge dimensions, zero / negative / overlapping strides, byte_offset,
// unknown device and dtype codes, other versions, READ_ONLY and other flags.
//
// The inputs stay memory-safe: the fuzzer allocates the data buffer itself,
// large enough for every element the shape, strides and byte_offset address,
// and skips well-formed tensors that would address more than a few MiB. So a
// rejection is about validation, and an accepted tensor never reads out of
// bounds (ASan checks that the library does not either).
//
// Invariants, checked against a naive model of the contract:
//   - accepted exactly when the tensor is well-formed (version 1.x,
//     ndim >= 0, shape not NULL, dimensions >= 0, no byte-size
//     overflow, data not NULL unless empty, a stored dtype, the CPU device);
//   - rejected: the deleter ran exactly once, an error is set;
//   - accepted: the array's shape and dtype are the tensor's, its values
//     equal a naive strided read of the buffer, and the deleter runs exactly
//     once: at once for a copy (strided or READ_ONLY), when the array is
//     destroyed for a zero-copy import.

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

constexpr size_t max_addressed_bytes = size_t(4) << 20;

struct Producer {
    DLManagedTensorVersioned managed = {};
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;
    std::vector<uint8_t> buffer;
    int deleted = 0;
};

// The producer (and its buffer) outlive the deleter call: the deleter only
// counts, so that the fuzzer can check it ran exactly once.
void count_deleter(DLManagedTensorVersioned* tensor) {
    static_cast<Producer*>(tensor->manager_ctx)->deleted += 1;
}

// Every dtype mtsarray stores (code, bits); lanes must be 1.
bool stored_dtype(DLDataType dtype) {
    if (dtype.lanes != 1) {
        return false;
    }
    switch (dtype.code) {
    case kDLInt:
    case kDLUInt: return dtype.bits == 8 || dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64;
    case kDLFloat: return dtype.bits == 16 || dtype.bits == 32 || dtype.bits == 64;
    case kDLBfloat: return dtype.bits == 16;
    case kDLComplex: return dtype.bits == 64 || dtype.bits == 128;
    case kDLBool: return dtype.bits == 8;
    default: return dtype.code >= kDLFloat8_e3m4 && dtype.code <= kDLFloat8_e8m0fnu && dtype.bits == 8;
    }
}

DLDataType make_dtype(FuzzedDataProvider& data) {
    static const DLDataType valid[] = {
        {kDLInt, 8, 1},   {kDLInt, 32, 1},    {kDLInt, 64, 1},     {kDLUInt, 16, 1},       {kDLFloat, 16, 1},
        {kDLFloat, 32, 1}, {kDLFloat, 64, 1}, {kDLBfloat, 16, 1},  {kDLComplex, 64, 1},    {kDLComplex, 128, 1},
        {kDLBool, 8, 1},  {kDLFloat8_e4m3fn, 8, 1}, {kDLFloat8_e8m0fnu, 8, 1},
    };
    if (data.ConsumeIntegralInRange<int>(0, 4) != 0) {
        return valid[data.ConsumeIntegralInRange<size_t>(0, sizeof(valid) / sizeof(valid[0]) - 1)];
    }
    DLDataType dtype;
    dtype.code = data.ConsumeIntegral<uint8_t>();
    dtype.bits = data.ConsumeBool() ? static_cast<uint8_t>(8 * data.ConsumeIntegralInRange<int>(0, 17))
                                    : data.ConsumeIntegral<uint8_t>();
    dtype.lanes = data.ConsumeIntegralInRange<int>(0, 3) == 0 ? data.ConsumeIntegral<uint16_t>() : 1;
    return dtype;
}

int64_t make_dimension(FuzzedDataProvider& data) {
    switch (data.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return -data.ConsumeIntegralInRange<int64_t>(1, 3);
    case 1: return std::numeric_limits<int64_t>::max();
    case 2: return std::numeric_limits<int64_t>::min();
    case 3: return int64_t(1) << data.ConsumeIntegralInRange<int>(20, 62);
    default: return data.ConsumeIntegralInRange<int64_t>(0, 4);
    }
}

int64_t make_stride(FuzzedDataProvider& data) {
    switch (data.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: return std::numeric_limits<int64_t>::max();
    case 1: return std::numeric_limits<int64_t>::min();
    case 2: return 0;  // broadcast
    default: return data.ConsumeIntegralInRange<int64_t>(-12, 12);  // negative, overlapping, gaps
    }
}

size_t element_count(const std::vector<int64_t>& shape, bool& overflow) {
    overflow = false;
    unsigned __int128 count = 1;
    for (auto dimension : shape) {
        if (dimension == 0) {
            return 0;
        }
    }
    for (auto dimension : shape) {
        count *= static_cast<unsigned __int128>(dimension);
        if (count > std::numeric_limits<uint64_t>::max()) {
            overflow = true;
            return 0;
        }
    }
    return static_cast<size_t>(count);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
    const LiveArraysUnchanged leak_check;
    FuzzedDataProvider data(bytes, size);
    Producer producer;
    auto& tensor = producer.managed;

    tensor.version.major = data.ConsumeIntegralInRange<int>(0, 15) == 0 ? data.ConsumeIntegral<uint32_t>() : 1;
    tensor.version.minor = data.ConsumeIntegral<uint8_t>();
    tensor.manager_ctx = &producer;
    tensor.deleter = count_deleter;
    switch (data.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: tensor.flags = DLPACK_FLAG_BITMASK_READ_ONLY; break;
    case 1: tensor.flags = DLPACK_FLAG_BITMASK_IS_COPIED; break;
    case 2: tensor.flags = data.ConsumeIntegral<uint64_t>(); break;
    default: tensor.flags = 0;
    }

    // ndim: mostly small, sometimes hostile
    int32_t ndim = 0;
    switch (data.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: ndim = -data.ConsumeIntegralInRange<int32_t>(1, std::numeric_limits<int32_t>::max()); break;
    case 1: ndim = std::numeric_limits<int32_t>::min(); break;
    case 2: ndim = data.ConsumeIntegralInRange<int32_t>(63, 66); break;
    case 3: ndim = data.ConsumeIntegralInRange<int32_t>(100, 300); break;
    case 4: ndim = std::numeric_limits<int32_t>::max(); break;
    default: ndim = data.ConsumeIntegralInRange<int32_t>(0, 5);
    }
    // ndim entries exist, as DLPack requires of a producer (there is no
    // axis limit but int32's), except for INT32_MAX axes, which come with a
    // NULL shape (rejected before anything is read)
    const bool too_many_to_store = ndim > 300;
    const size_t stored_axes = ndim < 0 || too_many_to_store ? 0 : static_cast<size_t>(ndim);
    const bool null_shape = too_many_to_store || data.ConsumeIntegralInRange<int>(0, 15) == 0;
    const bool null_strides = data.ConsumeBool();
    const bool contiguous_strides = !null_strides && data.ConsumeBool();
    for (size_t axis = 0; axis < stored_axes; axis++) {
        // a 64-axis tensor made of size-1 axes is fine; keep it addressable
        producer.shape.push_back(stored_axes > 6 ? (data.ConsumeIntegralInRange<int>(0, 31) == 0 ? make_dimension(data) : 1)
                                                 : make_dimension(data));
        producer.strides.push_back(make_stride(data));
    }
    if (contiguous_strides) {  // explicit C-contiguous strides
        uint64_t stride = 1;  // wraps around for huge shapes: those are skipped below
        for (size_t axis = stored_axes; axis-- > 0;) {
            producer.strides[axis] = static_cast<int64_t>(stride);
            stride *= producer.shape[axis] > 0 ? static_cast<uint64_t>(producer.shape[axis]) : 1;
        }
    }
    tensor.dl_tensor.ndim = ndim;
    tensor.dl_tensor.shape = null_shape ? nullptr : producer.shape.data();
    tensor.dl_tensor.strides = null_strides ? nullptr : producer.strides.data();
    tensor.dl_tensor.dtype = make_dtype(data);

    switch (data.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: tensor.dl_tensor.device = DLDevice{static_cast<DLDeviceType>(data.ConsumeIntegral<uint8_t>()), 0}; break;
    case 1: tensor.dl_tensor.device = DLDevice{kDLCPU, data.ConsumeIntegral<int32_t>()}; break;
    case 2: tensor.dl_tensor.device = DLDevice{kDLCUDA, 0}; break;
    case 3: tensor.dl_tensor.device = DLDevice{kDLCUDAHost, 0}; break;
    default: tensor.dl_tensor.device = DLDevice{kDLCPU, 0};
    }

    // ---- the model --------------------------------------------------------
    const DLTensor& dl = tensor.dl_tensor;
    bool well_formed = tensor.version.major == 1 && dl.ndim >= 0 &&
                       (dl.ndim == 0 || dl.shape != nullptr) && stored_dtype(dl.dtype) &&
                       dl.device.device_type == kDLCPU && dl.device.device_id == 0;
    const size_t element_size = stored_dtype(dl.dtype) ? dl.dtype.bits / 8 : 1;
    std::vector<int64_t> shape = well_formed ? std::vector<int64_t>(producer.shape.begin(), producer.shape.begin() + dl.ndim)
                                             : std::vector<int64_t>();
    for (auto dimension : shape) {
        well_formed = well_formed && dimension >= 0;
    }
    bool overflow = false;
    const size_t count = well_formed ? element_count(shape, overflow) : 0;
    if (overflow || (well_formed && count > std::numeric_limits<size_t>::max() / element_size)) {
        well_formed = false;  // the byte size overflows: rejected
    }

    // the elements the tensor addresses, relative to data + byte_offset
    __int128 lowest = 0;
    __int128 highest = 0;
    if (well_formed && count != 0) {
        for (size_t axis = 0; axis < shape.size(); axis++) {
            const __int128 stride = dl.strides == nullptr ? 0 : dl.strides[axis];
            const __int128 extent = stride * (shape[axis] - 1);
            if (dl.strides == nullptr) {
                continue;
            }
            (extent < 0 ? lowest : highest) += extent;
        }
        if (dl.strides == nullptr) {
            highest = static_cast<__int128>(count) - 1;
        }
        const __int128 span = (highest - lowest + 1) * static_cast<__int128>(element_size);
        if (span > static_cast<__int128>(max_addressed_bytes) || count > max_addressed_bytes) {
            return 0;  // well-formed but too large to back with memory here
        }
    }
    const bool null_data = data.ConsumeIntegralInRange<int>(0, 15) == 0;
    if (well_formed && count != 0 && null_data) {
        well_formed = false;
    }
    // the producer's buffer: byte_offset bytes, then every addressed element
    const uint64_t byte_offset = data.ConsumeIntegralInRange<uint64_t>(0, 64);
    const size_t span = count == 0 ? 0 : static_cast<size_t>((highest - lowest + 1) * static_cast<__int128>(element_size));
    producer.buffer.resize(byte_offset + static_cast<size_t>(-lowest) * element_size + span + 1);
    const auto seed = data.ConsumeIntegral<uint8_t>();
    for (size_t i = 0; i < producer.buffer.size(); i++) {
        producer.buffer[i] = static_cast<uint8_t>(seed * 7 + i * 29 + (i >> 7));
    }
    // data + byte_offset is the first element; lower (negative-stride)
    // elements are below it, still inside the buffer
    tensor.dl_tensor.data = null_data ? nullptr : producer.buffer.data() + static_cast<size_t>(-lowest) * element_size;
    tensor.dl_tensor.byte_offset = byte_offset;

    // ---- the call ---------------------------------------------------------
    mts_array_t array = {};
    mts_status_t status;
    const bool through_callback = data.ConsumeIntegralInRange<int>(0, 3) == 0;
    if (through_callback) {
        mts_array_t prototype = {};
        const uintptr_t one = 1;
        FUZZ_CHECK(mtsarray_zeros(DLDevice{kDLCPU, 0}, DLDataType{kDLFloat, 64, 1}, &one, 1, &prototype) == MTS_SUCCESS);
        status = prototype.from_dlpack(prototype.ptr, &tensor, &array);
        prototype.destroy(prototype.ptr);
    } else {
        status = mtsarray_from_dlpack(&tensor, &array);
    }

    if (!well_formed) {
        FUZZ_CHECK(status != MTS_SUCCESS);
        FUZZ_CHECK(producer.deleted == 1);
        FUZZ_CHECK(array.ptr == nullptr);
        return 0;
    }
    FUZZ_CHECK(status == MTS_SUCCESS);
    FUZZ_CHECK(producer.deleted <= 1);

    // shape and dtype
    const uintptr_t* actual_shape = nullptr;
    uintptr_t actual_ndim = 0;
    FUZZ_CHECK(array.shape(array.ptr, &actual_shape, &actual_ndim) == MTS_SUCCESS);
    FUZZ_CHECK(actual_ndim == shape.size());
    for (size_t axis = 0; axis < shape.size(); axis++) {
        FUZZ_CHECK(actual_shape[axis] == static_cast<uintptr_t>(shape[axis]));
    }
    DLDataType actual_dtype = {};
    FUZZ_CHECK(array.dtype(array.ptr, &actual_dtype) == MTS_SUCCESS);
    FUZZ_CHECK(actual_dtype.code == dl.dtype.code && actual_dtype.bits == dl.dtype.bits && actual_dtype.lanes == 1);

    // values: a naive strided read of the producer's buffer
    if (count != 0) {
        void* pointer = nullptr;
        FUZZ_CHECK(mtsarray_data(&array, &pointer) == MTS_SUCCESS);
        const auto* first = static_cast<const uint8_t*>(dl.data) + dl.byte_offset;
        std::vector<int64_t> index(shape.size(), 0);
        for (size_t linear = 0; linear < count; linear++) {
            int64_t offset = 0;
            if (dl.strides == nullptr) {
                offset = static_cast<int64_t>(linear);
            } else {
                for (size_t axis = 0; axis < shape.size(); axis++) {
                    offset += index[axis] * dl.strides[axis];
                }
            }
            FUZZ_CHECK(std::memcmp(static_cast<const uint8_t*>(pointer) + linear * element_size,
                                   first + offset * static_cast<int64_t>(element_size), element_size) == 0);
            for (size_t axis = shape.size(); axis-- > 0;) {
                if (++index[axis] < shape[axis]) {
                    break;
                }
                index[axis] = 0;
            }
        }
    }

    array.destroy(array.ptr);
    FUZZ_CHECK(producer.deleted == 1);
    return 0;
}
