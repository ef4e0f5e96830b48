#include "array_registry.hpp"

#include <array>
#include <cstdint>
#include <mutex>
#include <unordered_set>

namespace mtsarray {

namespace {

// Every callback looks its array up here, from any number of threads: the
// set is split into shards with a plain mutex each, so that lookups of
// different arrays rarely meet, and an uncontended lookup costs a mutex
// (cheaper than a reader-writer lock) and one hash probe.
constexpr size_t shard_count = 64;

struct Shard {
    std::mutex mutex;
    std::unordered_set<const void*> arrays;
};

struct Registry {
    std::array<Shard, shard_count> shards;
};

// Never destroyed: arrays may outlive static destruction (held by a
// TensorMap in a static of the user's program).
Registry& registry() {
    static auto* instance = new Registry();
    return *instance;
}

Shard& shard_of(const void* pointer) {
    // Arrays are heap objects aligned to at least 16 bytes: drop those bits,
    // then mix the rest so that neighbouring allocations spread out.
    auto bits = reinterpret_cast<uintptr_t>(pointer) >> 4;
    bits ^= bits >> 7;
    bits ^= bits >> 13;
    return registry().shards[bits % shard_count];
}

}  // namespace

void register_array(const Array* array) {
    auto& shard = shard_of(array);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.arrays.insert(array);
}

void unregister_array(const Array* array) noexcept {
    auto& shard = shard_of(array);
    std::lock_guard<std::mutex> lock(shard.mutex);
    shard.arrays.erase(array);
}

bool is_registered_array(const void* pointer) noexcept {
    auto& shard = shard_of(pointer);
    std::lock_guard<std::mutex> lock(shard.mutex);
    return shard.arrays.count(pointer) != 0;
}

}  // namespace mtsarray
