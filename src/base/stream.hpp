#pragma once
// A work stream is a value: the DLPack stream number of a device type, plus
// the device it belongs to. Parsing and validating DLPack stream numbers per
// device type happens here and nowhere else.

#include <cstdint>
#include <string>

#include <metatensor.h>

namespace mtsarray::detail {

/// DLPack stream numbers with a fixed meaning.
namespace stream_numbers {
constexpr int64_t none = -1;               // as_dlpack only: do not synchronise
constexpr int64_t rocm_default = 0;        // ROCm default stream
constexpr int64_t cuda_legacy = 1;         // CUDA legacy default stream
constexpr int64_t cuda_per_thread = 2;     // CUDA per-thread default stream
constexpr int64_t first_handle = 3;        // numbers above 2 are native handles
}  // namespace stream_numbers

/// A validated (device, DLPack stream number) pair. There is no constructor
/// from a bare number: use `Stream::parse` or `Stream::default_for`.
class Stream {
public:
    /// The default stream of `device`: CUDA legacy (1), ROCm default (0), and
    /// `none` for host devices, which have no streams.
    static Stream default_for(DLDevice device);

    /// Validate a DLPack stream number for `device` (see DESIGN.md):
    /// CUDA 1, 2, >2; ROCm 0, >2; host devices only -1. Throws Error naming
    /// the number and the device type otherwise. `-1` is rejected unless
    /// `allow_none` (only as_dlpack accepts it).
    static Stream parse(DLDevice device, int64_t number, bool allow_none = false);

    DLDevice device() const noexcept { return device_; }
    int64_t number() const noexcept { return number_; }
    /// True for the "no stream / no synchronisation" value (-1).
    bool is_none() const noexcept { return number_ == stream_numbers::none; }
    /// True when the number names a native handle (cudaStream_t / hipStream_t).
    bool is_handle() const noexcept { return number_ >= stream_numbers::first_handle; }
    /// The native handle (only meaningful when is_handle()).
    void* handle() const noexcept { return reinterpret_cast<void*>(static_cast<intptr_t>(number_)); }

    bool operator==(const Stream& other) const noexcept {
        return number_ == other.number_ && device_.device_type == other.device_.device_type &&
               device_.device_id == other.device_.device_id;
    }
    bool operator!=(const Stream& other) const noexcept { return !(*this == other); }

    /// "cuda:0 stream 1 (legacy default)", for messages.
    std::string describe() const;

private:
    Stream(DLDevice device, int64_t number) : device_(device), number_(number) {}
    DLDevice device_;
    int64_t number_;
};

}  // namespace mtsarray::detail
