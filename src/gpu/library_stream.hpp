#pragma once
// LibraryStream<Runtime>: a non-blocking stream of one device that belongs
// to mtsarray alone, for work that serves no caller's stream: the uploads
// of large pageable copies (host_to_device.hpp), and the frees of memory
// whose every use is known done (a prepared plan's table). Nothing of the
// user's ever waits for it, and it waits for nothing of the user's, so a
// call that has to wait for it (a pageable copy the runtime stages) waits
// for mtsarray's own work only.

#include <mutex>

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class LibraryStream {
public:
    using StreamHandle = typename Runtime::StreamHandle;

    LibraryStream() = default;
    LibraryStream(const LibraryStream&) = delete;
    LibraryStream& operator=(const LibraryStream&) = delete;

    /// The stream, made on first use (the caller has made the device
    /// current); it serves the device for the life of the process.
    StreamHandle get() {
        std::call_once(created_, [&] { stream_ = Runtime::create_stream(); });
        return stream_;
    }

private:
    std::once_flag created_;
    StreamHandle stream_{};
};

}  // namespace gpu
}  // namespace mtsarray::detail
