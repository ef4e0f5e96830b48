#ifndef MTSARRAY_HPP
#define MTSARRAY_HPP
/**
 * @file mtsarray.hpp
 * @brief The C++ API of mtsarray: a header-only layer over mtsarray.h.
 *
 * `mtsarray::Array` owns one mtsarray array (move-only, destroyed with it)
 * and throws `mtsarray::Error` where the C API returns an error, and from
 * every member of an empty (moved-from) Array. Hand an array to metatensor
 * with `std::move(array).into_metatensor()` (a metatensor::MtsArray,
 * accepted by metatensor::TensorBlock and Labels) or
 * `std::move(array).release()`. Streams, graph capture and threads are those
 * of the C function each member calls (mtsarray.h).
 */

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <metatensor.h>
#include <metatensor.hpp>

#include "mtsarray.h"

/// The C++ API of mtsarray (include/mtsarray.hpp).
namespace mtsarray {

/// Every error reported by mtsarray; a metatensor::Error so that code
/// catching metatensor's errors catches ours too.
class Error : public metatensor::Error {
public:
    /// An error with mtsarray's `message` (what() returns it).
    explicit Error(const std::string& message) : metatensor::Error(message) {}
};

namespace details {
inline void check(mts_status_t status) {
    if (status != MTS_SUCCESS) {
        const char* message = nullptr;
        mts_last_error(&message, nullptr, nullptr);
        throw Error(message == nullptr ? "mtsarray: unknown error" : message);
    }
}
}  // namespace details

/// The DLPack dtype of a C++ arithmetic type (float -> float32, ...).
template <typename T>
DLDataType dtype_of() {
    return metatensor::details::dtype_of<T>();
}

/// The CPU device.
inline DLDevice cpu() { return DLDevice{kDLCPU, 0}; }
/// CUDA device `id`.
inline DLDevice cuda(int32_t id = 0) { return DLDevice{kDLCUDA, id}; }
/// ROCm device `id`.
inline DLDevice rocm(int32_t id = 0) { return DLDevice{kDLROCM, id}; }

/// Whether arrays on `type` can be made in this process (backend compiled
/// in and a device present).
inline bool backend_available(DLDeviceType type) {
    bool available = false;
    details::check(mtsarray_backend_available(type, &available));
    return available;
}

/// The number of devices of `type` arrays can be made on, device ids 0 to
/// count - 1 (mtsarray_device_count): 1 for kDLCPU, 0 for a GPU type whose
/// backend was not compiled in or has no driver or device. Throws Error for
/// a type mtsarray has no backend for.
inline int32_t device_count(DLDeviceType type) {
    int32_t count = 0;
    details::check(mtsarray_device_count(type, &count));
    return count;
}

/// Use up to `count` threads (the caller included) for work on host memory
/// (mtsarray_set_num_threads).
inline void set_num_threads(int32_t count) {
    details::check(mtsarray_set_num_threads(count));
}

/// The number of threads host-memory work may use (mtsarray_get_num_threads).
inline int32_t num_threads() {
    int32_t count = 0;
    details::check(mtsarray_get_num_threads(&count));
    return count;
}

/// One mtsarray array, owned: destroyed with the object (or handed on with
/// release() / into_metatensor()). Move-only; every member of an empty
/// (moved-from or released) Array throws Error, has_value() excepted. The
/// work of every member is queued on the array's stream, as the C function
/// it calls says.
class Array {
public:
    /// Takes ownership of an mts_array_t made by mtsarray; throws Error (and
    /// leaves `array` alone) if it is not one of ours.
    explicit Array(mts_array_t array) {
        bool ours = false;
        details::check(mtsarray_is_mtsarray(&array, &ours));
        if (!ours) {
            throw Error("mtsarray::Array: this mts_array_t was not made by mtsarray");
        }
        array_ = array;
    }

    /// Zero-filled array (mtsarray_zeros): filled on the device's default
    /// stream without waiting; refused during a graph capture.
    static Array zeros(DLDevice device, DLDataType dtype, const std::vector<uintptr_t>& shape) {
        mts_array_t array = {};
        details::check(mtsarray_zeros(device, dtype, shape.data(), shape.size(), &array));
        return Array(array, Adopt{});
    }

    /// Array filled with `value` (mtsarray_full), whose type gives the dtype.
    template <typename T>
    static Array full(DLDevice device, const std::vector<uintptr_t>& shape, T value) {
        mts_array_t array = {};
        details::check(mtsarray_full(device, dtype_of<T>(), shape.data(), shape.size(), &value, &array));
        return Array(array, Adopt{});
    }

