// The CPU backend: synchronous work on host memory. It also computes on
// every host-accessible GPU memory type (pinned, managed), see
// core/backend_registry.cpp. Large copies, fills, gathers and transposes are
// split between the threads of cpu/threads/thread_pool.hpp (cpu/threads/parallel_split.hpp
// says when and how); each operation first asks how many threads it may use,
// which also reports an invalid thread count in the environment before
// anything is written.

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu/cpu_backend.hpp"
#include "cpu/copy.hpp"
#include "cpu/fill.hpp"
#include "cpu/move_data.hpp"
#include "cpu/huge_pages.hpp"
#include "cpu/threads/parallel_split.hpp"
#include "cpu/strided_copy.hpp"
#include "base/device.hpp"
#include "base/error.hpp"
#include "base/fault_injection.hpp"

namespace mtsarray::detail {

namespace {

// Cache-line alignment: enough for any element and for vector loads.
constexpr size_t host_alignment = 64;

// Allocations of at least this size are fresh maps from the kernel (glibc's
// largest dynamic mmap threshold on 64-bit systems), whose pages are zero
// until first touched: a zero-filled array that large is calloc'd and not
// filled, so that its pages are zeroed once, by the kernel, at the first
// write of whoever fills them (not first by a memset of ours). Measured on
// the 2-vCPU VM (best of 30, alternated runs), 80 MB of zeros then written
// everywhere: 2.8-3.1 ms instead of 3.6-4.5 ms when the writer uses two
// threads (as move_data does), 4.2-4.9 ms instead of 4.2-4.3 ms when it uses
// one.
constexpr size_t fresh_map_bytes = size_t(32) << 20;

// malloc with the alignment done by hand: std::aligned_alloc (glibc's
// memalign) asks for more than the size it is given, which defeats glibc's
// dynamic mmap threshold, so every large array was a fresh mmap whose pages
// all faulted on first touch (4x the page faults of malloc for 8 MB arrays,
// create 0.7x slower than std::vector). The distance back to what malloc
// returned is kept in the byte just before the aligned pointer.
//
// `zeroed`: calloc instead, which zeroes only what is not zero already:
// memory reused from the heap, not pages fresh from the kernel (which the
// kernel zeroes at their first touch, and a memset of ours would have
// zeroed a second time).
void* allocate_aligned(size_t bytes, bool zeroed = false) {
    if (bytes > SIZE_MAX - host_alignment) {
        return nullptr;
    }
    auto* raw = static_cast<unsigned char*>(zeroed ? std::calloc(1, bytes + host_alignment)
                                                   : std::malloc(bytes + host_alignment));
    if (raw == nullptr) {
        return nullptr;
    }
    const auto address = reinterpret_cast<uintptr_t>(raw);
    // at least one byte ahead, to hold the distance (1..host_alignment)
    const size_t offset = host_alignment - address % host_alignment;
    auto* aligned = raw + offset;
    aligned[-1] = static_cast<unsigned char>(offset);
    return aligned;
}

void free_aligned(void* data) noexcept {
    if (data != nullptr) {
        auto* aligned = static_cast<unsigned char*>(data);
        std::free(aligned - aligned[-1]);
    }
}

/// An array's memory, advised into huge pages where that pays.
void* allocate_host(size_t bytes, bool zeroed) {
    fault_injection::check("allocate");
    void* data = allocate_aligned(bytes, zeroed);
    if (data == nullptr) {
        throw OutOfMemory("could not allocate " + std::to_string(bytes) + " bytes on the CPU");
    }
    try {
        cpu::advise_huge_pages(data, bytes);
    } catch (...) {
        free_aligned(data);
        throw;
    }
    return data;
}

class CpuBackend final : public Backend {
public:
    const char* name() const noexcept override { return "cpu"; }

    void check_device(DLDevice device) const override {
        MTSARRAY_EXPECTS(device.device_type == kDLCPU,
                         "the CPU backend does not handle " + describe(device));
        MTSARRAY_EXPECTS(device.device_id == 0,
                         "invalid CPU device id " + std::to_string(device.device_id) + ", expected 0");
    }

    bool available() const noexcept override { return true; }
    int device_count() const noexcept override { return 1; }

    void* allocate(const Stream& stream, size_t bytes) const override {
        check_device(stream.device());
        return allocate_host(bytes, /*zeroed=*/false);
    }

    void* allocate_zeroed(const Stream& stream, size_t bytes) const override {
        check_device(stream.device());
        if (bytes < fresh_map_bytes) {
            // below, the memory may come back from the heap, which calloc
            // zeroes on one thread where fill() uses several
            return nullptr;
        }
        return allocate_host(bytes, /*zeroed=*/true);
    }

    void deallocate(const Stream&, void* data, size_t) const noexcept override { free_aligned(data); }


    void fill(const Stream&, void* data, size_t count, const void* value,
              size_t element_size) const override {
        const size_t threads = cpu::threads_for(count * element_size);
        fault_injection::check("fill");
        cpu::fill(data, count, value, element_size, threads);
    }

    void copy(const Stream&, void* destination, const void* source, size_t bytes) const override {
        const size_t threads = cpu::threads_for(bytes);
        fault_injection::check("copy");
        cpu::copy(destination, source, bytes, threads);
    }

    void move_data(const Stream&, void* output, const void* input, const Stream&,
                   const MovePlan& plan) const override {
        cpu::move_data(output, input, plan);
    }

    void strided_copy(const Stream&, void* destination, const StridedView& source) const override {
        size_t bytes = source.element_size;
        for (auto size : source.shape) {
            bytes *= size;
        }
        const size_t threads = cpu::threads_for(bytes);
        fault_injection::check("strided_copy");
        cpu::strided_copy(destination, source, threads);
    }

    void copy_to_host(const Stream&, void* host_destination, const void* source,
                      size_t bytes) const override {
        copy(Stream::default_for(cpu_device()), host_destination, source, bytes);
    }

    void copy_from_host(const Stream&, void* destination, const void* host_source,
                        size_t bytes) const override {
        copy(Stream::default_for(cpu_device()), destination, host_source, bytes);
    }

    void copy_peer(const Stream&, void* destination, const void* source, DLDevice,
                   size_t bytes) const override {
        copy(Stream::default_for(cpu_device()), destination, source, bytes);
    }

    // host work is synchronous: there is never anything to wait for
    void wait(const Stream&, const Stream&) const override {}
    void synchronize(const Stream&) const override {}
    std::shared_ptr<const StreamMarker> mark(const Stream&) const override { return nullptr; }
    void wait(const Stream&, const StreamMarker&) const override {}
    void synchronize(const StreamMarker&) const override {}
    void release_after(const Stream&, std::function<void()>&& release) const override {
        auto now = std::move(release);
        now();
    }
    void check_not_capturing(const Stream&, const char*) const override {}
    bool defer_while_capturing(const Stream&, std::function<void()>&) const override { return false; }
    void release_cached_memory(DLDevice) const override {}
    uint64_t release_threshold(DLDevice) const override { return 0; }
    void set_release_threshold(DLDevice, uint64_t) const override {}
};

}  // namespace

const Backend& cpu_backend() {
    static const CpuBackend instance;
    return instance;
}

}  // namespace mtsarray::detail
