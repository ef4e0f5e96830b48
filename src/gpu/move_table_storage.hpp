#pragma once
// MoveTableStorage<Runtime>: where GpuBackend builds the table of a move_data
// call or of a prepared plan (move_data_table.hpp): on the stack for small
// tables, then in page-locked memory from the device's staging pool, ready
// for an upload that reads it when it runs -- or, on a stream capturing a
// graph (page-locking is not allowed there), in plain host memory.

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include "gpu/move_data_table.hpp"
#include "gpu/pinned_staging_pool.hpp"

namespace mtsarray::detail {
namespace gpu {

/// The table of a move_data call while it is built: on the stack for
/// small plans, then in page-locked memory (ready for the upload) or, on
/// a stream under capture, in plain host memory (page-locking memory is
/// not allowed while a graph is captured).
template <class Runtime> class MoveTableStorage {
public:
    using StreamHandle = typename Runtime::StreamHandle;

    /// Each movement makes at most one entry unless it moves more than
    /// max_entry_bytes: a table of `expected_entries` is made at once
    /// rather than grown (and copied) step by step.
    MoveTableStorage(PinnedStagingPool<Runtime>& staging, bool capturing, size_t expected_entries)
        : staging_(staging), capturing_(capturing) {
        if (expected_entries > capacity_) {
            reallocate(expected_entries, 0);
        }
    }

    MoveTableEntry* data() noexcept { return entries_; }
    size_t capacity() const noexcept { return capacity_; }
    /// Whether the table is in page-locked memory (an upload reads it
    /// when it runs) rather than plain host memory.
    bool page_locked() const noexcept { return lease_ != nullptr && lease_->page_locked(); }

    /// Called by the table writer when every entry is in use.
    void grow(size_t at_least) { reallocate(std::max(at_least, 2 * capacity_), capacity_); }

    /// classify_move_table_into on the table: the sort writes into
    /// memory of the same kind (a second lease, or plain host memory
    /// under capture, or the stack), which then holds the table.
    MoveLaunchClasses classify(const MoveTableSummary& summary, uint32_t threads, uint64_t blocks) {
        MoveTableEntry* table = entries_;
        const MoveLaunchClasses classes =
            classify_move_table_into(table, summary, threads, blocks, [&](size_t count) {
                if (count < summary.entries) {
                    // the few entries of a sort in place, copied back:
                    // the thread's scratch table
                    std::vector<MoveTableEntry>& scratch = move_table_scratch();
                    scratch.resize(count);
                    return scratch.data();
                }
                return sort_space(count);
            });
        if (table != entries_) {
            // the sorted table replaces the first one, which nothing
            // read: its lease goes back to the pool at once
            entries_ = table;
            capacity_ = sorted_capacity_;
            if (sorted_lease_ != nullptr) {
                lease_ = std::move(sorted_lease_);
            } else if (table != sorted_stack_) {
                host_.swap(sorted_host_);
            }
        }
        return classes;
    }

    /// The upload reading the page-locked table is queued on `stream`.
    void release_after(StreamHandle stream) {
        if (lease_ != nullptr) {
            staging_.release_after(std::move(*lease_), stream);
            lease_.reset();
        }
    }

private:
    using PinnedLease = typename PinnedStagingPool<Runtime>::Lease;

    /// New memory for `capacity` entries holding the first `keep` ones.
    /// The old memory is given up only after the copy: a lease returned
    /// to the pool may be handed to another thread at once, and a
    /// vector that grows in place frees what it held.
    void reallocate(size_t capacity, size_t keep) {
        if (capturing_) {
            std::vector<MoveTableEntry> grown(capacity);
            std::memcpy(grown.data(), entries_, keep * sizeof(MoveTableEntry));
            host_.swap(grown);
            entries_ = host_.data();
        } else {
            auto grown = std::make_unique<PinnedLease>(staging_.acquire(capacity * sizeof(MoveTableEntry)));
            std::memcpy(grown->data(), entries_, keep * sizeof(MoveTableEntry));
            lease_ = std::move(grown);
            entries_ = static_cast<MoveTableEntry*>(lease_->data());
        }
        capacity_ = capacity;
    }

    /// Memory for `count` entries apart from the table, of the table's
    /// kind, for the class sort.
    MoveTableEntry* sort_space(size_t count) {
        sorted_capacity_ = count;
        if (count <= inline_move_table_capacity && entries_ == stack_) {
            return sorted_stack_;
        }
        if (capturing_) {
            sorted_host_.resize(count);
            return sorted_host_.data();
        }
        sorted_lease_ = std::make_unique<PinnedLease>(staging_.acquire(count * sizeof(MoveTableEntry)));
        return static_cast<MoveTableEntry*>(sorted_lease_->data());
    }

    PinnedStagingPool<Runtime>& staging_;
    bool capturing_;
    MoveTableEntry stack_[inline_move_table_capacity];
    MoveTableEntry sorted_stack_[inline_move_table_capacity];
    size_t sorted_capacity_ = 0;
    std::unique_ptr<PinnedLease> sorted_lease_;
    std::vector<MoveTableEntry> sorted_host_;
    MoveTableEntry* entries_ = stack_;
    size_t capacity_ = inline_move_table_capacity;
    std::unique_ptr<PinnedLease> lease_;
    std::vector<MoveTableEntry> host_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