    /// Zero-copy view of existing memory (mtsarray_wrap): `deleter(context)`
    /// runs once when the array and all its DLPack exports are gone.
    static Array wrap(void* data, DLDevice device, DLDataType dtype, const std::vector<uintptr_t>& shape,
                      void (*deleter)(void*) = nullptr, void* context = nullptr) {
        mts_array_t array = {};
        details::check(mtsarray_wrap(data, device, dtype, shape.data(), shape.size(), deleter, context, &array));
        return Array(array, Adopt{});
    }

    /// Import a DLPack tensor (mtsarray_from_dlpack: always takes ownership
    /// of it, zero-copy when it is C-contiguous and writable).
    static Array from_dlpack(DLManagedTensorVersioned* tensor) {
        mts_array_t array = {};
        details::check(mtsarray_from_dlpack(tensor, &array));
        return Array(array, Adopt{});
    }

    ~Array() { reset(); }
    Array(const Array&) = delete;
    Array& operator=(const Array&) = delete;
    /// Takes `other`'s array; `other` is left empty.
    Array(Array&& other) noexcept : array_(other.array_) { other.array_ = {}; }
    /// Destroys this array, then takes `other`'s; `other` is left empty.
    Array& operator=(Array&& other) noexcept {
        if (this != &other) {
            reset();
            array_ = other.array_;
            other.array_ = {};
        }
        return *this;
    }

    /// Deep copy onto `device` (the `copy` callback): queued on that device's
    /// default stream after the array's work; a copy to host memory waits
    /// for the data. Refused during a graph capture (it allocates).
    Array copy(DLDevice device) const {
        mts_array_t array = {};
        const auto& self = checked();
        details::check(self.copy(self.ptr, device, &array));
        return Array(array, Adopt{});
    }

    /// Writes every element of `source` into this array (same dtype and
    /// shape, any devices), queued on this array's stream
    /// (mtsarray_copy_into). `source` may be any metatensor array.
    void copy_from(const mts_array_t& source) { details::check(mtsarray_copy_into(&checked(), &source)); }
    /// copy_from() of another mtsarray::Array.
    void copy_from(const Array& source) { copy_from(source.checked()); }

    /// The DLPack device the data lives on (the `device` callback).
    DLDevice device() const {
        DLDevice device = {};
        const auto& self = checked();
        details::check(self.device(self.ptr, &device));
        return device;
    }

    /// The DLPack type of the elements (the `dtype` callback).
    DLDataType dtype() const {
        DLDataType dtype = {};
        const auto& self = checked();
        details::check(self.dtype(self.ptr, &dtype));
        return dtype;
    }

    /// The dimensions (the `shape` callback).
    std::vector<uintptr_t> shape() const {
        const uintptr_t* shape = nullptr;
        uintptr_t count = 0;
        const auto& self = checked();
        details::check(self.shape(self.ptr, &shape, &count));
        return std::vector<uintptr_t>(shape, shape + count);
    }

    /// Pointer to the first element, on the array's device (mtsarray_data):
    /// work queued on the array may still be running.
    void* data() const {
        void* data = nullptr;
        details::check(mtsarray_data(&checked(), &data));
        return data;
    }

    /// The work stream's DLPack number (-1 on CPU).
    int64_t stream() const {
        int64_t stream = 0;
        details::check(mtsarray_get_stream(&checked(), &stream));
        return stream;
    }

    /// Queue later work on `stream` (a DLPack stream number), after the work
    /// already queued.
    void set_stream(int64_t stream) { details::check(mtsarray_set_stream(&checked(), stream)); }

    /// Block until all work queued on the array is done (mtsarray_synchronize).
    void synchronize() const { details::check(mtsarray_synchronize(&checked())); }

    /// The underlying mts_array_t, still owned by this Array (all zero for
    /// an empty Array).
    const mts_array_t& get() const noexcept { return array_; }

    /// False once the array was moved from or released: every other member
    /// then throws Error.
    bool has_value() const noexcept { return array_.ptr != nullptr; }

    /// Gives up ownership: the caller (or metatensor) must destroy it.
    mts_array_t release() && noexcept {
        auto array = array_;
        array_ = {};
        return array;
    }

    /// Hands the array to metatensor's C++ API.
    metatensor::MtsArray into_metatensor() && {
        (void)checked();
        return metatensor::MtsArray(std::move(*this).release());
    }

private:
    struct Adopt {};
    Array(mts_array_t array, Adopt) noexcept : array_(array) {}

    const mts_array_t& checked() const {
        if (array_.ptr == nullptr) {
            throw Error("mtsarray::Array: this Array is empty (moved from or released)");
        }
        return array_;
    }

