#pragma once
// MtsArray: the Python object around one mtsarray `mts_array_t`.
//
// Ownership: an owning MtsArray destroys its array exactly once, when the
// Python object dies (there is no explicit destroy to call twice). A view
// (`borrow`) reads an array that belongs to someone else -- libmetatensor,
// for the values of a TensorBlock -- keeps that owner alive, and never
// destroys it. DLPack exports hold a reference to the data, not to the
// MtsArray, so they outlive it.
//
// Threads: operations that may take long (move_data, copies, exports to the
// host, synchronize) release the GIL. mtsarray forbids changing an array's
// metadata (reshape, swap_axes, its stream) while another thread uses it;
// these raise instead when an operation with the GIL released is running.

#include <cstdint>
#include <string>
#include <vector>

#include <metatensor.h>
#include <nanobind/nanobind.h>

#include "mtsarray.h"

namespace mtsarray_python {

class Array {
public:
    /// Takes ownership of `raw` (an array made by mtsarray).
    static Array adopt(mts_array_t raw) noexcept;
    /// A view of `raw`, an mtsarray array owned by `owner`; raises
    /// mtsarray.Error when `raw` was not made by mtsarray.
    static Array borrow(const mts_array_t& raw, nanobind::object owner);

    Array(Array&& other) noexcept;
    Array& operator=(Array&&) = delete;
    Array(const Array&) = delete;
    ~Array();

    const mts_array_t& raw() const noexcept { return raw_; }
    /// Gives the array to a new owner, which destroys it (libmetatensor, for
    /// the values of a block). A stream object given to set_stream is no
    /// longer kept alive: the new owner's caller keeps it.
    mts_array_t release() noexcept;
    bool is_view() const noexcept { return !owned_; }

    // ---- metadata
    nanobind::tuple shape() const;
    size_t ndim() const;
    nanobind::object dtype() const;
    DLDataType dl_dtype() const;
    DLDevice dl_device() const;
    std::string device() const;
    int64_t stream() const;
    void set_stream(nanobind::handle stream);
    /// The stream as a DLPack number already resolved for this array's
    /// device; `stream_object` (or None) is kept alive as long as the array.
    void set_stream(int64_t number, nanobind::object stream_object);
    uintptr_t data_pointer() const;
    std::string repr() const;

    // ---- operations
    void synchronize() const;
    Array copy(nanobind::handle device) const;
    void move_data(const Array& input, nanobind::handle movements);
    /// mtsarray_copy_into(this, source): `source` an MtsArray, or any
    /// object speaking DLPack (read through a zero-copy import).
    void copy_from(nanobind::handle source);
    /// mtsarray_move_plan_create for this output, `input` and `movements`
    /// (read as move_data reads them); the caller owns the plan.
    mtsarray_move_plan_t* create_move_plan(const Array& input, nanobind::handle movements) const;
    /// mtsarray_move_plan_execute(plan, this, input), the GIL released.
    void execute_move_plan(const mtsarray_move_plan_t* plan, const Array& input);
    void reshape(nanobind::handle shape);
    void swap_axes(int64_t axis_1, int64_t axis_2);

    // ---- DLPack (array API standard 2024.12)
    nanobind::object dlpack(nanobind::handle stream, nanobind::handle max_version, nanobind::handle dl_device,
                            nanobind::handle copy) const;
    nanobind::tuple dlpack_device() const;

    /// Runs move_data through the C callback `iterations` times with no
    /// Python in between and returns the mean seconds per call (for
    /// bench/python_overhead.py to compare with the Python method).
    double time_move_data(const Array& input, nanobind::handle movements, int64_t iterations);

private:
    Array() = default;
    /// Raises unless this array is owned and no GIL-free operation runs on it.
    void check_metadata_writable(const char* operation) const;

    friend class Busy;
    mts_array_t raw_ = {};
    bool owned_ = false;
    nanobind::object owner_;          // keeps a view's owner alive
    nanobind::object stream_object_;  // a stream object given to set_stream, kept alive
    mutable int busy_ = 0;            // operations running with the GIL released
};

/// Makes an MtsArray from any object speaking DLPack (or a DLPack capsule).
Array from_dlpack(nanobind::handle object, nanobind::handle stream);

/// The MtsArray that `object` is, for the argument `name` of `call`
/// ("MtsArray.move_data", "input"); raises TypeError otherwise, saying how
/// to make one (mtsarray.from_dlpack) -- nanobind's own message ("incompatible
/// function arguments") names neither.
Array& array_argument(nanobind::handle object, const char* call, const char* name);

}  // namespace mtsarray_python
