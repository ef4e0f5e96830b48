#include "cpu/fill.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "cpu/threads/parallel_split.hpp"
#include "base/error.hpp"

namespace mtsarray::detail::cpu {

namespace {

// The sanitizers do not see the stores of inline assembly: their builds
// take the portable path, so that they check every byte written.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MTSARRAY_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MTSARRAY_SANITIZED_BUILD 1
#endif
#endif

// Pieces are whole pages of the destination: no two threads share a cache
// line, and the page faults of a new array are spread over the threads.
constexpr size_t piece_bytes_alignment = 4096;

// The first bytes written element by element before the doubling copies.
constexpr size_t seed_bytes = 256;
// Doubling copies read at most this much, from the (cached) start.
constexpr size_t doubling_chunk = 8192;

bool all_bytes_equal(const void* value, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(value);
    for (size_t i = 1; i < size; i++) {
        if (bytes[i] != bytes[0]) {
            return false;
        }
    }
    return true;
}

// Any pattern, any alignment: a few elements, then memcpy of what is
// already written onto what follows. libc's memcpy is vectorised for the
// machine it runs on, where a loop of stores compiled for baseline x86-64
// writes 16 bytes at a time: 4x slower than memset.
void fill_by_doubling(unsigned char* data, size_t bytes, const void* value, size_t element_size) {
    const size_t seed = bytes < seed_bytes ? bytes : seed_bytes;  // a multiple of element_size
    for (size_t offset = 0; offset < seed; offset += element_size) {
        std::memcpy(data + offset, value, element_size);
    }
    size_t done = seed;
    while (done < bytes) {
        size_t length = bytes - done;
        length = length < done ? length : done;
        length = length < doubling_chunk ? length : doubling_chunk;
        std::memcpy(data + done, data, length);
        done += length;
    }
}

// Elements of 1, 2, 4 or 8 bytes repeat every 8 bytes: on x86-64 with an
// 8-byte aligned destination, `rep stosq` stores that word with the fast
// string microcode memset itself uses.
bool fill_with_word(unsigned char* data, size_t bytes, const void* value, size_t element_size) {
#if defined(__x86_64__) && !defined(MTSARRAY_SANITIZED_BUILD)
    if (element_size > 8 || reinterpret_cast<uintptr_t>(data) % 8 != 0) {
        return false;
    }
    unsigned char pattern[8];
    for (size_t offset = 0; offset < 8; offset += element_size) {
        std::memcpy(pattern + offset, value, element_size);
    }
    uint64_t word = 0;
    std::memcpy(&word, pattern, 8);
    void* destination = data;
    size_t words = bytes / 8;
    asm volatile("rep stosq" : "+D"(destination), "+c"(words) : "a"(word) : "memory");
    // the tail starts on a word boundary: the pattern's first bytes
    std::memcpy(data + bytes / 8 * 8, pattern, bytes % 8);
    return true;
#else
    (void)data;
    (void)bytes;
    (void)value;
    (void)element_size;
    return false;
#endif
}

void fill_serially(unsigned char* data, size_t count, const void* value, size_t element_size) {
    const size_t bytes = count * element_size;
    // zeros (and any repeated byte) are a memset, the fastest path there is
    if (all_bytes_equal(value, element_size)) {
        std::memset(data, *static_cast<const unsigned char*>(value), bytes);
        return;
    }
    if (!fill_with_word(data, bytes, value, element_size)) {
        fill_by_doubling(data, bytes, value, element_size);
    }
}

}  // namespace

void fill(void* data, size_t count, const void* value, size_t element_size, size_t threads) {
    if (count == 0) {
        return;
    }
    MTSARRAY_EXPECTS(element_size != 0 && element_size <= 16 && piece_bytes_alignment % element_size == 0,
                     "fill: unsupported element size " + std::to_string(element_size));
    auto* bytes = static_cast<unsigned char*>(data);
    for_each_piece(count, piece_bytes_alignment / element_size, threads, [&](size_t begin, size_t end) {
        fill_serially(bytes + begin * element_size, end - begin, value, element_size);
    });
}

}  // namespace mtsarray::detail::cpu
