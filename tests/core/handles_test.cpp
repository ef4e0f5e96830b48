// Handles (src/core/handle_registry.hpp): what `mts_array_t::ptr` holds. A
// destroyed array's handle must stay dead even when a new array takes its
// slot or its address; a second destroy must never free another array; a
// foreign pointer is never mistaken for one of ours; lookups hold under
// concurrent creation and destruction.

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"

#if defined(MTSARRAY_TEST_HOOKS) && MTSARRAY_TEST_HOOKS
#include "support/test_hooks_api.h"
#endif

using namespace mtsarray_test;

namespace {

mts_array_t make_array(double value, uintptr_t samples = 4) {
    mts_array_t array = {};
    const uintptr_t shape[2] = {samples, 3};
    EXPECT_EQ(mtsarray_full(DLDevice{kDLCPU, 0}, float64(), shape, 2, &value, &array), MTS_SUCCESS)
        << last_error();
    return array;
}

bool is_ours(const mts_array_t& array) {
    bool result = true;
    EXPECT_EQ(mtsarray_is_mtsarray(&array, &result), MTS_SUCCESS) << last_error();
    return result;
}

double first_value(const mts_array_t& array) {
    return from_bytes<double>(read_bytes(array)).at(0);
}

}  // namespace

TEST(Handles, AreNotAddresses) {
    auto array = make_array(1.0);
    // the top byte of a handle is a tag that no user-space address has
    EXPECT_NE(reinterpret_cast<uintptr_t>(array.ptr) >> 56, 0u);
    array.destroy(array.ptr);
}

TEST(Handles, ADestroyedHandleStaysDeadWhenItsMemoryIsReused) {
    // Many cycles: whatever the allocator does with the freed Array, the
    // new arrays' handles differ from every dead one and the dead ones are
    // reported as not ours.
    std::vector<mts_array_t> dead;
    for (int cycle = 0; cycle < 2000; cycle++) {
        auto array = make_array(static_cast<double>(cycle));
        for (const auto& old : dead) {
            ASSERT_NE(old.ptr, array.ptr) << "cycle " << cycle;
        }
        const mts_array_t stale = array;
        array.destroy(array.ptr);
        ASSERT_FALSE(is_ours(stale)) << "cycle " << cycle;
        if (cycle % 100 == 0) {
            dead.push_back(stale);
        }
    }
    for (const auto& old : dead) {
        EXPECT_FALSE(is_ours(old));
    }
}

TEST(Handles, ASecondDestroyNeverFreesAnotherArray) {
    auto first = make_array(1.0);
    const mts_array_t stale = first;
    first.destroy(first.ptr);

    auto second = make_array(2.0);
    // the destroyed handle again: must be ignored, `second` stays alive
    stale.destroy(stale.ptr);
    EXPECT_TRUE(is_ours(second));
    EXPECT_EQ(first_value(second), 2.0);

    // and a stale handle is refused by every callback, with a clear error
    DLDevice device = {};
    reset_last_error();
    EXPECT_EQ(stale.device(stale.ptr, &device), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("already destroyed"), std::string::npos) << last_error();
    const mts_data_movement_t movement = {0, 0, 0, 0, 3};
    EXPECT_EQ(second.move_data(second.ptr, stale.ptr, &movement, 1), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("input array was not made by mtsarray"), std::string::npos) << last_error();
    EXPECT_EQ(first_value(second), 2.0);
    second.destroy(second.ptr);
}

TEST(Handles, ForeignPointersAreNotOurs) {
    int destroyed = 0;
    auto foreign = ForeignArray::make(float64(), {}, to_bytes(std::vector<double>{1.0}), &destroyed);
    // a foreign array carrying our vtable: still refused by its ptr
    auto ours = make_array(1.0);
    mts_array_t impostor = ours;
    impostor.ptr = foreign.ptr;
    EXPECT_FALSE(is_ours(impostor));
    // arbitrary values, including ones with a tag-like top byte
    for (uintptr_t value : {uintptr_t(0), uintptr_t(1), (uintptr_t(0xA7) << 56) | ((uintptr_t(1) << 28) - 1), ~uintptr_t(0),
                            reinterpret_cast<uintptr_t>(ours.ptr) ^ 1,
                            reinterpret_cast<uintptr_t>(ours.ptr) + (uintptr_t(1) << 28)}) {
        impostor.ptr = reinterpret_cast<void*>(value);
        EXPECT_FALSE(is_ours(impostor)) << std::hex << value;
    }
    ours.destroy(ours.ptr);
    foreign.destroy(foreign.ptr);
    EXPECT_EQ(destroyed, 1);
}

TEST(Handles, ConcurrentDestroysOfOneHandleFreeItOnce) {
    for (int round = 0; round < 200; round++) {
        auto array = make_array(3.0);
        std::atomic<bool> go{false};
        std::vector<std::thread> threads;
        for (int t = 0; t < 4; t++) {
            threads.emplace_back([&] {
                while (!go.load()) {
                    std::this_thread::yield();
                }
                array.destroy(array.ptr);
            });
        }
        go.store(true);
        for (auto& thread : threads) {
            thread.join();
        }
        ASSERT_FALSE(is_ours(array));
    }
}

TEST(Handles, LookupsHoldWhileOtherThreadsCreateAndDestroy) {
    auto shared = make_array(7.0, 64);
    std::atomic<bool> stop{false};
    std::vector<std::thread> churn;
    for (int t = 0; t < 3; t++) {
        churn.emplace_back([&] {
            while (!stop.load()) {
                auto array = make_array(0.0);
                array.destroy(array.ptr);
            }
        });
    }
    for (int i = 0; i < 20000; i++) {
        ASSERT_TRUE(is_ours(shared));
    }
    stop.store(true);
    for (auto& thread : churn) {
        thread.join();
    }
    EXPECT_EQ(first_value(shared), 7.0);
    shared.destroy(shared.ptr);
}

#if defined(MTSARRAY_TEST_HOOKS) && MTSARRAY_TEST_HOOKS
TEST(Handles, TheLiveArrayCountSeesEveryArray) {
    const int64_t before = mtsarray_test_live_arrays();
    auto a = make_array(1.0);
    auto b = make_array(2.0);
    EXPECT_EQ(mtsarray_test_live_arrays(), before + 2);
    a.destroy(a.ptr);
    a.destroy(a.ptr);  // a second destroy changes nothing
    EXPECT_EQ(mtsarray_test_live_arrays(), before + 1);
    b.destroy(b.ptr);
    EXPECT_EQ(mtsarray_test_live_arrays(), before);
}
#endif
