#pragma once
// A work stream is a value: the DLPack stream number of a device type, plus
// the device it belongs to. Parsing and validating DLPack stream numbers per
// device type happens here and nowhere else.

#include <cstdint>
#include <string>

#include <metatensor.h>

#include "base/thread_token.hpp"

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
    /// `allow_none` (only as_dlpack accepts it). CUDA managed memory takes
    /// the CUDA numbers too; it is computed on by the host, which leaves
    /// nothing to order: the result is the "none" stream.
    ///
    /// CUDA stream 2 names the per-thread default stream of the calling
    /// thread: the Stream remembers that thread (its owner, by a token no
    /// later thread gets: thread_token.hpp). Work is queued on it only by
    /// its owner (GPU backends refuse other threads); memory released by
    /// another thread goes back on `usable_here()`.
    static Stream parse(DLDevice device, int64_t number, bool allow_none = false);

    DLDevice device() const noexcept { return device_; }
    int64_t number() const noexcept { return number_; }
    /// True for the "no stream / no synchronisation" value (-1).
    bool is_none() const noexcept { return number_ == stream_numbers::none; }
    /// True when the number names a native handle (cudaStream_t / hipStream_t).
    bool is_handle() const noexcept { return number_ >= stream_numbers::first_handle; }
    /// The native handle (only meaningful when is_handle()).
    void* handle() const noexcept { return reinterpret_cast<void*>(static_cast<intptr_t>(number_)); }

    /// CUDA stream 2: the per-thread default stream of its owner thread.
    bool is_per_thread() const noexcept {
        return device_.device_type == kDLCUDA && number_ == stream_numbers::cuda_per_thread;
    }
    /// False for the per-thread stream of another thread than the caller.
    bool belongs_to_this_thread() const noexcept {
        return !is_per_thread() || owner_ == this_thread_token();
    }
    /// This stream, or for the per-thread stream of another thread the
    /// device's legacy default stream: work queued there runs after the
    /// work queued before on every per-thread (blocking) stream of the
    /// device, the owner's included. For frees and releases made by a thread
    /// that is not the owner (a garbage collector, a DLPack deleter).
    Stream usable_here() const { return belongs_to_this_thread() ? *this : default_for(device_); }

    /// Two per-thread streams of different threads are different streams.
    bool operator==(const Stream& other) const noexcept {
        return number_ == other.number_ && device_.device_type == other.device_.device_type &&
               device_.device_id == other.device_.device_id && owner_ == other.owner_;
    }
    bool operator!=(const Stream& other) const noexcept { return !(*this == other); }

    /// "cuda:0 stream 1 (legacy default)", for messages.
    std::string describe() const;

private:
    Stream(DLDevice device, int64_t number) : device_(device), number_(number) {
        if (is_per_thread()) {
            owner_ = this_thread_token();
        }
    }
    DLDevice device_;
    int64_t number_;
    uint64_t owner_ = 0;  // the per-thread stream's thread (this_thread_token); 0 otherwise
};

}  // namespace mtsarray::detail
