#pragma once
// MovePlan: the validated, coalesced form of a move_data call, shared by
// every backend.
//
// An array of shape [samples, c1, ..., ck, properties] is seen as a matrix of
// rows (one row per (sample, component) pair, row = sample * C + c with
// C = c1 * ... * ck) and `properties` columns. One movement copies C rows of
// `properties_length` elements; movements whose rows follow each other in
// both arrays with the same property ranges merge into one run, and runs that
// cover whole rows on both sides collapse into one contiguous copy.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <metatensor.h>

namespace mtsarray::detail {

/// `rows` copies of `bytes` bytes; row r reads at input_offset + r *
/// input_row_stride and writes at output_offset + r * output_row_stride
/// (offsets in bytes from each array's first element).
struct MoveRun {
    uint64_t input_offset;
    uint64_t output_offset;
    uint64_t bytes;
    uint64_t rows;
};

/// A plan borrows the caller's movements: it lives inside one move_data call.
class MovePlan {
public:
    /// Validates every movement against both shapes before returning, and
    /// throws Error naming the first bad movement (its index and field) or the
    /// shape mismatch. Shapes need at least two axes (samples, properties) and
    /// the same component axes.
    MovePlan(const std::vector<uintptr_t>& output_shape,
             const std::vector<uintptr_t>& input_shape,
             size_t element_size,
             const mts_data_movement_t* movements,
             size_t movements_count);

    /// Calls `visit(const MoveRun&)` for every coalesced run, in order, without
    /// storing them: the CPU backend copies as the runs come.
    template <typename Visit>
    void for_each_run(Visit&& visit) const;

    /// The runs as a table (built on first use: the GPU backends upload it).
    const std::vector<MoveRun>& runs() const;
    /// Bytes between consecutive rows of the input / output.
    uint64_t input_row_stride() const noexcept { return input_row_stride_; }
    uint64_t output_row_stride() const noexcept { return output_row_stride_; }
    /// Bytes the plan copies in total.
    uint64_t total_bytes() const;
    /// Number of row copies (sum of rows over runs).
    uint64_t total_rows() const;
    size_t element_size() const noexcept { return element_size_; }
    /// Nothing to copy (no movement, or only zero-sized ones).
    bool empty() const noexcept { return empty_; }
    /// Largest power of two (at most 16) dividing every offset, length and
    /// stride of the plan: kernels pick their vector width from it once.
    size_t alignment() const;

private:
    /// The run of one movement, before coalescing.
    MoveRun run_of(const mts_data_movement_t& movement) const noexcept {
        return {(movement.sample_in * components_ * input_row_stride_) + movement.properties_start_in * element_size_,
                (movement.sample_out * components_ * output_row_stride_) + movement.properties_start_out * element_size_,
                movement.properties_length * element_size_, components_};
    }
    /// Whole rows on both sides: the run is one contiguous block.
    MoveRun collapsed(MoveRun run) const noexcept {
        if (run.bytes == input_row_stride_ && run.bytes == output_row_stride_) {
            run.bytes *= run.rows;
            run.rows = 1;
        }
        return run;
    }
    void build_table() const;

    const mts_data_movement_t* movements_;
    size_t movements_count_;
    uint64_t components_ = 1;
    uint64_t input_row_stride_ = 0;
    uint64_t output_row_stride_ = 0;
    size_t element_size_ = 0;
    bool empty_ = true;

    // the table and its totals, built by build_table() on first use
    mutable bool table_built_ = false;
    mutable std::vector<MoveRun> runs_;
    mutable uint64_t total_bytes_ = 0;
    mutable uint64_t total_rows_ = 0;
    mutable size_t alignment_ = 16;
};

template <typename Visit>
void MovePlan::for_each_run(Visit&& visit) const {
    if (empty_) {
        return;
    }
    bool pending = false;
    MoveRun run = {};
    for (size_t i = 0; i < movements_count_; i++) {
        if (movements_[i].properties_length == 0) {
            continue;
        }
        const MoveRun next = run_of(movements_[i]);
        // consecutive rows on both sides with the same width: one longer run
        if (pending && next.bytes == run.bytes &&
            next.input_offset == run.input_offset + run.rows * input_row_stride_ &&
            next.output_offset == run.output_offset + run.rows * output_row_stride_) {
            run.rows += next.rows;
            continue;
        }
        if (pending) {
            visit(collapsed(run));
        }
        run = next;
        pending = true;
    }
    if (pending) {
        visit(collapsed(run));
    }
}

}  // namespace mtsarray::detail
