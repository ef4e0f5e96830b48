#pragma once
// Transparent huge pages for large host arrays. A new array above glibc's
// mmap threshold (32 MiB at most) is fresh memory whose 4 KiB pages all fault
// on first touch; on a virtual machine each fault costs about a microsecond,
// so writing a new 80 MiB array ran at 1.9 GB/s where writing an old one runs
// at 20 GB/s and more. Asking the kernel for huge pages on such memory
// (madvise(MADV_HUGEPAGE), which NumPy also does from 4 MiB) makes one fault
// per 2 MiB (the "create f64 1e7" and "copy f64 1e7" rows of mtsarray-bench,
// run with and without MTSARRAY_HUGE_PAGES=0, show the difference).
//
// Advice only: where the kernel has no transparent huge pages, or they are
// off, nothing changes. MTSARRAY_HUGE_PAGES=0 turns it off in mtsarray.

#include <cstddef>
#include <cstdint>
#include <string>

namespace mtsarray::detail::cpu {

/// Host arrays of at least this many bytes are advised.
constexpr size_t huge_page_advice_bytes = size_t{4} << 20;

/// The part of [data, data + bytes) that is advised: the whole pages of
/// `page_size` inside it when `bytes` >= huge_page_advice_bytes, else
/// nothing (`bytes` == 0 in the result). The kernel backs with huge pages
/// only the aligned huge-page ranges that lie wholly inside, so the advice
/// never reaches memory outside the array.
struct PageRange {
    uintptr_t begin;
    size_t bytes;
};
PageRange huge_page_advice_range(const void* data, size_t bytes, size_t page_size) noexcept;

/// What MTSARRAY_HUGE_PAGES says: unset or blank, "1": advise; "0": do
/// not. Throws Error naming the variable for any other value.
bool huge_pages_wanted(const char* value);

/// Advises huge pages for a new host array (Linux; a no-op elsewhere and
/// for arrays below huge_page_advice_bytes). The environment is read the
/// first time an array is large enough; an invalid value makes every large
/// host allocation throw that Error.
void advise_huge_pages(void* data, size_t bytes);

}  // namespace mtsarray::detail::cpu
