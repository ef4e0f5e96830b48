#pragma once
// ReusableMovePlan: a move_data call checked once and executed many times
// (mtsarray_move_plan_t). It keeps its own copy of the movements, checked
// when it is made, and what it was made for: dtype, device, component axes
// and properties, and the samples the movements reach. An execution checks
// the arrays against these (a few comparisons), never a movement.
//
// Which backend runs it: host-accessible memory runs the CPU's prepared
// form (cpu::HostMovePlan: the runs, the single-run fast path and the
// thread split decided once). Other devices run their backend's prepared
// form (Backend::prepare_move_plan: a GPU's table in device memory, one
// launch per execution), or, when it has none or the arrays share memory,
// its move_data on the checked copy, with the same stream rules.

#include <cstddef>
#include <memory>
#include <string>

#include <metatensor.h>

#include "base/device.hpp"
#include "base/dtype.hpp"
#include "base/move_plan.hpp"
#include "base/shape.hpp"
#include "core/array.hpp"
#include "cpu/move_data.hpp"
#include "cpu/threads/parallel_split.hpp"
#include "operations/host_thread_count.hpp"

namespace mtsarray::detail {

namespace cpu {
class HostMovePlan;
}

class ReusableMovePlan {
public:
    /// Checks like move_data(output, input, movements, count) -- same dtype,
    /// same device, same component axes, every movement in range -- and
    /// keeps a copy of the movements. Throws Error naming what is wrong.
    ReusableMovePlan(const Array& output, const Array& input, const mts_data_movement_t* movements, size_t count);
    ~ReusableMovePlan();
    ReusableMovePlan(const ReusableMovePlan&) = delete;
    ReusableMovePlan& operator=(const ReusableMovePlan&) = delete;

    /// What move_data(output, input, <the movements>) does, on the output's
    /// stream after the input's work. The arrays must have the plan's dtype
    /// and device, its component axes and properties, and at least
    /// samples_needed() samples each; otherwise throws Error naming the
    /// mismatch, and nothing is written. Thread-safe (nothing is changed).
    void execute(Array& output, const Array& input) const {
        if (host_ != nullptr) {
            check_host_thread_count();
        }
        if (!matches(output, input)) {
            reject(output, input);
        }
        if (small_single_run_ && !output.overlaps(input)) {
            // inline: a small plan is mostly this fixed cost
            output.prepare_write(output.stream());
            single_copy_(static_cast<unsigned char*>(output.data()) + single_run_.output_offset,
                         static_cast<const unsigned char*>(input.data()) + single_run_.input_offset,
                         single_run_.bytes, single_run_.rows, output_row_stride_, input_row_stride_);
            return;
        }
        if (!empty_) {
            run(output, input);
        }
    }

    /// The samples each array must have: one more than the highest
    /// sample_out / sample_in of the movements (0 without movements).
    uintptr_t output_samples_needed() const noexcept { return output_samples_needed_; }
    uintptr_t input_samples_needed() const noexcept { return input_samples_needed_; }
    size_t movements_count() const noexcept { return count_; }
    /// The CPU's prepared form, or nullptr on other devices (for the tests).
    const cpu::HostMovePlan* host_plan() const noexcept { return host_; }

    /// "a plan of 3 movements for float64 arrays on cpu, output [>= 4, 2, 8],
    /// input [>= 5, 2, 6]", for messages.
    std::string describe() const;

private:
    bool matches(const Array& output, const Array& input) const noexcept {
        return same_dtype(output.dtype(), dtype_) && same_dtype(input.dtype(), dtype_) &&
               same_device(output.device(), device_) && same_device(input.device(), device_) &&
               fits(output.shape(), output_shape_, output_samples_needed_) &&
               fits(input.shape(), input_shape_, input_samples_needed_);
    }
    /// Same axes as `planned` after the first, and at least `samples`
    /// samples.
    static bool fits(const Shape& shape, const Shape& planned, uintptr_t samples) noexcept {
        if (shape.size() != planned.size() || shape.front() < samples) {
            return false;
        }
        for (size_t axis = 1; axis < shape.size(); axis++) {
            if (shape[axis] != planned[axis]) {
                return false;
            }
        }
        return true;
    }
    [[noreturn, gnu::cold, gnu::noinline]] void reject(const Array& output, const Array& input) const;
    [[gnu::noinline]] void run(Array& output, const Array& input) const;

    DLDataType dtype_;
    DLDevice device_;
    // the shapes at creation: their axes after the first are those every
    // execution must have
    Shape output_shape_;
    Shape input_shape_;
    uintptr_t output_samples_needed_ = 0;
    uintptr_t input_samples_needed_ = 0;
    size_t element_size_;
    size_t count_;
    // no movement or no row: executions write nothing
    bool empty_ = true;
    // the checked copy of the movements, which every execution uses
    std::unique_ptr<mts_data_movement_t[]> movements_;
    // the backend's form of the plan (the CPU's, for host-accessible
    // memory), destroyed with the plan
    std::unique_ptr<const BackendMovePlan> prepared_;
    const cpu::HostMovePlan* host_ = nullptr;  // prepared_, on host-accessible memory
    // host memory, movements forming one run of less than the bytes that
    // would use several threads: single_run_, copied inline
    bool small_single_run_ = false;
    MoveRun single_run_ = {0, 0, 0, 0};
    cpu::RowsCopy single_copy_ = nullptr;
    uint64_t output_row_stride_ = 0;
    uint64_t input_row_stride_ = 0;
};

}  // namespace mtsarray::detail
