#pragma once
// plan_move_table<Runtime>: the host work of a move_data on the GPU (a call,
// or the making of a reusable plan): every movement checked and its table
// written, in one pass, on the calling thread or in parts on the host
// threads (move_table_parts.hpp).

#include <cstddef>
#include <string>

#include <metatensor.h>

#include "base/error.hpp"
#include "base/host_tasks.hpp"
#include "base/move_plan.hpp"
#include "gpu/launch_config.hpp"
#include "gpu/move_data_table.hpp"
#include "gpu/move_table_parts.hpp"
#include "gpu/move_table_storage.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Where plan_move_table also stores each movement it reads, and the
/// samples they reach (a reusable plan's copy); none when `copy` is null.
struct MovementCopy {
    mts_data_movement_t* copy = nullptr;
    SampleReach* reach = nullptr;
};

/// The host work of a move_data: checks every movement of `plan` and
/// writes its table into `storage`, grouped by size class (when it
/// mixes classes), with the blocks of each class. A long plan is built
/// in parts on the host threads. Throws validate()'s error, naming the
/// first bad movement, when one is out of range (`what`: the operation,
/// for the message if validate() finds none). With `kept`, the plan's
/// copy of the movements and the samples they reach are made in the
/// same pass. `host_tasks`: the host threads (none: the calling thread
/// alone).
template <class Runtime>
void plan_move_table(const MovePlan& plan, MoveTableStorage<Runtime>& storage, MoveTableSummary& summary,
                     MoveLaunchClasses& classes, const char* what, const HostTasks* host_tasks,
                     MovementCopy kept = {}) {
    const size_t threads = host_tasks != nullptr ? host_tasks->threads() : 1;
    const size_t parts = move_table_part_count(plan.movements_count(), threads);
    bool valid = false;
    if (parts > 1) {
        valid = build_move_table_in_parts(plan, storage, summary, classes, threads_per_block, max_blocks,
                                          *host_tasks, threads, parts, kept.copy, kept.reach);
    } else {
        valid = kept.copy != nullptr ? build_move_table_copying(plan, storage, summary, kept.copy, *kept.reach)
                                     : build_move_table(plan, storage, summary);
        if (valid) {
            classes = storage.classify(summary, threads_per_block, max_blocks);
        }
    }
    if (!valid) {
        plan.validate();  // throws the error naming the bad movement
        throw Error(std::string(what) + ": a movement is out of range");
    }
}

}  // namespace gpu
}  // namespace mtsarray::detail
