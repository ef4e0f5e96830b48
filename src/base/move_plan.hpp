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
// checked by `scan_part()` + `summarize()` (one pass that also copies each
// movement it checks into memory of the backend's own, for backends that
// then copy from that copy, like the CPU) or while iterating with
// `for_each_valid_run` (for backends that first build a table, like the
// GPUs: the table is the only thing written before the last movement is
// checked, so one pass over the caller's movements does both). Either way
// each movement of the caller's list is read once, into a value that is
// both checked and used: a list in memory that the call writes (the
// output's own), or that another thread edits meanwhile, can not turn a
// checked movement into another one. A backend checks every movement before
// anything is written or queued, and reports a bad one with the error of
// `validate()`, which names it.

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include <metatensor.h>

#include "base/shape.hpp"

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

/// The samples a list of movements reaches: 1 + the largest sample_in and
/// sample_out (0 for an empty list). A reusable plan accepts arrays with at
/// least that many samples.
struct SampleReach {
    uintptr_t input_samples = 0;
    uintptr_t output_samples = 0;
};

/// What `validate()` learns on its way over the movements, for backends
/// that split the copy between threads.
struct MoveSummary {
    /// Bytes the movements copy in all (wraps around only for absurd
    /// movement lists; used to pick how many threads to use).
    uint64_t bytes;
    /// Each movement writes a higher output sample than the one before, so
    /// no two movements write the same bytes: they may run in any order.
    bool output_samples_increase;
    /// There is at least one movement, and each one continues the one before
    /// (next input and output sample, same property ranges): the plan is a
    /// single run, `single_run()`.
    bool one_run;
};

/// The sizes a movement must fit in: samples and properties of the input and
/// the output. A value, so that a loop over the movements can keep it in
/// registers (a member read through the plan is reloaded after every store
/// the loop makes, which the compiler cannot prove does not alias it).
struct MoveBounds {
    uintptr_t samples_in;
    uintptr_t samples_out;
    uintptr_t properties_in;
    uintptr_t properties_out;

    /// The same check, one comparison after the other: in a loop over
    /// valid movements, six branches that are never taken.
    bool contain_each(const mts_data_movement_t& movement) const noexcept {
        return movement.sample_in < samples_in && movement.sample_out < samples_out &&
               movement.properties_start_in <= properties_in &&
               movement.properties_length <= properties_in - movement.properties_start_in &&
               movement.properties_start_out <= properties_out &&
               movement.properties_length <= properties_out - movement.properties_start_out;
    }

    /// The exact check of one movement (no overflow for any field value).
    bool contain(const mts_data_movement_t& movement) const noexcept {
        return (movement.sample_in < samples_in) & (movement.sample_out < samples_out) &
               (movement.properties_start_in <= properties_in) &
               (movement.properties_length <= properties_in - movement.properties_start_in) &
               (movement.properties_start_out <= properties_out) &
               (movement.properties_length <= properties_out - movement.properties_start_out);
    }
};

/// What validate()'s pass over some of the movements saw (the top bits of
/// each word flag; move_plan.cpp says how).
struct MoveScan {
    uint64_t out_of_range;  // a movement may be out of range: the exact check decides
    uint64_t not_one_run;   // zero: the movements continue the first one, all of them
    uint64_t out_of_order;  // top bits: an output sample did not increase
    uint64_t elements;      // properties_length, added up
    size_t begin;           // the first movement of the part scanned
    size_t end;             // past its last one
    /// Whether the copy holds every movement of the part as it was read.
    /// Otherwise it holds the part's first one only, and the part is one
    /// run (each movement continues the one before it, with the first one's
    /// ranges): MovePlan::fill_run() writes the rest from it, the very
    /// values that were read and checked. A list that stays one run is then
    /// never stored (a copy of each movement would cost in-order calls
    /// about a tenth of their time).
    bool copied;
};

/// What a backend keeps of movements checked once and executed many times
/// (a reusable plan, mtsarray_move_plan_t): its own form of them, ready to
/// run (the CPU's runs and thread split; a GPU's table in device memory).
/// Made by the backend for one plan, owned by that plan, and destroyed when
/// the plan is freed; a backend whose queued work still reads it releases
/// that memory in stream order from its destructor.
class BackendMovePlan {
public:
    virtual ~BackendMovePlan() = default;
};

