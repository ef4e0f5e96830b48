// The simulated runtime's peer access: which devices reach each other's
// memory, and how copies between devices go. Each rule with the section of
// the CUDA (or ROCm) documentation it follows.
//
// Topology (Runtime API "Peer Device Memory Access", cudaDeviceCanAccessPeer:
//   "Returns in *canAccessPeer a value of 1 if device device is capable of
//   directly accessing memory from peerDevice and 0 otherwise"; HIP's
//   hipDeviceCanAccessPeer: "a device is not a peer of itself").
//   MTSARRAY_SIM_PEERS says which pairs can: "all" (the default: an NVLink
//   node), "none" (GPUs behind different root complexes), or pairs
//   "0-1,2-3", each both ways; set_peer_topology changes it in a test.
// Peer access to memory not from a pool (cudaDeviceEnablePeerAccess: "On
//   success, all allocations from peerDevice will immediately be accessible
//   by the current device"; "access granted by this call is unidirectional";
//   "Returns cudaErrorInvalidDevice if cudaDeviceCanAccessPeer() indicates
//   that the current device cannot directly access memory from peerDevice.
//   Returns cudaErrorPeerAccessAlreadyEnabled if direct access of peerDevice
//   from the current device has already been enabled"; hipDeviceEnablePeerAccess
//   likewise returns hipErrorPeerAccessAlreadyEnabled).
// Pool memory (Programming Guide "Stream Ordered Memory Allocator > Device
//   Accessibility for Multi-GPU Support": pool allocations do not follow
//   cudaDeviceEnablePeerAccess; cudaMemPoolSetAccess, "Controls visibility of
//   pools between devices", says which devices may access a pool's memory;
//   ROCm's hipMemPoolSetAccess, the same). Granting a device that can not
//   reach the pool's device fails with cudaErrorInvalidDevice, and granting
//   one again changes nothing.
// Access (Programming Guide "Peer-to-Peer Memory Access"): a kernel, memset or
//   plain copy (cudaMemcpyAsync) on a stream of one device that touches
//   device memory of another is a violation unless that memory was made
//   reachable from the stream's device as above.
// Peer copies (Programming Guide "Peer-to-Peer Memory Copy": copies between
//   the memories of two devices with cudaMemcpyPeerAsync work whether or not
//   peer access is enabled; once it is, they "no longer need to be staged
//   through the host" and are faster). A peer copy is always legal; it goes
//   over the link when the memory on the other device than the stream's is
//   reachable from the stream's device, else it is staged through the host:
//   peer_copies() counts each path, so that a test sees which one ran.

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "support/simulation/state.hpp"

