// cpu::strided_copy (swap_axes, and DLPack imports of strided tensors)
// against a plain loop over every element, with the baseline kernels and
// with the ones the CPU running the tests has (AVX2 and AVX-512 where there
// are):
// random shapes and axis orders, reversed axes, every element size, tails
// of every tile, unaligned pointers, several threads, empty arrays and 0-d
// scalars.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/cpu_features.hpp"
#include "cpu/strided_copy.hpp"

namespace cpu = mtsarray::detail::cpu;
using mtsarray::detail::StridedView;

namespace {

// The destination, C-contiguous, element by element: the reference.
std::vector<unsigned char> reference_copy(const StridedView& view) {
    size_t count = 1;
    for (auto size : view.shape) {
        count *= size;
    }
    std::vector<unsigned char> out(count * view.element_size);
    std::vector<uintptr_t> index(view.shape.size(), 0);
    const auto* source = static_cast<const unsigned char*>(view.data);
    for (size_t linear = 0; linear < count; linear++) {
        int64_t offset = 0;
        for (size_t axis = 0; axis < index.size(); axis++) {
            offset += static_cast<int64_t>(index[axis]) * view.strides[axis];
        }
        std::memcpy(out.data() + linear * view.element_size,
                    source + offset * static_cast<int64_t>(view.element_size), view.element_size);
        for (size_t axis = index.size(); axis-- > 0;) {
            if (++index[axis] < view.shape[axis]) {
                break;
            }
            index[axis] = 0;
        }
    }
    return out;
}

// A source laid out in C order for the axes permuted by `order`, some axes
// walked backwards, starting `misalignment` bytes after an aligned address.
struct Source {
    std::vector<unsigned char> storage;
    StridedView view;
};

Source make_source(std::mt19937_64& rng, const std::vector<uintptr_t>& shape, const std::vector<size_t>& order,
                   const std::vector<bool>& reversed, size_t element_size, size_t misalignment) {
    size_t count = 1;
    for (auto size : shape) {
        count *= size;
    }
    Source source;
    source.storage.resize(count * element_size + misalignment + 64);
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& value : source.storage) {
        value = static_cast<unsigned char>(byte(rng));
    }
    // memory order: order[0] outermost
    std::vector<int64_t> strides(shape.size(), 0);
    int64_t stride = 1;
    for (size_t k = order.size(); k-- > 0;) {
        strides[order[k]] = stride;
        stride *= static_cast<int64_t>(shape[order[k]]);
    }
    // the aligned part of the storage, then the misalignment
    auto base = reinterpret_cast<uintptr_t>(source.storage.data());
    int64_t first = static_cast<int64_t>((64 - base % 64) % 64 + misalignment) / static_cast<int64_t>(element_size);
    const int64_t shift = static_cast<int64_t>(((64 - base % 64) % 64 + misalignment) % element_size);
    for (size_t axis = 0; axis < shape.size(); axis++) {
        if (reversed[axis] && shape[axis] > 0) {
            first += (static_cast<int64_t>(shape[axis]) - 1) * strides[axis];
            strides[axis] = -strides[axis];
        }
    }
    source.view.data = source.storage.data() + shift + first * static_cast<int64_t>(element_size);
    source.view.shape = shape;
    source.view.strides = strides;
    source.view.element_size = element_size;
    return source;
}

std::vector<unsigned char> run(const StridedView& view, size_t threads, cpu::InstructionSet instructions,
                               size_t destination_misalignment) {
    size_t bytes = view.element_size;
    for (auto size : view.shape) {
        bytes *= size;
    }
    std::vector<unsigned char> storage(bytes + 64 + destination_misalignment, 0xAB);
    auto base = reinterpret_cast<uintptr_t>(storage.data());
    unsigned char* destination = storage.data() + (64 - base % 64) % 64 + destination_misalignment;
    cpu::strided_copy(destination, view, threads, instructions);
    return {destination, destination + bytes};
}

constexpr cpu::InstructionSet both_instruction_sets[] = {cpu::InstructionSet::baseline, cpu::InstructionSet::best};

void expect_every_kernel_matches(const Source& source, const std::vector<size_t>& thread_counts,
                                 size_t destination_misalignment) {
    const auto expected = reference_copy(source.view);
    for (auto instructions : both_instruction_sets) {
        for (auto threads : thread_counts) {
            SCOPED_TRACE(::testing::Message() << "threads " << threads << ", instructions "
                                              << (instructions == cpu::InstructionSet::best ? "best" : "baseline"));
            const auto copied = run(source.view, threads, instructions, destination_misalignment);
            ASSERT_EQ(copied.size(), expected.size());
            const auto mismatch = std::mismatch(copied.begin(), copied.end(), expected.begin());
            ASSERT_TRUE(mismatch.first == copied.end())
                << "first wrong byte at " << (mismatch.first - copied.begin()) << " of " << copied.size();
        }
    }
}

std::string describe(const StridedView& view) {
    std::string text = "shape (";
    for (auto size : view.shape) {
        text += std::to_string(size) + ",";
    }
    text += ") strides (";
    for (auto stride : view.strides) {
        text += std::to_string(stride) + ",";
    }
    return text + ") element " + std::to_string(view.element_size);
}

}  // namespace