/// A plan borrows the caller's movements: it lives inside one move_data call.
class MovePlan {
public:
    /// Checks that both shapes have at least two axes (samples, properties)
    /// and the same component axes, and that `movements` is not NULL when
    /// `movements_count` is not 0; throws Error otherwise. The movements
    /// themselves are not read here.
    MovePlan(const Shape& output_shape,
             const Shape& input_shape,
             size_t element_size,
             const mts_data_movement_t* movements,
             size_t movements_count)
        : movements_(movements), movements_count_(movements_count), element_size_(element_size) {
        // inline: this is on the path of every call; the messages are built
        // by reject(), out of line
        const size_t axes = input_shape.size();
        if (axes < 2 || output_shape.size() != axes || (movements == nullptr && movements_count != 0)) {
            reject(output_shape, input_shape, movements, movements_count);
        }
        for (size_t axis = 1; axis + 1 < axes; axis++) {
            if (input_shape[axis] != output_shape[axis]) {
                reject(output_shape, input_shape, movements, movements_count);
            }
            components_ *= input_shape[axis];
        }
        samples_in_ = input_shape.front();
        samples_out_ = output_shape.front();
        properties_in_ = input_shape.back();
        properties_out_ = output_shape.back();
        input_row_stride_ = properties_in_ * element_size;
        output_row_stride_ = properties_out_ * element_size;
        input_sample_stride_ = components_ * input_row_stride_;
        output_sample_stride_ = components_ * output_row_stride_;
    }

    /// Checks every movement against both shapes; throws Error naming the
    /// first bad one (its index and field). Reads the movements in place:
    /// for the error, and for calls that write nothing.
    MoveSummary validate() const;

    /// validate() in parts, which may run at the same time (long lists on
    /// a thread pool), copying the movements as it checks them:
    /// scan_part() for consecutive [begin, end) ranges covering the
    /// movements, in any order, each movement read once and stored into
    /// copy[begin, end) (`copy` has movements_count() entries), then
    /// summarize() their scans with the same `copy`, complete by then
    /// (throws validate()'s error, naming the copied value). The summary
    /// and the check are those of the copy: a backend then works on
    /// `with_movements(copy)`, never on the caller's list again.
    /// `begin < end <= movements_count()`. One movement at a time, in
    /// portable code; a backend may scan faster as long as it gives the
    /// same MoveScan and copy (base/move_plan_scan.hpp). `copy` may be null:
    /// nothing is copied, and the parts must then be the whole list in one.
    /// The copy of a part that is one run holds its first movement only
    /// (MoveScan::copied); summarize() completes it where the summary needs
    /// it: when the list is not one run, or flagged. A list that is one run
    /// keeps copy[0] only, which single_run() reads; call fill_run() for the
    /// rest when it is needed.
    MoveScan scan_part(size_t begin, size_t end, mts_data_movement_t* copy) const noexcept;
    MoveSummary summarize(MoveScan* parts, size_t count, mts_data_movement_t* copy) const;

    /// Writes copy[begin + 1, end) as the run that copy[begin] starts:
    /// samples one after the other, the same property ranges.
    static void fill_run(mts_data_movement_t* copy, size_t begin, size_t end) noexcept {
        const mts_data_movement_t first = copy[begin];
        for (size_t i = begin + 1; i < end; i++) {
            const uintptr_t step = i - begin;
            copy[i] = {first.sample_in + step, first.sample_out + step, first.properties_start_in,
                       first.properties_start_out, first.properties_length};
        }
    }

    /// The same plan on other movements: the copy scan_part() made.
    MovePlan with_movements(const mts_data_movement_t* movements) const noexcept {
        MovePlan copied = *this;
        copied.movements_ = movements;
        return copied;
    }

    /// The plan of movements [begin, end) only (same arrays, same checks);
    /// `end <= movements_count()`.
    MovePlan slice(size_t begin, size_t end) const noexcept {
        MovePlan part = *this;
        part.movements_ = movements_ + begin;
        part.movements_count_ = end - begin;
        return part;
    }

    /// The exact check of one movement, without building a message
    /// (validate() names the bad one).
    bool in_range(const mts_data_movement_t& movement) const noexcept { return bounds().contain(movement); }
    MoveBounds bounds() const noexcept { return {samples_in_, samples_out_, properties_in_, properties_out_}; }