namespace mtsarray_test {

namespace sim {

namespace {

/// Parses a topology: "all", "none" or "a-b,c-d"; throws for anything else.
void apply_topology(Simulator& state, const std::string& topology) {
    bool capable[max_devices][max_devices] = {};
    if (topology.empty() || topology == "all") {
        for (int a = 0; a < max_devices; a++) {
            for (int b = 0; b < max_devices; b++) {
                capable[a][b] = a != b;
            }
        }
    } else if (topology != "none") {
        std::istringstream pairs(topology);
        std::string pair;
        while (std::getline(pairs, pair, ',')) {
            const auto dash = pair.find('-');
            MTSARRAY_EXPECTS(dash != std::string::npos && dash > 0 && dash + 1 < pair.size(),
                             "MTSARRAY_SIM_PEERS: '" + pair + "' is not a pair of devices like 0-1");
            const int a = std::stoi(pair.substr(0, dash));
            const int b = std::stoi(pair.substr(dash + 1));
            MTSARRAY_EXPECTS(a >= 0 && a < max_devices && b >= 0 && b < max_devices && a != b,
                             "MTSARRAY_SIM_PEERS: '" + pair + "' does not name two simulated devices");
            capable[a][b] = true;
            capable[b][a] = true;
        }
    }
    for (int a = 0; a < max_devices; a++) {
        for (int b = 0; b < max_devices; b++) {
            state.peer_capable[a][b] = capable[a][b];
        }
    }
}

std::string current_topology = "all";  // guarded by the simulator's mutex

const std::pair<const uintptr_t, Allocation>* live_allocation_locked(const void* data) {
    const auto& live = simulator().live;
    const auto address = reinterpret_cast<uintptr_t>(data);
    auto found = live.upper_bound(address);
    if (found == live.begin()) {
        return nullptr;
    }
    --found;
    return address < found->first + found->second.bytes ? &*found : nullptr;
}

}  // namespace

void read_peer_topology(Simulator& state) {
    const char* value = std::getenv("MTSARRAY_SIM_PEERS");
    current_topology = value == nullptr || *value == '\0' ? "all" : value;
    apply_topology(state, current_topology);
}

bool peer_reachable_locked(const Allocation& allocation, int device) {
    if (allocation.kind != MemoryKind::device || allocation.device == device) {
        return true;
    }
    if (allocation.pool != nullptr) {
        return allocation.pool->accessors.count(device) != 0;
    }
    return simulator().peer_enabled[device][allocation.device];
}

bool direct_peer_copy_locked(const void* destination, const void* source, int stream_device) {
    for (const void* side : {destination, source}) {
        const auto* allocation = live_allocation_locked(side);
        if (allocation != nullptr && !peer_reachable_locked(allocation->second, stream_device)) {
            return false;
        }
    }
    return true;
}

// ---- test controls -----------------------------------------------------------------

std::string set_peer_topology(const std::string& topology) {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    apply_topology(simulator(), topology);
    return std::exchange(current_topology, topology);
}

PeerCopies peer_copies() {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return PeerCopies{simulator().direct_peer_copies, simulator().staged_peer_copies};
}

bool peer_access_enabled(int device, int peer) {
    MTSARRAY_EXPECTS(device >= 0 && device < simulator().devices && peer >= 0 && peer < simulator().devices,
                     "no such pair of simulated devices");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    return simulator().peer_enabled[device][peer];
}

std::vector<int> pool_accessors(int device) {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    std::set<int> accessors;
    for (const auto* pool : simulator().pools) {
        if (pool->device == device) {
            accessors.insert(pool->accessors.begin(), pool->accessors.end());
        }
    }
    return std::vector<int>(accessors.begin(), accessors.end());
}

Status enable_peer_access(int device, int peer) {
    std::lock_guard<std::mutex> lock(simulator().mutex);
    Simulator& state = simulator();
    if (device < 0 || device >= state.devices || peer < 0 || peer >= state.devices ||
        !state.peer_capable[device][peer]) {
        return Status::invalid_device;
    }
    touch_device(device);
    touch_device(peer);
    if (state.peer_enabled[device][peer]) {
        return Status::peer_access_already_enabled;
    }
    state.peer_enabled[device][peer] = true;
    return Status::success;
}

}  // namespace sim

// ---- the traits -----------------------------------------------------------------------

using sim::Status;
using sim::simulator;

bool SimulatedRuntime::can_access_peer(int device, int peer) {
    sim::refuse_unusable_runtime("cudaDeviceCanAccessPeer");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    if (device < 0 || device >= simulator().devices || peer < 0 || peer >= simulator().devices) {
        sim::fail(Status::invalid_device, "cudaDeviceCanAccessPeer");
    }
    return simulator().peer_capable[device][peer];
}

void SimulatedRuntime::enable_peer_access(int peer) {
    sim::refuse_unusable_runtime("cudaDeviceEnablePeerAccess");
    const Status status = sim::enable_peer_access(sim::current, peer);
    if (status == Status::peer_access_already_enabled) {
        return;  // (the error is not kept as the thread's last one: CUDA returns it, and nothing is wrong)
    }
    sim::check(status, "cudaDeviceEnablePeerAccess");
}

void SimulatedRuntime::grant_pool_access(PoolHandle pool, int device) {
    sim::refuse_unusable_runtime("cudaMemPoolSetAccess");
    std::lock_guard<std::mutex> lock(simulator().mutex);
    sim::check(sim::unsafe_call_locked("cudaMemPoolSetAccess"), "cudaMemPoolSetAccess");
    if (pool == nullptr || device < 0 || device >= simulator().devices) {
        sim::fail(Status::invalid_value, "cudaMemPoolSetAccess");
    }
    if (device == pool->device) {
        return;  // the pool's own device always has access
    }
    if (!simulator().peer_capable[device][pool->device]) {
        sim::fail(Status::invalid_device, "cudaMemPoolSetAccess");
    }
    sim::touch_device(device);
    pool->accessors.insert(device);
}

}  // namespace mtsarray_test