    void reset() noexcept {
        if (array_.destroy != nullptr) {
            array_.destroy(array_.ptr);
        }
        array_ = {};
    }

    mts_array_t array_ = {};
};

/// A movement plan (mtsarray_move_plan_create): the movements of a
/// move_data call checked once, then executed on any arrays shaped, typed
/// and placed like the ones it was made for (the sample counts may differ
/// as far as the movements allow). Move-only; freed with the object.
class MovePlan {
public:
    /// Checks `movements` for `output` and `input` and keeps a copy of them
    /// (mtsarray_move_plan_create; `input` may be any metatensor array).
    MovePlan(const Array& output, const mts_array_t& input, const std::vector<mts_data_movement_t>& movements)
        : MovePlan(output, input, movements.data(), movements.size()) {}
    /// The plan of `movements` from one mtsarray::Array into another.
    MovePlan(const Array& output, const Array& input, const std::vector<mts_data_movement_t>& movements)
        : MovePlan(output, input.get(), movements.data(), movements.size()) {}
    /// The plan of the `count` movements at `movements` (read once).
    MovePlan(const Array& output, const mts_array_t& input, const mts_data_movement_t* movements, uintptr_t count) {
        if (!output.has_value()) {
            throw Error("mtsarray::MovePlan: the output Array is empty (moved from or released)");
        }
        details::check(mtsarray_move_plan_create(&output.get(), &input, movements, count, &plan_));
    }

    ~MovePlan() { reset(); }
    MovePlan(const MovePlan&) = delete;
    MovePlan& operator=(const MovePlan&) = delete;
    /// Takes `other`'s plan; `other` is left empty.
    MovePlan(MovePlan&& other) noexcept : plan_(other.plan_) { other.plan_ = nullptr; }
    /// Frees this plan, then takes `other`'s; `other` is left empty.
    MovePlan& operator=(MovePlan&& other) noexcept {
        if (this != &other) {
            reset();
            plan_ = other.plan_;
            other.plan_ = nullptr;
        }
        return *this;
    }

    /// move_data of the plan's movements from `input` into `output`, queued
    /// on the output's stream (mtsarray_move_plan_execute). Thread-safe.
    void execute(Array& output, const mts_array_t& input) const {
        if (plan_ == nullptr) {
            throw Error("mtsarray::MovePlan: this plan is empty (moved from)");
        }
        if (!output.has_value()) {
            throw Error("mtsarray::MovePlan: the output Array is empty (moved from or released)");
        }
        details::check(mtsarray_move_plan_execute(plan_, &output.get(), &input));
    }
    /// execute() from another mtsarray::Array.
    void execute(Array& output, const Array& input) const { execute(output, input.get()); }

    /// The C plan, still owned by this object (NULL once moved from).
    const mtsarray_move_plan_t* get() const noexcept { return plan_; }

private:
    void reset() noexcept {
        if (plan_ != nullptr) {
            (void)mtsarray_move_plan_free(plan_);
            plan_ = nullptr;
        }
    }

    mtsarray_move_plan_t* plan_ = nullptr;
};

/// A metatensor::TensorBlock whose values are `values` (metatensor.hpp's
/// TensorBlock constructor only takes its own DataArrayBase; this goes
/// through the C API instead). The block owns the array.
inline metatensor::TensorBlock make_block(Array values, const metatensor::Labels& samples,
                                          const std::vector<metatensor::Labels>& components,
                                          const metatensor::Labels& properties) {
    std::vector<const mts_labels_t*> c_components;
    for (const auto& component : components) {
        c_components.push_back(component.as_mts_labels_t());
    }
    auto* block = mts_block(std::move(values).release(), samples.as_mts_labels_t(), c_components.data(),
                            c_components.size(), properties.as_mts_labels_t());
    if (block == nullptr) {
        const char* message = nullptr;
        mts_last_error(&message, nullptr, nullptr);
        throw Error(message == nullptr ? "mts_block failed" : message);
    }
    return metatensor::TensorBlock::unsafe_from_ptr(block);
}

/// `tensor` copied to `device` with its values, gradients, keys and labels,
/// the copies queued on `stream` (a DLPack stream number for `device`; see
/// mtsarray_tensormap_to).
inline metatensor::TensorMap tensormap_to(const metatensor::TensorMap& tensor, DLDevice device, int64_t stream) {
    mts_tensormap_t* result = nullptr;
    details::check(mtsarray_tensormap_to(tensor.as_mts_tensormap_t(), device, stream, &result));
    return metatensor::TensorMap::unsafe_from_ptr(result);
}

}  // namespace mtsarray

#endif  // MTSARRAY_HPP