    /// Movement `index` and its run before coalescing.
    const mts_data_movement_t& movement(size_t index) const noexcept { return movements_[index]; }
    MoveRun run_of(const mts_data_movement_t& movement) const noexcept {
        return {(movement.sample_in * input_sample_stride_) + movement.properties_start_in * element_size_,
                (movement.sample_out * output_sample_stride_) + movement.properties_start_out * element_size_,
                movement.properties_length * element_size_, components_};
    }
    /// The whole plan as one run, when validate() says it is one
    /// (MoveSummary::one_run); whole rows on both sides make it one
    /// contiguous block.
    MoveRun single_run() const noexcept {
        MoveRun run = run_of(movements_[0]);
        run.rows *= movements_count_;
        if (run.bytes == input_row_stride_ && run.bytes == output_row_stride_) {
            run.bytes *= run.rows;
            run.rows = 1;
        }
        return run;
    }

    /// Output samples (the first axis of the output).
    uintptr_t output_samples() const noexcept { return samples_out_; }
    /// Rows per sample (the product of the component axes), and the bytes
    /// between consecutive samples of the input / output.
    uint64_t components() const noexcept { return components_; }
    uint64_t input_sample_stride() const noexcept { return input_sample_stride_; }
    uint64_t output_sample_stride() const noexcept { return output_sample_stride_; }

    /// Calls `visit(const MoveRun&)` for every coalesced run, in order,
    /// without storing them. The movements must have been validated.
    template <typename Visit>
    [[gnu::always_inline]] void for_each_run(Visit&& visit) const {
        auto keep_nothing = [](size_t, const mts_data_movement_t&) {};
        (void)iterate_runs</*check=*/false>(visit, keep_nothing);
    }

    /// Same, checking each movement as it comes: stops and returns false at
    /// the first invalid one (the runs visited so far are of movements
    /// before it), true when all were valid. Call `validate()` for the
    /// error to report. Each movement is read once, into a value that is
    /// checked and then made into runs: a visitor that writes into the
    /// movements (a table in the same memory) does not change what it is
    /// given.
    template <typename Visit>
    [[gnu::always_inline]] bool for_each_valid_run(Visit&& visit) const {
        auto keep_nothing = [](size_t, const mts_data_movement_t&) {};
        return iterate_runs</*check=*/true>(visit, keep_nothing);
    }

