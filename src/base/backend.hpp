#pragma once
// The one interface every backend implements (CPU, CUDA, HIP). The dispatch
// layer (array operations, DLPack, validation, MovePlan) is written once
// against it. All work is queued on the given stream and may return before it
// is done; only `synchronize` and `copy_to_host` followed by `synchronize`
// make results visible to the host. No other method blocks the calling
// thread on the device. Methods throw mtsarray::detail::Error (or
// OutOfMemory) with the runtime's own error string.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <metatensor.h>

#include "base/allocator.hpp"
#include "base/error.hpp"
#include "base/move_plan.hpp"
#include "base/stream.hpp"

namespace mtsarray::detail {

/// A strided view of existing data, as DLPack describes it (strides counted
/// in elements, possibly zero or negative).
struct StridedView {
    const void* data;  // first element, byte_offset already applied
    Shape shape;
    std::vector<int64_t> strides;
    size_t element_size;
};

/// A point in a stream's queue: everything queued on the stream before the
/// marker was made (an event, on the GPU). Waiting on it never blocks the host.
class StreamMarker {
public:
    virtual ~StreamMarker() = default;
};

/// A backend is also the default allocator of the memory it owns.
class Backend : public Allocator {
public:
    /// "cpu", "cuda", "hip".
    virtual const char* name() const noexcept = 0;

    /// Throws Error naming the cause (built without it, no driver, no device,
    /// device id out of range) when `device` can not be used.
    virtual void check_device(DLDevice device) const = 0;

    /// At least one device of this backend can be used right now.
    virtual bool available() const noexcept = 0;

    /// Throws Error naming both devices when `stream` (a stream of
    /// `stream.device()` by its number) is a native handle of another
    /// device: a stream belongs to the device it was made on. Queues
    /// nothing. Host devices and the default streams have nothing to check.
    virtual void check_stream(const Stream& stream) const { (void)stream; }

    /// The number of devices of this backend (device ids 0 to count - 1),
    /// 0 without a driver or a device; not changed by a device fault.
    virtual int device_count() const noexcept = 0;

    // allocate / deallocate (Allocator): stream-ordered, on
    // `stream.device()`; a GPU backend serves zero bytes with a valid device
    // address of its own; deallocate reports failures on stderr.

    /// Writes `count` copies of the `element_size`-byte pattern at `value`
    /// (a host pointer) to `data`.
    virtual void fill(const Stream& stream, void* data, size_t count, const void* value,
                      size_t element_size) const = 0;

    /// A reusable plan's form on this backend (mtsarray_move_plan_t), for
    /// arrays on `stream`'s device; any work it needs (an upload of a
    /// table) is queued on `stream`. `plan` holds the caller's movements,
    /// not checked yet: the backend reads each one once, checks it (throws
    /// validate()'s error naming a bad one) and stores the value it read
    /// into copy[i] (movements_count() entries: the plan's own copy, which
    /// executions fall back on), with the samples they reach into `reach`.
    /// nullptr: this backend has no form of its own, has read nothing, and
    /// executions call move_data on a copy the caller makes and checks. The
    /// result is owned by the reusable plan, which may outlive `stream`'s
    /// arrays.
    virtual std::unique_ptr<const BackendMovePlan> prepare_move_plan(const Stream& stream, const MovePlan& plan,
                                                                     mts_data_movement_t* copy,
                                                                     SampleReach& reach) const {
        (void)stream;
        (void)plan;
        (void)copy;
        (void)reach;
        return nullptr;
    }

    /// What move_data(stream, output, input, input_stream, <the plan>)
    /// does, for a `prepared` this backend made, with arrays that match the
    /// plan (the caller checked them): no movement is read, nothing is
    /// validated. Thread-safe. A graph that captured the call keeps what it
    /// reads of `prepared`, which may be destroyed before the graph.
    /// Returns false, having queued nothing, when `prepared` can not serve
    /// this call (a capture that can not read it yet): the caller runs
    /// move_data on the plan's movements instead.
    virtual bool execute_move_plan(const Stream& stream, void* output, const void* input,
                                   const Stream& input_stream, const BackendMovePlan& prepared) const {
        (void)stream;
        (void)output;
        (void)input;
        (void)input_stream;
        (void)prepared;
        throw Error(std::string("the ") + name() + " backend has no prepared move plans");
    }

    /// Copies `bytes` bytes between two buffers of the same device.
    virtual void copy(const Stream& stream, void* destination, const void* source,
                      size_t bytes) const = 0;

    /// Executes a MovePlan: `output` and `input` point at the first element
    /// of each array, on the same device. Checks every movement first and
    /// throws MovePlan::validate()'s error before anything is queued or
    /// written; then makes `stream` wait for `input_stream` (the input's
    /// work stream) and queues the copy on `stream`.
    virtual void move_data(const Stream& stream, void* output, const void* input,
                           const Stream& input_stream, const MovePlan& plan) const = 0;

