#include "operations/reusable_move_plan.hpp"

#include <algorithm>
#include <new>
#include <string>

#include "base/device.hpp"
#include "base/dtype.hpp"
#include "base/error.hpp"
#include "core/buffer.hpp"
#include "cpu/move_data.hpp"
#include "cpu/host_move_plan.hpp"

namespace mtsarray::detail {

namespace {

// "[>= 4, 2, 8]": the shapes a plan accepts.
std::string describe_accepted(const Shape& planned, uintptr_t samples) {
    std::string text = "[>= " + std::to_string(samples);
    for (size_t axis = 1; axis < planned.size(); axis++) {
        text += ", " + std::to_string(planned[axis]);
    }
    return text + "]";
}

}  // namespace

ReusableMovePlan::ReusableMovePlan(const Array& output, const Array& input, const mts_data_movement_t* movements,
                                   size_t count)
    : dtype_(output.dtype()),
      device_(output.device()),
      output_shape_(output.shape()),
      input_shape_(input.shape()),
      element_size_(element_size(output.dtype())),
      count_(count) {
    check_host_thread_count(output.device(), input.device());
    MTSARRAY_EXPECTS(same_dtype(output.dtype(), input.dtype()),
                     "input (" + input.describe() + ") and output have different dtypes");
    MTSARRAY_EXPECTS(same_device(output.device(), input.device()),
                     "input (" + input.describe() + ") is not on the output's device");
    // the shapes (and a NULL list), as move_data checks them
    const MovePlan caller_plan(output_shape_, input_shape_, element_size_, movements, count);

    if (count != 0) {
        movements_.reset(new (std::nothrow) mts_data_movement_t[count]);
        if (movements_ == nullptr) {
            throw OutOfMemory("out of host memory for the copy of " + std::to_string(count) + " movements");
        }
    }
    SampleReach reach;
    if (is_host_accessible(device_.device_type)) {
        // checks each movement as it copies it, and decides how to copy them
        auto host = std::make_unique<cpu::HostMovePlan>(caller_plan, movements_.get());
        host_ = host.get();
        prepared_ = std::move(host);
        reach = cpu::copy_movements(movements_.get(), movements_.get(), count);
    } else {
        // The caller's list is read once: by the backend, which checks each
        // movement and keeps it in the copy as it builds its own form of
        // them (a GPU's table in device memory, uploaded once), or, when it
        // makes none, here into the copy, which is then checked: executions
        // run the backend's move_data on it.
        prepared_ = output.compute_backend().prepare_move_plan(output.stream(), caller_plan, movements_.get(), reach);
        if (prepared_ == nullptr) {
            reach = cpu::copy_movements(movements, movements_.get(), count);
            caller_plan.with_movements(movements_.get()).validate();
        }
    }
    output_samples_needed_ = reach.output_samples;
    input_samples_needed_ = reach.input_samples;
    empty_ = caller_plan.trivially_empty();
    if (host_ != nullptr && !empty_ && host_->summary().one_run &&
        host_->summary().bytes < cpu::parallel_threshold_bytes) {
        const MovePlan checked = caller_plan.with_movements(movements_.get());
        single_run_ = checked.single_run();
        single_copy_ = cpu::rows_copy_for(single_run_.bytes);
        small_single_run_ = single_run_.bytes != 0;
        output_row_stride_ = checked.output_row_stride();
        input_row_stride_ = checked.input_row_stride();
    }
}

ReusableMovePlan::~ReusableMovePlan() = default;

void ReusableMovePlan::run(Array& output, const Array& input) const {
    const Stream& stream = output.stream();
    output.prepare_write(stream);
    if (host_ != nullptr) {
        if (!output.overlaps(input)) {
            host_->execute(output.data(), input.data());
            return;
        }
        // within one buffer: from a snapshot, so that no movement sees
        // another one's writes
        auto snapshot = Buffer::allocate(stream, input.nbytes());
        output.compute_backend().copy(stream, snapshot->data(), input.data(), input.nbytes());
        host_->execute(output.data(), snapshot->data());
        return;
    }

    const auto& backend = output.compute_backend();
    // the device's prepared table: one launch, nothing uploaded or
    // allocated (its offsets hold for these arrays: the axes after the
    // samples are the plan's, matches() said so)
    if (prepared_ != nullptr && !output.overlaps(input) &&
        backend.execute_move_plan(stream, output.data(), input.data(), input.stream(), *prepared_)) {
        input.buffer()->record_use(stream);
        return;
    }
    // Otherwise (no prepared form, a capture that can not read it yet, or
    // arrays in one buffer) its backend's move_data on the checked copy,
    // with these arrays' shapes (the movements fit them: matches() said
    // so). It reads the movements while the call queues the copy, so the
    // plan's memory is not used by the work left queued.
    const MovePlan plan(output.shape(), input.shape(), element_size_, movements_.get(), count_);
    if (!output.overlaps(input)) {
        backend.move_data(stream, output.data(), input.data(), input.stream(), plan);
    } else {
        output.memory_backend().check_not_capturing(stream, "a move plan within one buffer (through a snapshot)");
        output.memory_backend().wait(stream, input.stream());
        auto snapshot = Buffer::allocate(stream, input.nbytes());
        backend.copy(stream, snapshot->data(), input.data(), input.nbytes());
        backend.move_data(stream, output.data(), snapshot->data(), stream, plan);
    }
    // the input may belong to another stream: its memory must not be freed
    // there before this read
    input.buffer()->record_use(stream);
}

std::string ReusableMovePlan::describe() const {
    return "a plan of " + std::to_string(count_) + " movements for " + dtype_name(dtype_) + " arrays on " +
           detail::describe(device_) + ", output " + describe_accepted(output_shape_, output_samples_needed_) +
           ", input " + describe_accepted(input_shape_, input_samples_needed_);
}

void ReusableMovePlan::reject(const Array& output, const Array& input) const {
    auto check = [&](const Array& array, const char* role, const Shape& planned, uintptr_t samples) {
        const std::string prefix = std::string(role) + " (" + array.describe() + ") does not match " + describe();
        MTSARRAY_EXPECTS(same_dtype(array.dtype(), dtype_), prefix + ": another dtype");
        MTSARRAY_EXPECTS(same_device(array.device(), device_), prefix + ": another device");
        const Shape& shape = array.shape();
        bool same_axes = shape.size() == planned.size();
        for (size_t axis = 1; same_axes && axis < shape.size(); axis++) {
            same_axes = shape[axis] == planned[axis];
        }
        MTSARRAY_EXPECTS(same_axes, prefix + ": the axes after the samples must be those of the plan");
        MTSARRAY_EXPECTS(shape.front() >= samples,
                         prefix + ": too few samples (the movements reach sample " + std::to_string(samples - 1) +
                             ")");
    };
    check(output, "output", output_shape_, output_samples_needed_);
    check(input, "input", input_shape_, input_samples_needed_);
    throw Error("the arrays do not match " + describe());  // not reached: one of the checks failed
}

}  // namespace mtsarray::detail
