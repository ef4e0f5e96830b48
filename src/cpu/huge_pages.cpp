#include "cpu/huge_pages.hpp"

#include <cstdlib>

#include "cpu/environment_value.hpp"
#include "base/error.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace mtsarray::detail::cpu {

PageRange huge_page_advice_range(const void* data, size_t bytes, size_t page_size) noexcept {
    if (bytes < huge_page_advice_bytes || page_size == 0) {
        return {0, 0};
    }
    const auto start = reinterpret_cast<uintptr_t>(data);
    const uintptr_t begin = (start + page_size - 1) / page_size * page_size;
    const uintptr_t end = (start + bytes) / page_size * page_size;
    if (end <= begin) {
        return {0, 0};
    }
    return {begin, static_cast<size_t>(end - begin)};
}

bool huge_pages_wanted(const char* value) {
    if (value == nullptr) {
        return true;
    }
    const std::string text = without_surrounding_blanks(value);
    if (text.empty() || text == "1") {
        return true;
    }
    if (text == "0") {
        return false;
    }
    throw Error("MTSARRAY_HUGE_PAGES='" + std::string(value) +
                "' is not valid: set it to 0 (no huge page advice for large host arrays) or 1 (the default)");
}

namespace {

// The environment, read once.
struct HugePageSetting {
    bool wanted;
    std::string error;  // not empty: the value is invalid (kept for every large allocation)
};

const HugePageSetting& setting() {
    static const HugePageSetting decided = [] {
        try {
            return HugePageSetting{huge_pages_wanted(std::getenv("MTSARRAY_HUGE_PAGES")), ""};
        } catch (const Error& error) {
            return HugePageSetting{false, error.what()};
        }
    }();
    return decided;
}

}  // namespace

void advise_huge_pages(void* data, size_t bytes) {
    if (bytes < huge_page_advice_bytes) {
        return;
    }
    const HugePageSetting& decided = setting();
    if (!decided.error.empty()) {
        throw Error(decided.error);
    }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (decided.wanted) {
        static const auto page_size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
        const PageRange range = huge_page_advice_range(data, bytes, page_size);
        if (range.bytes != 0) {
            // advice: EINVAL where the kernel has no transparent huge pages,
            // and then nothing changes
            (void)madvise(reinterpret_cast<void*>(range.begin), range.bytes, MADV_HUGEPAGE);
        }
    }
#else
    (void)data;
#endif
}

}  // namespace mtsarray::detail::cpu
