#pragma once
// CapturedMoveData<Runtime>: move_data and move plan executions captured in
// a graph, which must not wait on the host nor read memory that the graph
// does not own at every replay: the table goes into the kernel parameters,
// or into device memory the graph owns (a user object), uploaded from a
// page-locked copy the graph owns too. Written against the runtime traits
// of gpu_backend.hpp.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.hpp"
#include "gpu/deferred_work.hpp"
#include "gpu/device_guard.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/move_data.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/pinned_staging_pool.hpp"
#include "gpu/prepared_move_plan.hpp"
#include "gpu/runtime_calls.hpp"
#include "gpu/runtime_error.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> struct CapturedMoveData {
    using StreamHandle = typename Runtime::StreamHandle;
    using Errors = typename Runtime::Errors;

    /// An execution of a prepared plan captured in a graph, which must not
    /// wait on the host nor outlive what it reads: the graph reads the
    /// plan's device table, uploaded (plan.capturable()), and owns a share
    /// of it (a user object). A capture before the upload is known done, or
    /// where graphs can own nothing (HIP 5.2), runs the plan's movements
    /// through move_data instead, which gives the graph a table of its own.
    static void capture_move_plan(StreamHandle handle, const PreparedMovePlan<Runtime>& plan, MoveDataArguments arguments) {
        if constexpr (Runtime::has_user_objects) {
            Runtime::retain_with_graph(handle, &TableReference<Runtime>::drop, plan.share().release());
            MTSARRAY_CHECKED_LAUNCH(Errors, "move plan",
                                    launch_move_data_with_device_table<Runtime>(handle, arguments, plan.table,
                                                                                plan.classes.blocks, plan.narrow));
        } else {
            (void)handle;
            (void)plan;
            (void)arguments;
            throw Error("move plan: a graph can not own the plan's table on this runtime");  // capturable() is false
        }
    }

    /// The table of a move_data captured in a graph: device memory and the
    /// host copy a memcpy node of the graph uploads at every replay, owned
    /// by the graph (a user object) and freed after it.
    struct GraphOwnedTable {
        DeferredWork<Runtime>* deferred;
        int device;
        void* device_table = nullptr;
        std::unique_ptr<typename PinnedStagingPool<Runtime>::Lease> host;

        /// The user object's destructor: runs on a thread of the runtime,
        /// which must make no runtime call; the frees go to the
        /// deferred-work thread.
        static void release(void* object) {
            auto* table = static_cast<GraphOwnedTable*>(object);
            try {
                table->deferred->soon([table]() {
                    DeviceGuard<Runtime> guard(table->device);
                    if (table->device_table != nullptr) {
                        Runtime::free_device(table->device_table);
                    }
                    delete table;
                });
            } catch (...) {
                std::fprintf(stderr, "mtsarray: %s graph-owned move_data table leaked\n", Runtime::name);
            }
        }
    };

    /// A table too large for the kernel parameters under graph capture.
    /// With user objects and a free page-locked buffer: one memcpy node
    /// uploads the graph's own host copy into the graph's own device memory,
    /// then one kernel node moves, at every replay. Otherwise (HIP 5.2, or no
    /// page-locked buffer free: a graph node must never read pageable
    /// memory, and page-locking is not allowed in a capture): kernel nodes
    /// of inline_move_table_capacity entries each, whose parameters hold the
    /// table -- correct, but one node per slice.
    static void launch_captured(StreamHandle handle, PinnedStagingPool<Runtime>& staging, DeferredWork<Runtime>& deferred,
                                int device, MoveTableEntry* entries, const MoveTableSummary& summary,
                                MoveDataArguments arguments, unsigned blocks, bool narrow) {
        if constexpr (Runtime::has_user_objects) {
            if (launch_with_graph_owned_table(handle, staging, deferred, device, entries, summary, arguments, blocks,
                                              narrow)) {
                return;
            }
        } else {
            (void)staging;
            (void)deferred;
            (void)device;
            (void)blocks;
        }
        launch_in_parameter_slices(handle, entries, summary, arguments, narrow);
    }

    /// The one-kernel-node capture of launch_captured; false (and nothing
    /// queued) when the staging pool has no page-locked buffer free now.
    static bool launch_with_graph_owned_table(StreamHandle handle, PinnedStagingPool<Runtime>& staging,
                                              DeferredWork<Runtime>& deferred, int device, MoveTableEntry* entries,
                                              const MoveTableSummary& summary, MoveDataArguments arguments,
                                              unsigned blocks, bool narrow) {
        const size_t table_bytes = summary.entries * sizeof(MoveTableEntry);
        auto host = std::make_unique<typename PinnedStagingPool<Runtime>::Lease>(
            staging.acquire(table_bytes));
        if (!host->page_locked()) {
            return false;  // the pool grows in the background for later captures
        }
        auto* owned = new GraphOwnedTable{&deferred, device, nullptr, std::move(host)};
        try {
            owned->device_table = allocate_device_outside_capture<Runtime>(table_bytes);
        } catch (...) {
            GraphOwnedTable::release(owned);
            throw;
        }
        std::memcpy(owned->host->data(), entries, table_bytes);
        Runtime::retain_with_graph(handle, &GraphOwnedTable::release, owned);
        Runtime::copy_host_to_device_async(owned->device_table, owned->host->data(), table_bytes, handle);
        MTSARRAY_CHECKED_LAUNCH(Errors, "move_data",
                                launch_move_data_with_device_table<Runtime>(
                                    handle, arguments, static_cast<const MoveTableEntry*>(owned->device_table),
                                    blocks, narrow));
        return true;
    }

    /// Kernel nodes whose parameters hold inline_move_table_capacity
    /// entries of the table each.
    static void launch_in_parameter_slices(StreamHandle handle, MoveTableEntry* entries, const MoveTableSummary& summary,
                                           MoveDataArguments arguments, bool narrow) {
        std::vector<MoveTableEntry>& scratch = move_table_scratch();
        for (uint64_t first = 0; first < summary.entries; first += inline_move_table_capacity) {
            const uint64_t count = std::min<uint64_t>(inline_move_table_capacity, summary.entries - first);
            MoveTableSummary slice;
            count_move_table_keys(entries + first, count, slice);
            const MoveLaunchClasses classes =
                classify_move_table(entries + first, slice, arguments.input_row_stride,
                                    arguments.output_row_stride, threads_per_block, max_blocks, scratch);
            MoveDataArguments part = move_data_arguments(classes, arguments.input, arguments.output,
                                                         arguments.input_row_stride, arguments.output_row_stride);
            MTSARRAY_CHECKED_LAUNCH(Errors, "move_data", launch_move_data<Runtime>(handle, part, entries + first, count,
                                                                                   classes.blocks, narrow));
        }
    }
};

}  // namespace gpu
}  // namespace mtsarray::detail