    /// for_each_valid_run(), also storing each movement as it was read into
    /// copy[i] (`copy` has movements_count() entries and is not the list
    /// itself) and gathering the samples they reach into `reach`: the copy
    /// a reusable plan keeps, made in the same pass as its table. On false,
    /// the copy and `reach` hold the movements before the invalid one.
    template <typename Visit>
    [[gnu::always_inline]] bool for_each_valid_run_copying(Visit&& visit, mts_data_movement_t* copy,
                                                           SampleReach& reach) const {
        // locals, not reach's fields: a store into the copy could alias them
        uintptr_t input_samples = 0;
        uintptr_t output_samples = 0;
        auto keep = [&](size_t index, const mts_data_movement_t& movement) {
            copy[index] = movement;
            input_samples = movement.sample_in + 1 > input_samples ? movement.sample_in + 1 : input_samples;
            output_samples = movement.sample_out + 1 > output_samples ? movement.sample_out + 1 : output_samples;
        };
        const bool valid = iterate_runs</*check=*/true>(visit, keep);
        reach = {input_samples, output_samples};
        return valid;
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
    // Inlined into its caller, where `visit` is a local: the visitor's
    // fields then stay in registers through the loop (the table writer of
    // the GPU backends keeps its count and sums there). `keep(index,
    // movement)` is given each movement as it was read, once checked.
    template <bool Check, typename Visit, typename Keep>
    [[gnu::always_inline]] inline bool iterate_runs(Visit& visit, Keep& keep) const;

    /// validate()'s slow path: throws the error naming the first movement
    /// of `movements` (this plan's, or their copy) out of range, if there
    /// is one.
    [[gnu::noinline, gnu::cold]] void check_exactly(const mts_data_movement_t* movements) const;

    /// The constructor's error: throws the message naming what is wrong.
    [[noreturn, gnu::noinline, gnu::cold]] static void reject(const Shape& output_shape,
                                                            const Shape& input_shape,
                                                            const mts_data_movement_t* movements,
                                                            size_t movements_count);

    const mts_data_movement_t* movements_;
    size_t movements_count_;
    uintptr_t samples_in_ = 0;
    uintptr_t samples_out_ = 0;
    uintptr_t properties_in_ = 0;
    uintptr_t properties_out_ = 0;
    uint64_t components_ = 1;
    uint64_t input_row_stride_ = 0;
    uint64_t output_row_stride_ = 0;
    uint64_t input_sample_stride_ = 0;   // components_ rows
    uint64_t output_sample_stride_ = 0;
    size_t element_size_ = 0;
};

template <bool Check, typename Visit, typename Keep>
inline bool MovePlan::iterate_runs(Visit& visit, Keep& keep) const {
    const MoveBounds bounds = this->bounds();
    if (components_ == 0) {
        // no row to copy; the movements still have to be valid
        for (size_t i = 0; i < movements_count_; i++) {
            const mts_data_movement_t movement = movements_[i];
            if (Check && !bounds.contain(movement)) {
                return false;
            }
            keep(i, movement);
        }
        return true;
    }
    // Locals: the visitor's stores (table entries, copies) could alias the
    // plan, and the compiler would load every field again after each one.
    // This loop is the cost of each movement of in-order copies.
    const uint64_t input_sample = input_sample_stride_;
    const uint64_t output_sample = output_sample_stride_;
    const uint64_t element = element_size_;
    const uint64_t rows = components_;
    const mts_data_movement_t* movement = movements_;
    const mts_data_movement_t* const end = movements_ + movements_count_;
    // whole rows on both sides (a run copies at least one byte per row):
    // the run is one contiguous block
    const uint64_t whole_rows = input_row_stride_ == output_row_stride_ ? input_row_stride_ : 0;
    auto collapse = [&](MoveRun run) {
        if (run.bytes == whole_rows) {
            run.bytes *= run.rows;
            run.rows = 1;
        }
        return run;
    };

    // The run being extended (none while rows is 0) and where its next rows
    // would start: a movement starting there, as wide, extends it.
    MoveRun run = {0, 0, 0, 0};
    uint64_t input_end = 0;
    uint64_t output_end = 0;
    // Each movement is read once, into a value that is checked (when
    // `check` says so) and then used: whatever writes into the movements
    // meanwhile (the visitor itself, writing a table over them, or another
    // thread) can not change what was checked into something else.
    auto extend = [&](const mts_data_movement_t* from, const mts_data_movement_t* to, auto check) {
        for (; from != to; from++) {
            const mts_data_movement_t value = *from;
            if (decltype(check)::value) {
                // the movements may have changed from here on, as far as
                // the compiler knows: it may not load a field again for a
                // later use (another thread may have changed it in between)
                asm volatile("" ::: "memory");
            }
            if (decltype(check)::value && !bounds.contain_each(value)) {
                return false;
            }
            keep(static_cast<size_t>(from - movements_), value);
            const uint64_t bytes = value.properties_length * element;
            if (bytes == 0) {
                continue;
            }
            const uint64_t input_offset = value.sample_in * input_sample + value.properties_start_in * element;
            const uint64_t output_offset = value.sample_out * output_sample + value.properties_start_out * element;
            if (input_offset == input_end && output_offset == output_end && bytes == run.bytes) {
                run.rows += rows;
            } else {
                if (run.rows != 0) {
                    visit(collapse(run));
                }
                run = {input_offset, output_offset, bytes, rows};
            }
            input_end = input_offset + input_sample;
            output_end = output_offset + output_sample;
        }
        return true;
    };
    using checked = std::integral_constant<bool, true>;
    using unchecked = std::integral_constant<bool, false>;
    if constexpr (!Check) {
        extend(movement, end, unchecked());
    } else {
        // One pass: each movement is read once, into a value that is
        // checked and then made into runs (the check is six comparisons,
        // each a branch that is never taken for valid movements, cheaper
        // than screening a copy of each block first).
        if (!extend(movement, end, checked())) {
            return false;
        }
    }
    if (run.rows != 0) {
        visit(collapse(run));
    }
    return true;
}

}  // namespace mtsarray::detail
