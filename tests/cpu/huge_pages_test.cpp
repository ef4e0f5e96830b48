// Huge page advice for large host arrays (src/cpu/huge_pages.hpp): which
// range is advised, what MTSARRAY_HUGE_PAGES accepts, and, on Linux, that a
// large array made through the C API lies in memory the kernel marks as
// advised ("hg" in its VmFlags in /proc/self/smaps). The environment is read
// once per process: the HugePagesEnvironment tests run in their own ctest
// entries, which set it (tests/CMakeLists.txt).

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "support/backends.hpp"
#include "cpu/huge_pages.hpp"
#include "base/error.hpp"

using mtsarray::detail::Error;
using mtsarray::detail::cpu::huge_page_advice_bytes;
using mtsarray::detail::cpu::huge_page_advice_range;
using mtsarray::detail::cpu::huge_pages_wanted;
using mtsarray_test::last_error;

namespace {

constexpr size_t page = 4096;
const DLDevice CPU = {kDLCPU, 0};
const DLDataType F64 = {kDLFloat, 64, 1};

// The VmFlags of the mapping of this process that holds `address`, or ""
// when /proc/self/smaps has none (not Linux).
std::string vm_flags_of(const void* address) {
    std::ifstream smaps("/proc/self/smaps");
    const auto target = reinterpret_cast<uintptr_t>(address);
    std::string line;
    bool inside = false;
    while (std::getline(smaps, line)) {
        // a mapping starts with "begin-end perms ...", both in hexadecimal
        const auto dash = line.find('-');
        const auto space = line.find(' ');
        if (dash != std::string::npos && space != std::string::npos && dash < space &&
            line.find_first_not_of("0123456789abcdef") == dash) {
            const uintptr_t begin = std::stoull(line.substr(0, dash), nullptr, 16);
            const uintptr_t end = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
            inside = begin <= target && target < end;
        } else if (inside && line.rfind("VmFlags:", 0) == 0) {
            return line;
        }
    }
    return "";
}

bool has_flag(const std::string& vm_flags, const std::string& flag) {
    std::istringstream words(vm_flags);
    std::string word;
    while (words >> word) {
        if (word == flag) {
            return true;
        }
    }
    return false;
}

bool kernel_has_transparent_huge_pages() {
    return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good();
}

struct HostArray {
    mts_array_t array{};
    void* data = nullptr;
    explicit HostArray(size_t bytes) {
        const uintptr_t shape[1] = {bytes / 8};
        const double value = 0.5;
        if (mtsarray_full(CPU, F64, shape, 1, &value, &array) != MTS_SUCCESS) {
            ADD_FAILURE() << "mtsarray_full: " << last_error();
            return;
        }
        EXPECT_EQ(mtsarray_data(&array, &data), MTS_SUCCESS) << last_error();
    }
    ~HostArray() {
        if (array.destroy != nullptr) {
            array.destroy(array.ptr);
        }
    }
};

}  // namespace

TEST(HugePages, AdvisesTheWholePagesOfLargeArraysOnly) {
    // below the threshold: nothing, whatever the alignment
    EXPECT_EQ(huge_page_advice_range(reinterpret_cast<void*>(page * 1000), huge_page_advice_bytes - 1, page).bytes, 0u);
    EXPECT_EQ(huge_page_advice_range(reinterpret_cast<void*>(page * 1000), 0, page).bytes, 0u);
    // page-aligned: all of it
    auto range = huge_page_advice_range(reinterpret_cast<void*>(page * 1000), huge_page_advice_bytes, page);
    EXPECT_EQ(range.begin, page * 1000);
    EXPECT_EQ(range.bytes, huge_page_advice_bytes);
    // 64 bytes into a page (what malloc gives with our alignment): the pages
    // that lie wholly inside, never a byte outside the array
    for (uintptr_t start : {page * 1000 + 64, page * 1000 + page - 1, page * 1000 + 1}) {
        for (size_t bytes : {huge_page_advice_bytes, huge_page_advice_bytes + 100, huge_page_advice_bytes + page,
                             size_t{80} << 20}) {
            SCOPED_TRACE(::testing::Message() << "start " << start << ", " << bytes << " bytes");
            range = huge_page_advice_range(reinterpret_cast<void*>(start), bytes, page);
            EXPECT_EQ(range.begin % page, 0u);
            EXPECT_EQ(range.bytes % page, 0u);
            EXPECT_GE(range.begin, start);
            EXPECT_LE(range.begin + range.bytes, start + bytes);
            EXPECT_GT(range.begin + range.bytes + page, start + bytes);  // the last whole page is in
            EXPECT_LT(range.begin, start + page);                        // the first whole page is in
        }
    }
    // no page size, no advice
    EXPECT_EQ(huge_page_advice_range(reinterpret_cast<void*>(page * 1000), size_t{80} << 20, 0).bytes, 0u);
}

