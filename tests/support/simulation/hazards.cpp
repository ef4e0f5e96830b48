// The simulated runtime's hazard checks: reads, writes and frees of one
// allocation from several streams, on one device or several, checked
// against the order in which the host issued them.
//
// Ordering between streams (Programming Guide "Asynchronous Concurrent
//   Execution > Streams": "Different streams, on the other hand, may execute
//   their commands out of order with respect to one another or
//   concurrently"; "Events" and Runtime API cudaStreamWaitEvent: work queued
//   after the wait runs after the work recorded in the event, across devices
//   too; Programming Guide "Stream Ordered Memory Allocator": "If the memory
//   is accessed outside of the promised stream order, a use before
//   allocation / use after free error will cause undefined behavior").
//   Every copy, memset, kernel and stream-ordered free queued (not captured)
//   says which allocations it reads, writes or frees; each access takes its
//   place in the order of issue. When the work starts, every access issued
//   before one of its own, to the same allocation, from another stream, and
//   not done yet, where one of the two writes or frees, is a violation: a
//   read after write, a write after read, a write after write, or a free
//   after use that the caller did not order with an event. (Work of one
//   stream runs in order: nothing to check there.) The random delays of the
//   streams make such a race show up as wrong values too, now and then; a
//   test that holds the earlier stream (hold()) makes it certain.
//   Host memory the simulation did not allocate (pageable memory), a
//   consumer's reads queued by the test (enqueue_read) and the test's own
//   kernels (enqueue) are not checked: their ordering is the caller's.

#include <string>
#include <utility>
#include <vector>

#include "support/simulation/state.hpp"

namespace mtsarray_test {

namespace sim {

namespace {

/// The base address of the live allocation holding `data`, or 0.
uintptr_t allocation_of_locked(const void* data) {
    const auto& live = simulator().live;
    const auto address = reinterpret_cast<uintptr_t>(data);
    auto found = live.upper_bound(address);
    if (found == live.begin()) {
        return 0;
    }
    --found;
    return address < found->first + found->second.bytes ? found->first : 0;
}

const char* kind_name(AccessKind kind) {
    switch (kind) {
    case AccessKind::read: return "read";
    case AccessKind::write: return "write";
    case AccessKind::free: return "free";
    }
    return "access";
}

std::string hazard_name(AccessKind earlier, AccessKind later) {
    if (later == AccessKind::free) {
        return "free after " + std::string(kind_name(earlier));
    }
    return std::string(kind_name(later)) + " after " + kind_name(earlier);
}

}  // namespace

void issue_accesses_locked(Item& item, StreamState* stream) {
    Simulator& state = simulator();
    for (auto& access : item.accesses) {
        const uintptr_t base = allocation_of_locked(access.data);
        if (base == 0) {
            continue;  // not simulated memory (or already freed: check_memory reports that)
        }
        access.data = reinterpret_cast<const void*>(base);
        access.issue = state.next_issue++;
        state.pending_accesses[base].emplace_back(access, stream);
    }
}

void begin_accesses(const std::vector<Access>& accesses, StreamState* stream) {
    if (accesses.empty()) {
        return;
    }
    Simulator& state = simulator();
    std::lock_guard<std::mutex> lock(state.mutex);
    for (const auto& access : accesses) {
        if (access.issue == 0) {
            continue;
        }
        const auto found = state.pending_accesses.find(reinterpret_cast<uintptr_t>(access.data));
        if (found == state.pending_accesses.end()) {
            continue;
        }
        for (const auto& pending : found->second) {
            const Access& earlier = pending.first;
            const bool conflicting = earlier.kind != AccessKind::read || access.kind != AccessKind::read;
            if (earlier.issue < access.issue && pending.second != stream && conflicting) {
                state.violations.push_back(hazard_name(earlier.kind, access.kind) + " across streams: " +
                                           access.what + " on the " + stream->describe() +
                                           " ran before " + earlier.what + " (" + kind_name(earlier.kind) +
                                           "), issued before it on the " + pending.second->describe() +
                                           ", was done");
            }
        }
    }
}

void end_accesses(const std::vector<Access>& accesses) {
    if (accesses.empty()) {
        return;
    }
    Simulator& state = simulator();
    std::lock_guard<std::mutex> lock(state.mutex);
    for (const auto& access : accesses) {
        if (access.issue == 0) {
            continue;
        }
        const auto found = state.pending_accesses.find(reinterpret_cast<uintptr_t>(access.data));
        if (found == state.pending_accesses.end()) {
            continue;
        }
        auto& list = found->second;
        for (auto entry = list.begin(); entry != list.end(); ++entry) {
            if (entry->first.issue == access.issue) {
                list.erase(entry);
                break;
            }
        }
        if (list.empty()) {
            state.pending_accesses.erase(found);
        }
    }
}

}  // namespace sim
}  // namespace mtsarray_test