    /// Writes the elements of `source` (same device) to `destination` in
    /// C-contiguous order of `source.shape`: swap_axes and the import of
    /// non-contiguous DLPack tensors both go through here.
    virtual void strided_copy(const Stream& stream, void* destination,
                              const StridedView& source) const = 0;

    /// Device -> host copy (pageable or pinned host memory). The data is in
    /// place after `synchronize(stream)`.
    virtual void copy_to_host(const Stream& stream, void* host_destination, const void* source,
                              size_t bytes) const = 0;
    /// Host -> device copy; `host_source` may be reused once the call
    /// returns. Up to a size (GpuBackend::staged_copy_limit) the bytes are
    /// staged in page-locked memory and the call does not wait; larger
    /// copies wait for their own transfer.
    virtual void copy_from_host(const Stream& stream, void* destination, const void* host_source,
                                size_t bytes) const = 0;
    /// copy_from_host of a host source kept alive by `source_owner`: the
    /// backend may read `host_source` after returning, until the copy has
    /// run (then it drops `source_owner`, possibly from another thread), so
    /// that no copy waits and none is staged twice; `source_page_locked`:
    /// the source is page-locked or managed memory, read directly. The
    /// default stages the bytes (copy_from_host).
    virtual void copy_from_host_keeping(const Stream& stream, void* destination, const void* host_source,
                                        size_t bytes, std::shared_ptr<const void> source_owner,
                                        bool source_page_locked) const {
        (void)source_owner;
        (void)source_page_locked;
        copy_from_host(stream, destination, host_source, bytes);
    }
    /// Copy from `source_device` (another device of this backend, or the
    /// same) to `stream`'s device, queued on `stream` (the destination's
    /// work stream); the caller orders it after the source's writes.
    virtual void copy_peer(const Stream& stream, void* destination, const void* source, DLDevice source_device,
                           size_t bytes) const = 0;

    /// Makes `waiting` wait (on the device, without blocking the host) for
    /// the work queued so far on `producer`. No-op when they are the same.
    virtual void wait(const Stream& waiting, const Stream& producer) const = 0;

    /// Blocks the host until the work queued on `stream` is done.
    virtual void synchronize(const Stream& stream) const = 0;

    /// A marker of the work queued on `stream` so far, or nullptr for a
    /// host stream (host work is done when the call that queued it returns)
    /// and for a stream capturing a graph (that work runs whenever the graph
    /// is launched, which mtsarray does not see).
    virtual std::shared_ptr<const StreamMarker> mark(const Stream& stream) const = 0;

    /// Makes `waiting` wait (on the device) for the work before `marker`,
    /// a marker this backend made.
    virtual void wait(const Stream& waiting, const StreamMarker& marker) const = 0;
    /// Blocks the host until the work before `marker` is done: the last
    /// resort of a free that could not be ordered on the device. Needs no
    /// stream (the marked one may be gone by then).
    virtual void synchronize(const StreamMarker& marker) const = 0;

    /// Calls `release` once the work queued on `stream` so far is done,
    /// without blocking the calling thread: at once when nothing is pending,
    /// else later, from another thread. `release` must not throw. Used to
    /// hand memory that mtsarray does not own back to its owner in stream
    /// order (wrapped buffers, imported DLPack tensors). When this throws,
    /// `release` was not moved from: the caller still has it.
    virtual void release_after(const Stream& stream, std::function<void()>&& release) const = 0;

    /// Gives the memory this backend keeps cached for reuse on `device`
    /// back to the system (no-op when nothing is cached).
    virtual void release_cached_memory(DLDevice device) const = 0;

    /// How much freed memory this backend keeps cached on `device` across
    /// synchronisations (the rest goes back at the next one), and its
    /// setting; 0 and a no-op where nothing is cached.
    virtual uint64_t release_threshold(DLDevice device) const = 0;
    virtual void set_release_threshold(DLDevice device, uint64_t bytes) const = 0;

    /// When `stream` is capturing a graph, keeps `work` to run once it no
    /// longer is (frees queued during a capture would become nodes of the
    /// graph) and returns true; otherwise returns false and leaves `work`
    /// alone. For the frees of buffers destroyed during a capture.
    virtual bool defer_while_capturing(const Stream& stream, std::function<void()>& work) const = 0;

    /// Throws Error naming `operation` when `stream` is capturing a graph:
    /// for operations that allocate memory outliving the call (create, copy,
    /// swap_axes, ...), which a graph replay could not give back.
    virtual void check_not_capturing(const Stream& stream, const char* operation) const = 0;
};

}  // namespace mtsarray::detail
