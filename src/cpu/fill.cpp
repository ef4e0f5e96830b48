#include "cpu/fill.hpp"

#include <cstdint>
#include <cstring>
#include <string>

#include "cpu/parallel_split.hpp"
#include "error.hpp"

namespace mtsarray::detail::cpu {

namespace {

// memcpy stores: wrapped user memory need not be aligned to the element
// size, and the compiler still turns this loop into vector stores
template <typename Word>
void fill_words(void* data, size_t count, const void* value) {
    Word word;
    std::memcpy(&word, value, sizeof(Word));
    auto* output = static_cast<unsigned char*>(data);
    for (size_t i = 0; i < count; i++) {
        std::memcpy(output + i * sizeof(Word), &word, sizeof(Word));
    }
}

struct Pair {
    uint64_t low;
    uint64_t high;
};

bool all_bytes_equal(const void* value, size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(value);
    for (size_t i = 1; i < size; i++) {
        if (bytes[i] != bytes[0]) {
            return false;
        }
    }
    return true;
}

// Pieces are whole pages of the destination: no two threads share a cache
// line, and the page faults of a new array are spread over the threads.
constexpr size_t piece_bytes_alignment = 4096;

void fill_serially(unsigned char* data, size_t count, const void* value, size_t element_size) {
    // zeros (and any repeated byte) are a memset, the fastest path there is
    if (all_bytes_equal(value, element_size)) {
        std::memset(data, *static_cast<const unsigned char*>(value), count * element_size);
        return;
    }
    switch (element_size) {
    case 2: return fill_words<uint16_t>(data, count, value);
    case 4: return fill_words<uint32_t>(data, count, value);
    case 8: return fill_words<uint64_t>(data, count, value);
    case 16: return fill_words<Pair>(data, count, value);
    default: throw Error("fill: unsupported element size " + std::to_string(element_size));
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
