#pragma once
// PeerAccess<Runtime>: opens mtsarray's memory pools of two devices to each
// other, once per pair, the first time a copy goes between them.
//
// Memory from a stream-ordered pool does not follow peer access enabled with
// cudaDeviceEnablePeerAccess: only the pool's own access list (set with
// cudaMemPoolSetAccess, hipMemPoolSetAccess on ROCm) lets another device
// reach it. Without it a peer copy still works, staged through the host by
// the driver, at a fraction of the link's bandwidth. So, before the first
// copy between devices a and b: where b can reach a's memory
// (cudaDeviceCanAccessPeer), a's pool grants b read and write access, and
// where a can reach b's, b's pool grants a. Where neither can, nothing is
// asked and the copies stay staged. A pair is decided once, failures
// included (the copy is then staged, it does not fail); later copies of the
// pair cost one atomic load.
//
// Only mtsarray's own pools are opened. Memory that mtsarray does not own
// (wrapped, imported, or given by an allocator the program installed)
// follows its owner's settings: mtsarray never calls
// cudaDeviceEnablePeerAccess, which would change them for every allocation
// of the device.
//
// MTSARRAY_PEER_ACCESS=0 turns this off (every copy between devices is then
// staged); unset or 1 leaves it on; any other value fails the copy with a
// message naming the variable. Read once per process.
//
// Traits used: can_access_peer, grant_pool_access (runtime_traits.md).

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "base/error.hpp"
#include "gpu/device_guard.hpp"

namespace mtsarray::detail {
namespace gpu {

/// Whether MTSARRAY_PEER_ACCESS lets mtsarray open its pools to peers;
/// throws for a value that is neither 0 nor 1.
inline bool peer_access_wanted() {
    static const std::string setting = [] {
        const char* value = std::getenv("MTSARRAY_PEER_ACCESS");
        return std::string(value == nullptr ? "" : value);
    }();
    MTSARRAY_EXPECTS(setting.empty() || setting == "0" || setting == "1",
                     "MTSARRAY_PEER_ACCESS='" + setting + "' is neither 0 (peer access off) nor 1 (on)");
    return setting != "0";
}

template <class Runtime> class PeerAccess {
public:
    /// Pairs of devices beyond this many devices are not opened (their
    /// copies are staged).
    static constexpr int max_devices = 64;

    /// Before a copy between devices `a` and `b` (a != b). `pool_of(d)`
    /// gives device d's StreamOrderedPool. Throws only for a device fault
    /// and for an invalid MTSARRAY_PEER_ACCESS.
    template <class PoolOf> void open(int a, int b, PoolOf&& pool_of) {
        if (a == b || a < 0 || b < 0 || a >= max_devices || b >= max_devices ||
            decided_[index(a, b)].load(std::memory_order_acquire)) {
            return;
        }
        std::lock_guard<std::mutex> lock(mutex_);
        if (decided_[index(a, b)].load(std::memory_order_relaxed)) {
            return;
        }
        if (peer_access_wanted()) {
            grant(a, b, pool_of);
            grant(b, a, pool_of);
        }
        decided_[index(a, b)].store(true, std::memory_order_release);
        decided_[index(b, a)].store(true, std::memory_order_release);
    }

private:
    static size_t index(int a, int b) { return static_cast<size_t>(a) * max_devices + static_cast<size_t>(b); }

    /// Opens `owner`'s pool to `accessor` where the accessor can reach it.
    template <class PoolOf> static void grant(int owner, int accessor, PoolOf& pool_of) {
        try {
            if (!Runtime::can_access_peer(accessor, owner)) {
                return;
            }
            DeviceGuard<Runtime> guard(owner);
            pool_of(owner).grant_access(accessor);
        } catch (const DeviceFault&) {
            throw;
        } catch (const Error&) {
            // not opened: the copies between the two stay staged, and work
            (void)Runtime::Errors::last_error();
        }
    }

    std::mutex mutex_;  // one pair decided at a time
    std::array<std::atomic<bool>, static_cast<size_t>(max_devices) * max_devices> decided_{};
};

}  // namespace gpu
}  // namespace mtsarray::detail
