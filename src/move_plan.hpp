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

namespace mtsarray {

/// `rows` copies of `bytes` bytes; row r reads at input_offset + r *
/// input_row_stride and writes at output_offset + r * output_row_stride
/// (offsets in bytes from each array's first element).
struct MoveRun {
    uint64_t input_offset;
    uint64_t output_offset;
    uint64_t bytes;
    uint64_t rows;
};

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

    const std::vector<MoveRun>& runs() const noexcept { return runs_; }
    /// Bytes between consecutive rows of the input / output.
    uint64_t input_row_stride() const noexcept { return input_row_stride_; }
    uint64_t output_row_stride() const noexcept { return output_row_stride_; }
    /// Bytes the plan copies in total.
    uint64_t total_bytes() const noexcept { return total_bytes_; }
    /// Number of row copies (sum of rows over runs).
    uint64_t total_rows() const noexcept { return total_rows_; }
    size_t element_size() const noexcept { return element_size_; }
    bool empty() const noexcept { return runs_.empty(); }
    /// Largest power of two (at most 16) dividing every offset, length and
    /// stride of the plan: kernels pick their vector width from it once.
    size_t alignment() const noexcept { return alignment_; }

private:
    std::vector<MoveRun> runs_;
    uint64_t input_row_stride_ = 0;
    uint64_t output_row_stride_ = 0;
    uint64_t total_bytes_ = 0;
    uint64_t total_rows_ = 0;
    size_t element_size_ = 0;
    size_t alignment_ = 16;
};

}  // namespace mtsarray
