// The table of handles (src/core/handle_registry.cpp): slots move between the table
// and each thread in batches; a handle finds its object only through a
// look-up for its own kind. These tests use the registry alone, with
// made-up object pointers (the table stores them, it never reads them).

#include <atomic>
#include <cstdint>
#include <thread>
#include <unordered_set>
#include <vector>

#include <gtest/gtest.h>

#include "core/handle_registry.hpp"

using mtsarray::detail::Array;
using mtsarray::detail::find_array;
using mtsarray::detail::find_handle;
using mtsarray::detail::HandleKind;
using mtsarray::detail::live_handle_count;
using mtsarray::detail::register_handle;
using mtsarray::detail::unregister_handle;
using mtsarray::detail::register_array;
using mtsarray::detail::unregister_array;
using mtsarray::detail::used_slot_count;

namespace {

Array* fake_array(uintptr_t n) {
    return reinterpret_cast<Array*>((n + 1) * 64);
}

}  // namespace

TEST(HandleRegistry, ExitedThreadsGiveTheirSlotsBack) {
    // Each thread takes a batch of slots for one array. Without giving the
    // batch back at exit, 2000 threads would take 2000 batches (64 000
    // slots); given back, the table reuses them once 4096 wait in its queue.
    const size_t before = used_slot_count();
    for (int i = 0; i < 2000; i++) {
        std::thread([i] {
            void* handle = register_array(fake_array(static_cast<uintptr_t>(i)));
            ASSERT_EQ(find_array(handle), fake_array(static_cast<uintptr_t>(i)));
            ASSERT_EQ(unregister_array(handle), fake_array(static_cast<uintptr_t>(i)));
        }).join();
    }
    EXPECT_LT(used_slot_count() - before, size_t(8192));
}

TEST(HandleRegistry, HandlesMadeOnOneThreadAreDestroyedOnAnother) {
    std::vector<void*> handles;
    std::thread([&handles] {
        for (uintptr_t i = 0; i < 100; i++) {
            handles.push_back(register_array(fake_array(i)));
        }
    }).join();  // the maker has exited, its remaining batch went back
    std::thread([&handles] {
        for (uintptr_t i = 0; i < handles.size(); i++) {
            ASSERT_EQ(find_array(handles[i]), fake_array(i));
            ASSERT_EQ(unregister_array(handles[i]), fake_array(i));
            ASSERT_EQ(find_array(handles[i]), nullptr);
            ASSERT_EQ(unregister_array(handles[i]), nullptr);
        }
    }).join();
}

TEST(HandleRegistry, ConcurrentThreadsNeverShareALiveSlot) {
    // 8 threads make and destroy arrays, keeping up to 100 alive each; every
    // live handle must find its own array, and no handle is given twice.
    constexpr int threads_count = 8;
    constexpr uintptr_t per_thread = 20000;
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < threads_count; t++) {
        threads.emplace_back([t, &errors] {
            std::vector<std::pair<void*, Array*>> alive;
            for (uintptr_t i = 0; i < per_thread; i++) {
                Array* array = fake_array(static_cast<uintptr_t>(t) * per_thread + i);
                alive.emplace_back(register_array(array), array);
                if (alive.size() > 100 || i % 3 == 0) {
                    const size_t victim = (i * 7) % alive.size();
                    if (unregister_array(alive[victim].first) != alive[victim].second) {
                        errors++;
                    }
                    alive.erase(alive.begin() + static_cast<std::ptrdiff_t>(victim));
                }
                for (const auto& [handle, expected] : alive) {
                    if (i % 97 == 0 && find_array(handle) != expected) {
                        errors++;
                    }
                }
            }
            for (const auto& [handle, expected] : alive) {
                if (unregister_array(handle) != expected) {
                    errors++;
                }
            }
        });
    }
    for (auto& thread : threads) {
        thread.join();
    }
    EXPECT_EQ(errors.load(), 0);
}