TEST(StridedCopy, MatchesAPlainLoopOnRandomLayouts) {
    std::mt19937_64 rng(20261123);
    const size_t element_sizes[] = {1, 2, 4, 8, 16};
    for (int trial = 0; trial < 400; trial++) {
        const size_t rank = std::uniform_int_distribution<size_t>(0, 4)(rng);
        std::vector<uintptr_t> shape(rank);
        for (auto& size : shape) {
            // mostly small, sometimes 1, sometimes a few tiles long
            const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
            size = kind == 0 ? 1 : kind < 8 ? std::uniform_int_distribution<uintptr_t>(2, 19)(rng)
                                            : std::uniform_int_distribution<uintptr_t>(20, 300)(rng);
        }
        size_t count = 1;
        for (auto size : shape) {
            count *= size;
        }
        if (count > 200000) {
            continue;
        }
        std::vector<size_t> order(rank);
        std::iota(order.begin(), order.end(), size_t(0));
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<bool> reversed(rank);
        for (size_t axis = 0; axis < rank; axis++) {
            reversed[axis] = std::uniform_int_distribution<int>(0, 5)(rng) == 0;
        }
        const size_t element_size = element_sizes[std::uniform_int_distribution<size_t>(0, 4)(rng)];
        const size_t misalignment = std::uniform_int_distribution<size_t>(0, 2)(rng) == 0
                                        ? std::uniform_int_distribution<size_t>(1, 63)(rng)
                                        : 0;
        const auto source = make_source(rng, shape, order, reversed, element_size, misalignment);
        SCOPED_TRACE(describe(source.view));
        expect_every_kernel_matches(source, {1, 3}, misalignment == 0 ? 0 : 8);
    }
}

TEST(StridedCopy, TransposesLargeMatricesOfEveryElementSize) {
    // every tail of the 8-row, 4-column, 16x16 and 1 KiB-strip tiles, and
    // rows a multiple of 2 KiB apart in the source or in the destination
    // (the sizes whose rows share cache sets, with a kernel of their own)
    std::mt19937_64 rng(7);
    const std::vector<std::vector<uintptr_t>> shapes = {{1000, 1000}, {1024, 512}, {1036, 512}, {512, 1036},
                                                        {517, 301},   {9, 1003},   {1003, 9}};
    for (size_t element_size : {1, 2, 4, 8, 16}) {
        for (const auto& shape : shapes) {
            const auto source = make_source(rng, shape, {1, 0}, {false, false}, element_size, 0);
            SCOPED_TRACE(describe(source.view));
            expect_every_kernel_matches(source, {1, 2, 5}, 0);
        }
    }
}

TEST(StridedCopy, SwapsTheSmallAxesOfManySamples) {
    // (samples, 3, 16) -> (samples, 16, 3): the Cartesian components of a
    // metatensor block, with the outer axis shared between threads
    std::mt19937_64 rng(11);
    for (size_t element_size : {4, 8}) {
        const auto source = make_source(rng, {20001, 16, 3}, {0, 2, 1}, {false, false, false}, element_size, 0);
        SCOPED_TRACE(describe(source.view));
        expect_every_kernel_matches(source, {1, 4}, 0);
    }
}

TEST(StridedCopy, TransposesStacksOfPowerOfTwoMatricesWithTheAvx512Tiles) {
    // 4- and 8-byte elements whose rows are a multiple of 2 KiB apart take
    // 16x16 and 8x8 tiles (AVX-512 under `best` where the CPU has it; under
    // `baseline`, the buffered SSE2 tiles and the SSE2 blocks): tails of
    // 1-15 rows and columns, an outer axis shared between threads, the
    // source reversed or a few bytes off its alignment, the destination off
    // its alignment, two axes swapped out of three
    if (!cpu::cpu_has_avx512f()) {
        GTEST_SKIP() << "this CPU has no AVX-512: `best` runs the SSE2 tiles and the AVX2 blocks, which the "
                        "other tests check";
    }
    std::mt19937_64 rng(16);
    struct Case {
        std::vector<uintptr_t> shape;
        std::vector<size_t> order;
        std::vector<bool> reversed;
        size_t misalignment;  // in elements
    };
    for (size_t element_size : {size_t(4), size_t(8)}) {
        // rows 2 KiB apart; tails of 7 and 11 elements
        const uintptr_t n = 2048 / element_size;
        const std::vector<Case> cases = {
            {{n, 2 * n}, {1, 0}, {false, false}, 0},
            {{n + 7, n}, {1, 0}, {false, false}, 1},
            {{n, n + 11}, {1, 0}, {false, true}, 0},
            {{3, n, 47}, {0, 2, 1}, {false, false, false}, 0},
            {{5, 33, n}, {0, 2, 1}, {false, false, false}, 3},
            {{n, 4, n + 5}, {2, 1, 0}, {false, false, true}, 0},
        };
        for (const auto& c : cases) {
            const auto source = make_source(rng, c.shape, c.order, c.reversed, element_size,
                                            c.misalignment * element_size);
            SCOPED_TRACE(describe(source.view));
            expect_every_kernel_matches(source, {1, 3}, 0);
            expect_every_kernel_matches(source, {2}, element_size);
        }
    }
}

TEST(StridedCopy, EmptyArraysAndScalarsCopyWhatTheyHold) {
    std::mt19937_64 rng(3);
    // a 0-d scalar: one element
    const auto scalar = make_source(rng, {}, {}, {}, 8, 0);
    expect_every_kernel_matches(scalar, {1, 2}, 0);
    // an empty array writes nothing
    for (const auto& shape : std::vector<std::vector<uintptr_t>>{{0}, {5, 0}, {0, 7, 3}}) {
        std::vector<size_t> order(shape.size());
        std::iota(order.begin(), order.end(), size_t(0));
        std::reverse(order.begin(), order.end());
        const auto source = make_source(rng, shape, order, std::vector<bool>(shape.size(), false), 4, 0);
        unsigned char sentinel[8];
        std::memset(sentinel, 0x5A, sizeof(sentinel));
        cpu::strided_copy(sentinel, source.view, 2);
        for (auto value : sentinel) {
            EXPECT_EQ(value, 0x5A);
        }
    }
}
