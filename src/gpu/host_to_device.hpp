#pragma once
// HostToDevice<Runtime>: host -> device copies of one device that never make
// the host wait for the stream they are ordered on.
//
// A copy from page-locked memory is asynchronous. A copy from pageable
// memory is staged by the runtime through page-locked buffers of its own
// before the call returns (the caller may reuse its buffer then); those
// buffers are finite, shared by every pageable copy still pending, and "if
// pageable memory must first be staged to pinned memory, the driver may
// synchronize with the stream" (CUDA Runtime API, "API synchronization
// behavior"): a copy beyond the staging space waits on the host for its
// stream (on an H100, a 128 MiB copy waited 1 s behind the destination
// stream's queued work), and one that does not fit beside the copies still
// pending waits for those -- behind whatever their streams run first.
//
// So every pageable copy runs on the device's library stream
// (library_stream.hpp) -- a non-blocking stream of mtsarray's own that no
// caller's work is queued on -- into fresh stream-ordered memory; the
// caller's stream waits for it with an event and copies device to device
// (microseconds, for what takes milliseconds to cross the bus), then frees
// it. The host may wait for mtsarray's own uploads to be staged, never for
// a caller's stream: the pool never makes the upload stream wait for
// another (stream_ordered_memory.hpp). (Small copies from host memory go
// through a buffer of the page-locked staging pool instead, when one is
// free: pinned_staging_pool.hpp.) Copies are refused on a stream capturing
// a graph, where pageable memory must never be read (a node would read it
// again at every replay).
//
// Traits used: create_stream, capture_state, copy_host_to_device_async,
// copy_device_to_device_async, record_event, stream_wait_event.

#include <cstddef>

#include "base/error.hpp"
#include "gpu/event_pool.hpp"
#include "gpu/library_stream.hpp"
#include "gpu/stream_ordered_memory.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class HostToDevice {
public:
    using StreamHandle = typename Runtime::StreamHandle;

    /// `memory`, `events` and `upload` are the device's and outlive this.
    HostToDevice(StreamOrderedPool<Runtime>& memory, EventPool<Runtime>& events, LibraryStream<Runtime>& upload)
        : memory_(memory), events_(events), upload_(upload) {}
    HostToDevice(const HostToDevice&) = delete;
    HostToDevice& operator=(const HostToDevice&) = delete;

    /// Queues the copy of `bytes` bytes of host memory at `source` into
    /// device memory at `destination`, in `stream`'s order (the device is
    /// current). `source_page_locked`: read when the copy runs, so it must
    /// stay untouched until then; otherwise it may be reused on return.
    void copy(StreamHandle stream, void* destination, const void* source, size_t bytes,
              bool source_page_locked) {
        if (bytes == 0) {
            return;
        }
        if (source_page_locked) {
            Runtime::copy_host_to_device_async(destination, source, bytes, stream);
            return;
        }
        MTSARRAY_EXPECTS(!Runtime::capture_state(stream).active,
                         "a copy from pageable host memory can not be captured in a graph (a replay would read "
                         "that memory again, when its owner may have reused it)");
        const StreamHandle upload = upload_.get();
        void* staged = memory_.allocate(bytes, upload);
        try {
            Runtime::copy_host_to_device_async(staged, source, bytes, upload);
            auto uploaded = events_.acquire();
            Runtime::record_event(uploaded.get(), upload);
            Runtime::stream_wait_event(stream, uploaded.get());
        } catch (...) {
            StreamOrderedPool<Runtime>::free(staged, upload);  // `stream` is not ordered after the upload
            throw;
        }
        StreamOrderedFree<Runtime> staged_owner(staged, stream);  // after the copy below
        Runtime::copy_device_to_device_async(destination, staged, bytes, stream);
    }

private:
    StreamOrderedPool<Runtime>& memory_;
    EventPool<Runtime>& events_;
    LibraryStream<Runtime>& upload_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
