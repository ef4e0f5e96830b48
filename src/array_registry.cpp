#include "array_registry.hpp"

#include <mutex>
#include <shared_mutex>
#include <unordered_set>

namespace mtsarray {

namespace {

struct Registry {
    std::shared_mutex mutex;
    std::unordered_set<const void*> arrays;
};

// Never destroyed: arrays may outlive static destruction (held by a
// TensorMap in a static of the user's program).
Registry& registry() {
    static auto* instance = new Registry();
    return *instance;
}

}  // namespace

void register_array(const Array* array) {
    auto& instance = registry();
    std::unique_lock<std::shared_mutex> lock(instance.mutex);
    instance.arrays.insert(array);
}

void unregister_array(const Array* array) noexcept {
    auto& instance = registry();
    std::unique_lock<std::shared_mutex> lock(instance.mutex);
    instance.arrays.erase(array);
}

bool is_registered_array(const void* pointer) noexcept {
    auto& instance = registry();
    std::shared_lock<std::shared_mutex> lock(instance.mutex);
    return instance.arrays.count(pointer) != 0;
}

}  // namespace mtsarray