TEST(HandleRegistry, AFreedSlotWaitsForThousandsOfOthersBeforeReuse) {
    // the slot of a destroyed handle is not handed out again before at least
    // 4096 other slots were freed after it
    void* first = register_array(fake_array(1));
    const auto slot_of = [](const void* handle) { return reinterpret_cast<uintptr_t>(handle) & ((uintptr_t(1) << 28) - 1); };
    const uintptr_t freed_slot = slot_of(first);
    ASSERT_EQ(unregister_array(first), fake_array(1));
    for (uintptr_t i = 0; i < 4096; i++) {
        void* handle = register_array(fake_array(i));
        ASSERT_NE(slot_of(handle), freed_slot) << "reused after " << i << " arrays";
        ASSERT_EQ(unregister_array(handle), fake_array(i));
    }
}

TEST(HandleRegistry, AHandleIsFoundOnlyAsItsOwnKind) {
    void* plan = reinterpret_cast<void*>(uintptr_t(0x4000));
    const size_t plans_before = live_handle_count(HandleKind::move_plan);
    const size_t arrays_before = live_handle_count(HandleKind::array);
    void* handle = register_handle(plan, HandleKind::move_plan);
    EXPECT_EQ(live_handle_count(HandleKind::move_plan), plans_before + 1);
    EXPECT_EQ(live_handle_count(HandleKind::array), arrays_before);
    EXPECT_EQ(find_handle(handle, HandleKind::move_plan), plan);
    EXPECT_EQ(find_array(handle), nullptr);
    EXPECT_EQ(unregister_array(handle), nullptr) << "a plan unregistered as an array";
    EXPECT_EQ(find_handle(handle, HandleKind::move_plan), plan) << "a failed unregistration changed the slot";

    void* array_handle = register_array(fake_array(3));
    EXPECT_EQ(find_handle(array_handle, HandleKind::move_plan), nullptr);
    EXPECT_EQ(unregister_handle(array_handle, HandleKind::move_plan), nullptr);
    EXPECT_EQ(find_array(array_handle), fake_array(3));

    EXPECT_EQ(unregister_handle(handle, HandleKind::move_plan), plan);
    EXPECT_EQ(unregister_handle(handle, HandleKind::move_plan), nullptr) << "unregistered twice";
    EXPECT_EQ(find_handle(handle, HandleKind::move_plan), nullptr);
    EXPECT_EQ(live_handle_count(HandleKind::move_plan), plans_before);
    EXPECT_EQ(unregister_array(array_handle), fake_array(3));
}

TEST(HandleRegistry, AStaleHandleUnregistersNothingOnceItsSlotHoldsAnother) {
    // the slot of a destroyed handle goes, thousands of frees later, to a new
    // object: the old handle (an earlier generation of that slot) must not
    // unregister it
    const auto slot_of = [](const void* handle) { return reinterpret_cast<uintptr_t>(handle) & ((uintptr_t(1) << 28) - 1); };
    void* stale = register_array(fake_array(1));
    ASSERT_EQ(unregister_array(stale), fake_array(1));
    void* reused = nullptr;
    for (uintptr_t i = 0; i < 1000000 && reused == nullptr; i++) {
        void* handle = register_array(fake_array(i + 2));
        if (slot_of(handle) == slot_of(stale)) {
            reused = handle;
        } else {
            ASSERT_EQ(unregister_array(handle), fake_array(i + 2));
        }
    }
    ASSERT_NE(reused, nullptr) << "the slot never came back";
    ASSERT_NE(reused, stale) << "the new handle must differ from the stale one (its generation)";
    const Array* owner = find_array(reused);
    EXPECT_EQ(unregister_array(stale), nullptr) << "a stale handle unregistered the slot's new object";
    EXPECT_EQ(unregister_handle(stale, HandleKind::array), nullptr);
    EXPECT_EQ(find_array(reused), owner) << "the new object is no longer found";
    EXPECT_EQ(unregister_array(reused), owner);
    EXPECT_EQ(find_array(reused), nullptr);
}
