#pragma once
// CapturedHostCopy<Runtime>: a host -> device copy (copy_into from host
// memory) captured in a graph, as a training loop captures its batch
// upload.
//
// What a replay copies: what the host source holds at that replay, as a
// captured cudaMemcpyAsync from page-locked memory does -- the program
// writes the next batch into the same host array, then replays. So the
// graph reads the source at every replay, and keeps it alive (it owns a
// reference to it, a user object, dropped when the graph is gone):
//  - a page-locked (or managed) source is read by the graph's memcpy node;
//  - a pageable source can not be (the driver stages pageable memory when
//    the copy is called, so a node would have nothing to read at replay):
//    a host node of the graph copies it into a page-locked buffer that the
//    graph owns, then the memcpy node uploads that buffer. The buffer comes
//    from the device's staging pool (acquire_for_graph) and goes back to it,
//    unused, with the graph: no event of the pool is ever recorded in the
//    capture, so the pool stays usable once the capture has ended.
// A runtime whose graphs can own nothing (HIP 5.2: no user objects) can not
// keep the source for the replays: the copy is refused there, with an error
// saying so, before anything is queued.
//
// Traits used: has_user_objects, retain_with_graph, launch_host_function,
// copy_host_to_device_async.

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "base/error.hpp"
#include "gpu/deferred_work.hpp"
#include "gpu/pinned_staging_pool.hpp"

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class CapturedHostCopy {
public:
    using StreamHandle = typename Runtime::StreamHandle;

    /// Captures the copy of `bytes` bytes from `source` (kept alive by
    /// `source_owner`; page-locked or managed memory when
    /// `source_page_locked`) into `destination` on `stream`, which is
    /// capturing a graph. Throws Error, having queued nothing, where graphs
    /// can own nothing.
    static void capture(StreamHandle stream, PinnedStagingPool<Runtime>& staging, DeferredWork<Runtime>& deferred,
                        void* destination, const void* source, size_t bytes,
                        std::shared_ptr<const void> source_owner, bool source_page_locked) {
        if constexpr (Runtime::has_user_objects) {
            auto owned = std::make_unique<Owned>(Owned{&deferred, nullptr, std::move(source_owner), source, bytes});
            if (!source_page_locked) {
                owned->buffer = std::make_unique<Lease>(staging.acquire_for_graph(bytes));
            }
            Owned* kept = owned.release();
            Runtime::retain_with_graph(stream, &Owned::release, kept);  // on failure, released
            if (source_page_locked) {
                Runtime::copy_host_to_device_async(destination, source, bytes, stream);
                return;
            }
            Runtime::launch_host_function(stream, &Owned::refresh, kept);
            Runtime::copy_host_to_device_async(destination, kept->buffer->data(), bytes, stream);
        } else {
            (void)stream;
            (void)staging;
            (void)deferred;
            (void)destination;
            (void)source;
            (void)bytes;
            (void)source_owner;
            (void)source_page_locked;
            throw Error(std::string("a copy from host memory can not be captured in a ") + Runtime::graph_name +
                        " with this runtime: its graphs can not keep the source for the replays (no user "
                        "objects). Copy outside the capture, into an array the graph reads.");
        }
    }

    /// Why a copy whose source does not outlive the call can not be
    /// captured, for the error.
    static std::string refusal(const std::string& operation) {
        return operation + " can not be captured in a " + Runtime::graph_name +
               ": its host source does not outlive the call, and a replay reads the source again. Copy from an "
               "array (copy_into keeps it for the graph), or outside the capture.";
    }

private:
    using Lease = typename PinnedStagingPool<Runtime>::Lease;

    /// What the graph owns: the source's owner and the page-locked buffer
    /// its host node fills.
    struct Owned {
        DeferredWork<Runtime>* deferred;
        std::unique_ptr<Lease> buffer;
        std::shared_ptr<const void> source_owner;
        const void* source;
        size_t bytes;

        /// The graph's host node: the source's bytes of this replay into
        /// the buffer (no runtime call).
        static void refresh(void* object) {
            auto* owned = static_cast<Owned*>(object);
            std::memcpy(owned->buffer->data(), owned->source, owned->bytes);
        }

        /// The user object's release, on a thread of the runtime, which
        /// must make no runtime call: the source's owner (whose deleter is
        /// another library's) and the buffer go on the deferred-work thread.
        static void release(void* object) {
            auto* owned = static_cast<Owned*>(object);
            try {
                owned->deferred->soon([owned]() { delete owned; });
            } catch (...) {
                std::fprintf(stderr, "mtsarray: %s: the host copy of a graph leaked its buffer\n", Runtime::name);
            }
        }
    };
};

}  // namespace gpu
}  // namespace mtsarray::detail
