// Shape: the dimensions of an array, inline up to Shape::inline_capacity and
// on the heap beyond. Every copy, move and assignment between the two kinds
// of storage is compared with a std::vector holding the same dimensions.

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.hpp"
#include "base/shape.hpp"

using mtsarray::detail::Shape;

namespace {

std::vector<uintptr_t> as_vector(const Shape& shape) {
    return std::vector<uintptr_t>(shape.begin(), shape.end());
}

std::vector<uintptr_t> dimensions_of_rank(size_t rank, uintptr_t first) {
    std::vector<uintptr_t> dimensions(rank);
    for (size_t axis = 0; axis < rank; axis++) {
        dimensions[axis] = first + 3 * axis;
    }
    return dimensions;
}

// ranks on both sides of the inline capacity
const std::vector<size_t> RANKS = {0, 1, 2, Shape::inline_capacity - 1, Shape::inline_capacity,
                                   Shape::inline_capacity + 1, 2 * Shape::inline_capacity + 3, 40};

}  // namespace

TEST(Shape, HoldsItsDimensionsAtEveryRank) {
    for (size_t rank : RANKS) {
        SCOPED_TRACE(::testing::Message() << rank << " axes");
        const auto expected = dimensions_of_rank(rank, 7);
        const Shape shape(expected.data(), expected.size());
        EXPECT_EQ(shape.size(), rank);
        EXPECT_EQ(shape.empty(), rank == 0);
        EXPECT_EQ(as_vector(shape), expected);
        EXPECT_EQ(Shape(expected), shape);
        if (rank > 0) {
            EXPECT_EQ(shape.front(), expected.front());
            EXPECT_EQ(shape.back(), expected.back());
            EXPECT_EQ(shape[rank - 1], expected[rank - 1]);
        }
        const Shape zeros(rank);
        EXPECT_EQ(as_vector(zeros), std::vector<uintptr_t>(rank, 0));
    }
    // braces list the dimensions, as for std::vector
    EXPECT_EQ(as_vector(Shape{5}), std::vector<uintptr_t>{5});
    EXPECT_EQ(as_vector(Shape{}), std::vector<uintptr_t>{});
    EXPECT_EQ(as_vector(Shape{2, 3, 4}), (std::vector<uintptr_t>{2, 3, 4}));
}

TEST(Shape, CopiesMovesAndAssignmentsBetweenInlineAndHeapStorage) {
    for (size_t from_rank : RANKS) {
        for (size_t to_rank : RANKS) {
            SCOPED_TRACE(::testing::Message() << from_rank << " axes assigned over " << to_rank << " axes");
            const auto from = dimensions_of_rank(from_rank, 11);
            const auto to = dimensions_of_rank(to_rank, 101);

            Shape copied(from);
            Shape target(to);
            target = copied;
            EXPECT_EQ(as_vector(target), from);
            EXPECT_EQ(as_vector(copied), from);  // the source is untouched

            Shape moved_from(from);
            Shape moved_to(to);
            moved_to = std::move(moved_from);
            EXPECT_EQ(as_vector(moved_to), from);
            EXPECT_TRUE(moved_from.empty());  // NOLINT(bugprone-use-after-move): documented state
            moved_from = Shape(to);  // a moved-from shape is usable again
            EXPECT_EQ(as_vector(moved_from), to);

            Shape constructed(std::move(moved_to));
            EXPECT_EQ(as_vector(constructed), from);
            Shape copy_constructed(constructed);
            EXPECT_EQ(as_vector(copy_constructed), from);
            // the copy owns its storage: writing one leaves the other alone
            if (from_rank > 0) {
                copy_constructed[0] = 999;
                EXPECT_EQ(constructed[0], from[0]);
            }
        }
    }
}

TEST(Shape, SelfAssignmentKeepsTheDimensions) {
    for (size_t rank : RANKS) {
        SCOPED_TRACE(::testing::Message() << rank << " axes");
        const auto expected = dimensions_of_rank(rank, 3);
        Shape shape(expected);
        Shape& alias = shape;
        shape = alias;
        EXPECT_EQ(as_vector(shape), expected);
        shape = std::move(alias);
        EXPECT_EQ(as_vector(shape), expected);
    }
}

TEST(Shape, EqualityComparesRankAndEveryDimension) {
    EXPECT_EQ(Shape({2, 3}), Shape({2, 3}));
    EXPECT_NE(Shape({2, 3}), Shape({3, 2}));
    EXPECT_NE(Shape({2, 3}), Shape({2, 3, 1}));
    EXPECT_NE(Shape({}), Shape({1}));
    const auto long_dimensions = dimensions_of_rank(20, 1);
    auto changed = long_dimensions;
    changed[19] += 1;
    EXPECT_EQ(Shape(long_dimensions), Shape(long_dimensions));
    EXPECT_NE(Shape(long_dimensions), Shape(changed));
}

TEST(Shape, RandomSequencesOfOperationsMatchAVector) {
    std::mt19937_64 random(20261123);
    std::uniform_int_distribution<size_t> rank_of(0, 3 * Shape::inline_capacity);
    std::vector<Shape> shapes(4);
    std::vector<std::vector<uintptr_t>> expected(4);
    for (int step = 0; step < 5000; step++) {
        const size_t a = random() % 4, b = random() % 4;
        switch (random() % 4) {
        case 0: {
            expected[a] = dimensions_of_rank(rank_of(random), random() % 1000);
            shapes[a] = Shape(expected[a].data(), expected[a].size());
            break;
        }
        case 1:
            shapes[a] = shapes[b];
            expected[a] = expected[b];
            break;
        case 2:
            if (a != b) {
                shapes[a] = std::move(shapes[b]);
                expected[a] = std::move(expected[b]);
                expected[b].clear();
            }
            break;
        default:
            std::swap(shapes[a], shapes[b]);
            std::swap(expected[a], expected[b]);
        }
        for (size_t i = 0; i < shapes.size(); i++) {
            ASSERT_EQ(as_vector(shapes[i]), expected[i]) << "step " << step << ", shape " << i;
        }
    }
}

TEST(Shape, ElementCountsAndMessages) {
    using mtsarray::detail::checked_element_count;
    using mtsarray::detail::describe_shape;
    using mtsarray::detail::element_count;
    EXPECT_EQ(element_count(Shape{}), 1u);  // a 0-d scalar
    EXPECT_EQ(checked_element_count(Shape{2, 3, 4}, 8), 24u);
    EXPECT_EQ(checked_element_count(Shape{0, UINTPTR_MAX / 2}, 8), 0u);
    EXPECT_THROW(checked_element_count(Shape{uintptr_t(1) << 40, uintptr_t(1) << 40}, 8),
                 mtsarray::detail::Error);
    EXPECT_EQ(describe_shape(Shape{}), "[]");
    EXPECT_EQ(describe_shape(Shape(dimensions_of_rank(8, 1))), "[1, 4, 7, 10, 13, 16, 19, 22]");
}
