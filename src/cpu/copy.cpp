#include "cpu/copy.hpp"

#include <cstring>

#include "cpu/threads/parallel_split.hpp"

namespace mtsarray::detail::cpu {

namespace {
// Pieces start on page boundaries of the source's offsets: no two threads
// share a cache line, and page faults of a new destination are spread.
constexpr size_t piece_alignment = 4096;
}  // namespace

void copy(void* destination, const void* source, size_t bytes, size_t threads) {
    if (bytes == 0) {
        return;
    }
    auto* output = static_cast<unsigned char*>(destination);
    const auto* input = static_cast<const unsigned char*>(source);
    for_each_piece(bytes, piece_alignment, threads, [&](size_t begin, size_t end) {
        std::memcpy(output + begin, input + begin, end - begin);
    });
}

}  // namespace mtsarray::detail::cpu