TEST(HugePages, ReadsTheEnvironmentValue) {
    EXPECT_TRUE(huge_pages_wanted(nullptr));
    EXPECT_TRUE(huge_pages_wanted(""));
    EXPECT_TRUE(huge_pages_wanted("  "));
    EXPECT_TRUE(huge_pages_wanted("1"));
    EXPECT_TRUE(huge_pages_wanted(" 1\n"));
    EXPECT_FALSE(huge_pages_wanted("0"));
    EXPECT_FALSE(huge_pages_wanted(" 0 "));
    for (const char* invalid : {"2", "-1", "yes", "off", "01", "1 1", "0x1"}) {
        SCOPED_TRACE(invalid);
        try {
            huge_pages_wanted(invalid);
            ADD_FAILURE() << "accepted";
        } catch (const Error& error) {
            const std::string message = error.what();
            EXPECT_NE(message.find("MTSARRAY_HUGE_PAGES='" + std::string(invalid) + "'"), std::string::npos)
                << message;
            EXPECT_NE(message.find("set it to 0"), std::string::npos) << message;
        }
    }
}

TEST(HugePages, LargeHostArraysLieInAdvisedMemory) {
    if (!kernel_has_transparent_huge_pages()) {
        GTEST_SKIP() << "this kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage)";
    }
    const char* setting = std::getenv("MTSARRAY_HUGE_PAGES");
    if (setting != nullptr && !huge_pages_wanted(setting)) {
        GTEST_SKIP() << "MTSARRAY_HUGE_PAGES=" << setting << " turns the advice off in this process";
    }
    for (size_t bytes : {huge_page_advice_bytes, size_t{64} << 20}) {
        SCOPED_TRACE(::testing::Message() << bytes << " bytes");
        HostArray array(bytes);
        ASSERT_NE(array.data, nullptr);
        const auto* data = static_cast<const unsigned char*>(array.data);
        // the middle and the last whole page; the values are the fill's
        for (const unsigned char* inside : {data + bytes / 2, data + (bytes - page) / page * page - 1}) {
            const std::string flags = vm_flags_of(inside);
            ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds the array";
            EXPECT_TRUE(has_flag(flags, "hg")) << flags;
        }
        EXPECT_EQ(static_cast<const double*>(array.data)[bytes / 16], 0.5);
    }
}

// Run with MTSARRAY_HUGE_PAGES=0 by its ctest entry.
TEST(HugePagesEnvironment, ZeroTurnsTheAdviceOff) {
    const char* setting = std::getenv("MTSARRAY_HUGE_PAGES");
    if (setting == nullptr || std::string(setting) != "0") {
        GTEST_SKIP() << "runs in its own ctest entry, with MTSARRAY_HUGE_PAGES=0";
    }
    if (!kernel_has_transparent_huge_pages()) {
        GTEST_SKIP() << "this kernel has no transparent huge pages (/sys/kernel/mm/transparent_hugepage)";
    }
    HostArray array(size_t{64} << 20);
    ASSERT_NE(array.data, nullptr);
    const std::string flags = vm_flags_of(static_cast<const unsigned char*>(array.data) + (size_t{32} << 20));
    ASSERT_FALSE(flags.empty());
    EXPECT_FALSE(has_flag(flags, "hg")) << flags;
}

// Run with MTSARRAY_HUGE_PAGES=yes by its ctest entry.
TEST(HugePagesEnvironment, AnInvalidValueFailsLargeAllocationsWithItsName) {
    const char* setting = std::getenv("MTSARRAY_HUGE_PAGES");
    if (setting == nullptr || std::string(setting) != "yes") {
        GTEST_SKIP() << "runs in its own ctest entry, with MTSARRAY_HUGE_PAGES=yes";
    }
    const double value = 1.0;
    for (int attempt = 0; attempt < 2; attempt++) {  // every time, not only the first
        const uintptr_t large[1] = {huge_page_advice_bytes / 8};
        mts_array_t array{};
        EXPECT_NE(mtsarray_full(CPU, F64, large, 1, &value, &array), MTS_SUCCESS);
        EXPECT_EQ(array.ptr, nullptr);
        const std::string message = last_error();
        EXPECT_NE(message.find("MTSARRAY_HUGE_PAGES='yes'"), std::string::npos) << message;
    }
    // small arrays never read it
    const uintptr_t small[1] = {1000};
    mts_array_t array{};
    ASSERT_EQ(mtsarray_full(CPU, F64, small, 1, &value, &array), MTS_SUCCESS) << last_error();
    array.destroy(array.ptr);
}
