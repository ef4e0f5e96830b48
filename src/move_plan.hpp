#pragma once
// MovePlan: the coalesced form of a move_data call, shared by every backend.
//
// An array of shape [samples, c1, ..., ck, properties] is seen as a matrix of
// rows (one row per (sample, component) pair, row = sample * C + c with
// C = c1 * ... * ck) and `properties` columns. One movement copies C rows of
// `properties_length` elements; movements whose rows follow each other in
// both arrays with the same property ranges merge into one run, and runs that
// cover whole rows on both sides collapse into one contiguous copy.
//
// Validation. The constructor checks the shapes only; the movements are
// checked by `validate()` (one pass, for backends that then copy as they
// iterate, like the CPU) or while iterating with `for_each_valid_run` (for
// backends that first build a table, like the GPUs: the table is the only
// thing written before the last movement is checked, so one pass over the
// caller's movements does both). Either way a backend checks every movement
// before anything is written or queued, and reports a bad one with the error
// of `validate()`, which names it.

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
    /// Checks that both shapes have at least two axes (samples, properties)
    /// and the same component axes, and that `movements` is not NULL when
    /// `movements_count` is not 0; throws Error otherwise. The movements
    /// themselves are not read here.
    MovePlan(const std::vector<uintptr_t>& output_shape,
             const std::vector<uintptr_t>& input_shape,
             size_t element_size,
             const mts_data_movement_t* movements,
             size_t movements_count);

    /// Checks every movement against both shapes; throws Error naming the
    /// first bad one (its index and field).
    void validate() const;

    /// Calls `visit(const MoveRun&)` for every coalesced run, in order,
    /// without storing them. The movements must have been validated.
    template <typename Visit>
    void for_each_run(Visit&& visit) const {
        (void)iterate_runs</*check=*/false>(visit);
    }

    /// Same, checking each movement as it comes: stops and returns false at
    /// the first invalid one (after visiting the runs before it), true when
    /// all were valid. Call `validate()` for the error to report.
    template <typename Visit>
    bool for_each_valid_run(Visit&& visit) const {
        return iterate_runs</*check=*/true>(visit);
    }

    /// Bytes between consecutive rows of the input / output.
    uint64_t input_row_stride() const noexcept { return input_row_stride_; }
    uint64_t output_row_stride() const noexcept { return output_row_stride_; }
    /// Bytes spanned by the input / output: every offset stays below.
    uint64_t input_bytes() const noexcept { return samples_in_ * components_ * input_row_stride_; }
    uint64_t output_bytes() const noexcept { return samples_out_ * components_ * output_row_stride_; }
    size_t element_size() const noexcept { return element_size_; }
    size_t movements_count() const noexcept { return movements_count_; }
    /// No movement, or no row to copy (an empty component axis): nothing can
    /// be written, whatever the movements say. (Movements of length 0 only
    /// make a plan without runs, which this does not look for.)
    bool trivially_empty() const noexcept { return movements_count_ == 0 || components_ == 0; }

private:
    /// What the loops need of the shapes. The loops copy it into locals:
    /// stores a visitor makes (the table entries, uint64_t like these fields)
    /// could otherwise alias the plan's members and force a reload of each
    /// one per movement.
    struct Geometry {
        uint64_t samples_in, samples_out;
        uint64_t properties_in, properties_out;
        uint64_t input_sample_bytes, output_sample_bytes;  // components * row stride
        uint64_t input_row_stride, output_row_stride;
        uint64_t components;
        uint64_t element_size;
    };

    /// The fast check of one movement: no call, no string, one branch for
    /// the caller. Written with subtractions so that start + length can not
    /// overflow.
    static bool in_range(const Geometry& g, const mts_data_movement_t& movement) noexcept {
        return (movement.sample_in < g.samples_in) & (movement.sample_out < g.samples_out) &
               (movement.properties_start_in <= g.properties_in) &
               (movement.properties_length <= g.properties_in - movement.properties_start_in) &
               (movement.properties_start_out <= g.properties_out) &
               (movement.properties_length <= g.properties_out - movement.properties_start_out);
    }

    /// Whole rows on both sides: the run is one contiguous block.
    static MoveRun collapsed(const Geometry& g, MoveRun run) noexcept {
        if (run.bytes == g.input_row_stride && run.bytes == g.output_row_stride) {
            run.bytes *= run.rows;
            run.rows = 1;
        }
        return run;
    }

    template <bool Check, typename Visit>
    bool iterate_runs(Visit& visit) const;

    const mts_data_movement_t* movements_;
    size_t movements_count_;
    Geometry geometry_ = {};
    uintptr_t samples_in_ = 0;
    uintptr_t samples_out_ = 0;
    uintptr_t properties_in_ = 0;
    uintptr_t properties_out_ = 0;
    uint64_t components_ = 1;
    uint64_t input_row_stride_ = 0;
    uint64_t output_row_stride_ = 0;
    size_t element_size_ = 0;
};

template <bool Check, typename Visit>
bool MovePlan::iterate_runs(Visit& visit) const {
    const Geometry g = geometry_;
    const mts_data_movement_t* const movements = movements_;
    const size_t count = movements_count_;
    if (g.components == 0) {
        // no row to copy; the movements still have to be valid
        if (Check) {
            for (size_t i = 0; i < count; i++) {
                if (!in_range(g, movements[i])) {
                    return false;
                }
            }
        }
        return true;
    }
    bool pending = false;
    MoveRun run = {};
    // where the next row of `run` would start on each side: a movement
    // starting exactly there (with the same width) extends the run
    uint64_t next_input = 0;
    uint64_t next_output = 0;
    for (size_t i = 0; i < count; i++) {
        const mts_data_movement_t& movement = movements[i];
        if (Check && !in_range(g, movement)) {
            return false;
        }
        if (movement.properties_length == 0) {
            continue;
        }
        const uint64_t input_offset = movement.sample_in * g.input_sample_bytes + movement.properties_start_in * g.element_size;
        const uint64_t output_offset =
            movement.sample_out * g.output_sample_bytes + movement.properties_start_out * g.element_size;
        const uint64_t bytes = movement.properties_length * g.element_size;
        // consecutive rows on both sides with the same width: one longer run
        if (pending && bytes == run.bytes && input_offset == next_input && output_offset == next_output) {
            run.rows += g.components;
        } else {
            if (pending) {
                visit(collapsed(g, run));
            }
            run = MoveRun{input_offset, output_offset, bytes, g.components};
            pending = true;
        }
        next_input = input_offset + g.input_sample_bytes;
        next_output = output_offset + g.output_sample_bytes;
    }
    if (pending) {
        visit(collapsed(g, run));
    }
    return true;
}

}  // namespace mtsarray::detail
