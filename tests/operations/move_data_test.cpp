// move_data: fixed cases, a randomized cross-check against a naive
// reference (fixed seed), moves within one array, and the validation that
// must reject bad input before writing anything.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

// ---- the reference ------------------------------------------------------------

struct Layout {
    std::vector<uintptr_t> shape;  // [samples, components..., properties]
    size_t components() const {
        size_t count = 1;
        for (size_t axis = 1; axis + 1 < shape.size(); axis++) {
            count *= shape[axis];
        }
        return count;
    }
    size_t properties() const { return shape.back(); }
};

/// Movement by movement, element by element, as metatensor.h specifies it.
/// `input` is read as it was before the call (a copy is passed).
void reference_move(std::vector<uint8_t>& output, const Layout& out, const std::vector<uint8_t> input,
                    const Layout& in, size_t element, const std::vector<mts_data_movement_t>& movements) {
    const size_t components = in.components();
    for (const auto& m : movements) {
        for (size_t c = 0; c < components; c++) {
            for (size_t x = 0; x < m.properties_length; x++) {
                const size_t source = ((m.sample_in * components + c) * in.properties() + m.properties_start_in + x);
                const size_t target =
                    ((m.sample_out * components + c) * out.properties() + m.properties_start_out + x);
                std::memcpy(output.data() + target * element, input.data() + source * element, element);
            }
        }
    }
}

mts_status_t call_move_data(const mtsarray::Array& output, const void* input,
                            const std::vector<mts_data_movement_t>& movements) {
    const auto& raw = output.get();
    return raw.move_data(raw.ptr, input, movements.data(), movements.size());
}

// one dtype per element size
std::vector<DLDataType> dtypes_by_size() {
    return {make_dtype(kDLUInt, 8), make_dtype(kDLFloat, 16), make_dtype(kDLFloat, 32), make_dtype(kDLInt, 64),
            make_dtype(kDLComplex, 128)};
}

// ---- random plans ---------------------------------------------------------------

struct RandomPlan {
    DLDataType dtype;
    Layout in;
    Layout out;
    std::vector<mts_data_movement_t> movements;
    std::string kind;
};

uintptr_t uniform(std::mt19937_64& rng, uintptr_t low, uintptr_t high) {
    return std::uniform_int_distribution<uintptr_t>(low, high)(rng);
}

RandomPlan random_plan(std::mt19937_64& rng) {
    RandomPlan plan;
    auto dtypes = dtypes_by_size();
    plan.dtype = dtypes[uniform(rng, 0, dtypes.size() - 1)];

    std::vector<uintptr_t> components(uniform(rng, 0, 3));
    for (auto& size : components) {
        size = uniform(rng, 0, 19) == 0 ? 0 : uniform(rng, 1, 3);
    }
    const uintptr_t samples_in = uniform(rng, 0, 9);
    const uintptr_t samples_out = uniform(rng, 0, 9);
    uintptr_t properties_in = uniform(rng, 0, 11);
    uintptr_t properties_out = uniform(rng, 0, 11);

    const int mode = static_cast<int>(uniform(rng, 0, 5));
    if (mode == 3) {
        properties_out = properties_in;  // whole rows on both sides
    }

    plan.in.shape = {samples_in};
    plan.in.shape.insert(plan.in.shape.end(), components.begin(), components.end());
    plan.in.shape.push_back(properties_in);
    plan.out.shape = {samples_out};
    plan.out.shape.insert(plan.out.shape.end(), components.begin(), components.end());
    plan.out.shape.push_back(properties_out);

    if (samples_in == 0 || samples_out == 0 || mode == 0) {
        plan.kind = "no movement";
        return plan;
    }
    const uintptr_t max_length = std::min(properties_in, properties_out);
    auto random_range = [&](uintptr_t* start_in, uintptr_t* start_out, uintptr_t* length) {
        *length = uniform(rng, 0, max_length);
        *start_in = uniform(rng, 0, properties_in - *length);
        *start_out = uniform(rng, 0, properties_out - *length);
    };

    // every output sample receives from at most one movement (disjoint
    // writes), so that any execution order gives the same result
    std::vector<uintptr_t> targets(samples_out);
    std::iota(targets.begin(), targets.end(), 0);
    std::shuffle(targets.begin(), targets.end(), rng);
    targets.resize(uniform(rng, 1, samples_out));

    if (mode == 1) {
        plan.kind = "scattered";
        for (auto target : targets) {
            mts_data_movement_t m = {uniform(rng, 0, samples_in - 1), target, 0, 0, 0};
            random_range(&m.properties_start_in, &m.properties_start_out, &m.properties_length);
            plan.movements.push_back(m);
        }
    } else if (mode == 2 || mode == 3) {
        plan.kind = mode == 2 ? "consecutive runs" : "whole rows";
        // consecutive samples on both sides, same property range: these
        // coalesce into runs (and whole rows into one contiguous copy)
        uintptr_t length = std::min(samples_in, samples_out);
        length = uniform(rng, 1, length);
        const uintptr_t first_in = uniform(rng, 0, samples_in - length);
        const uintptr_t first_out = uniform(rng, 0, samples_out - length);
        uintptr_t start_in = 0, start_out = 0, properties = properties_in;
        if (mode == 2) {
            random_range(&start_in, &start_out, &properties);
        }
        for (uintptr_t i = 0; i < length; i++) {
            plan.movements.push_back({first_in + i, first_out + i, start_in, start_out, properties});
        }
    } else if (mode == 4) {
        plan.kind = "disjoint segments";
        // several movements into one output sample, each to its own part of
        // the properties
        for (auto target : targets) {
            uintptr_t start = 0;
            while (start < properties_out) {
                const uintptr_t length = std::min(uniform(rng, 0, 4), properties_out - start);
                const uintptr_t limited = std::min(length, properties_in);
                mts_data_movement_t m = {uniform(rng, 0, samples_in - 1), target,
                                         uniform(rng, 0, properties_in - limited), start, limited};
                plan.movements.push_back(m);
                start += std::max<uintptr_t>(length, 1);
            }
        }
    } else {
        plan.kind = "zero-length and full mixes";
        for (auto target : targets) {
            mts_data_movement_t m = {uniform(rng, 0, samples_in - 1), target, 0, 0, 0};
            if (uniform(rng, 0, 1) == 0) {
                m.properties_start_in = uniform(rng, 0, properties_in);  // may be == properties
                m.properties_start_out = uniform(rng, 0, properties_out);
            } else {
                random_range(&m.properties_start_in, &m.properties_start_out, &m.properties_length);
            }
            plan.movements.push_back(m);
        }
    }
    return plan;
}

// ---- fixtures -------------------------------------------------------------------

class MoveData : public ::testing::TestWithParam<DLDevice> {
protected:
    void SetUp() override { MTSARRAY_SKIP_UNLESS_AVAILABLE(GetParam()); }
    DLDevice device() const { return GetParam(); }

    /// Runs `plan` on the backend and compares with the reference.
    void check_plan(const RandomPlan& plan, std::mt19937_64& rng) {
        const size_t element = element_size(plan.dtype);
        auto input_bytes = random_bytes(rng, product(plan.in.shape) * element);
        auto output_bytes = random_bytes(rng, product(plan.out.shape) * element);
        auto input = array_from_bytes(device(), plan.dtype, plan.in.shape, input_bytes);
        auto output = array_from_bytes(device(), plan.dtype, plan.out.shape, output_bytes);

        auto expected = output_bytes;
        reference_move(expected, plan.out, input_bytes, plan.in, element, plan.movements);

        ASSERT_EQ(call_move_data(output, input.get().ptr, plan.movements), MTS_SUCCESS) << last_error();
        ASSERT_EQ(read_bytes(output), expected);
        ASSERT_EQ(read_bytes(input), input_bytes) << "move_data changed its input";
    }
};

INSTANTIATE_TEST_SUITE_P(AllBackends, MoveData, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) { return device_name(info.param); });

TEST_P(MoveData, TwoDimensionalExample) {
    // input [4, 3] = 0..11, output [5, 4] = -1
    std::vector<double> input_values(12);
    std::iota(input_values.begin(), input_values.end(), 0.0);
    auto input = array_from_bytes(device(), float64(), {4, 3}, to_bytes(input_values));
    auto output = array_from_bytes(device(), float64(), {5, 4}, to_bytes(std::vector<double>(20, -1.0)));

    std::vector<mts_data_movement_t> movements = {
        {0, 1, 0, 1, 3},  // input row 0 -> output row 1, columns 1..3
        {3, 4, 1, 0, 2},  // input [3, 1:3] -> output [4, 0:2]
        {2, 0, 2, 3, 1},  // input [2, 2] -> output [0, 3]
    };
    ASSERT_EQ(call_move_data(output, input.get().ptr, movements), MTS_SUCCESS) << last_error();
    const std::vector<double> expected = {
        -1, -1, -1, 8,   //
        -1, 0,  1,  2,   //
        -1, -1, -1, -1,  //
        -1, -1, -1, -1,  //
        10, 11, -1, -1,  //
    };
    EXPECT_EQ(from_bytes<double>(read_bytes(output)), expected);
}

TEST_P(MoveData, ComponentsAreMovedTogether) {
    // input [2, 2, 3] (samples, one component axis, properties)
    std::vector<int32_t> input_values(12);
    std::iota(input_values.begin(), input_values.end(), 100);
    auto input = array_from_bytes(device(), int32(), {2, 2, 3}, to_bytes(input_values));
    auto output = mtsarray::Array::zeros(device(), int32(), {3, 2, 2});

    std::vector<mts_data_movement_t> movements = {{1, 0, 1, 0, 2}, {0, 2, 0, 1, 1}};
    ASSERT_EQ(call_move_data(output, input.get().ptr, movements), MTS_SUCCESS) << last_error();
    const std::vector<int32_t> expected = {
        107, 108, 110, 111,  // sample 0 <- input sample 1, properties 1..2, both components
        0,   0,   0,   0,    //
        0,   100, 0,   103,  // sample 2, property 1 <- input sample 0 property 0
    };
    EXPECT_EQ(from_bytes<int32_t>(read_bytes(output)), expected);
}

TEST_P(MoveData, NothingToMove) {
    std::mt19937_64 rng(7);
    auto bytes = random_bytes(rng, 6 * 8);
    auto output = array_from_bytes(device(), float64(), {2, 3}, bytes);
    auto input = mtsarray::Array::zeros(device(), float64(), {2, 3});
    // no movement, and a NULL movement list with count 0
    ASSERT_EQ(call_move_data(output, input.get().ptr, {}), MTS_SUCCESS) << last_error();
    ASSERT_EQ(output.get().move_data(output.get().ptr, input.get().ptr, nullptr, 0), MTS_SUCCESS) << last_error();
    // zero-length movements, also at the very end of the properties
    ASSERT_EQ(call_move_data(output, input.get().ptr, {{0, 1, 3, 3, 0}, {1, 0, 0, 2, 0}}), MTS_SUCCESS)
        << last_error();
    EXPECT_EQ(read_bytes(output), bytes);

    // arrays with no properties, no components or no samples
    auto no_properties = mtsarray::Array::zeros(device(), float64(), {2, 0});
    ASSERT_EQ(call_move_data(no_properties, no_properties.get().ptr, {{0, 1, 0, 0, 0}}), MTS_SUCCESS)
        << last_error();
    auto no_components_in = mtsarray::Array::zeros(device(), float64(), {2, 0, 3});
    auto no_components_out = mtsarray::Array::zeros(device(), float64(), {2, 0, 3});
    ASSERT_EQ(call_move_data(no_components_out, no_components_in.get().ptr, {{0, 1, 0, 0, 3}}), MTS_SUCCESS)
        << last_error();
    auto no_samples = mtsarray::Array::zeros(device(), float64(), {0, 3});
    ASSERT_EQ(call_move_data(no_samples, input.get().ptr, {}), MTS_SUCCESS) << last_error();
}

TEST_P(MoveData, RandomPlansMatchTheReference) {
    std::mt19937_64 rng(0x6d6f76655f6461);  // fixed seed: failures reproduce
    std::map<std::string, int> kinds;
    for (int i = 0; i < 1200; i++) {
        auto plan = random_plan(rng);
        kinds[plan.kind] += 1;
        SCOPED_TRACE(::testing::Message() << "plan " << i << " (" << plan.kind << ", " << plan.movements.size()
                                          << " movements, element size " << element_size(plan.dtype) << ")");
        check_plan(plan, rng);
        if (HasFatalFailure()) {
            return;
        }
    }
    // every kind of plan was exercised
    EXPECT_EQ(kinds.size(), 6u);
    for (const auto& kind : kinds) {
        EXPECT_GE(kind.second, 50) << kind.first;
    }
}

TEST_P(MoveData, LargePlansMatchTheReference) {
    std::mt19937_64 rng(99);
    // 10^6 elements: whole rows in a permuted order (one run per sample),
    // consecutive whole rows (one contiguous copy) and partial rows
    RandomPlan permuted{float32(), {{1000, 10, 100}}, {{1000, 10, 100}}, {}, "permuted whole rows"};
    std::vector<uintptr_t> order(1000);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    for (uintptr_t i = 0; i < 1000; i++) {
        permuted.movements.push_back({order[i], i, 0, 0, 100});
    }
    check_plan(permuted, rng);

    RandomPlan contiguous{make_dtype(kDLUInt, 8), {{1000, 1000}}, {{1200, 1000}}, {}, "consecutive whole rows"};
    for (uintptr_t i = 0; i < 1000; i++) {
        contiguous.movements.push_back({i, i + 100, 0, 0, 1000});
    }
    check_plan(contiguous, rng);

    // scattered rows of a large input (over 8 MiB copied: the input rows are
    // fetched ahead), one and three components, the last movements near the
    // end of the list and of the input
    RandomPlan scattered{float64(), {{50000, 32}}, {{41001, 32}}, {}, "scattered rows of a large input"};
    std::vector<uintptr_t> samples(50000);
    std::iota(samples.begin(), samples.end(), 0);
    std::shuffle(samples.begin(), samples.end(), rng);
    for (uintptr_t i = 0; i < 41000; i++) {
        scattered.movements.push_back({samples[i], i, 0, 0, 32});
    }
    scattered.movements.push_back({49999, 41000, 0, 0, 32});
    // exactly as long as the list: a read past its end (the prefetch looks
    // ahead) is an error under AddressSanitizer
    scattered.movements.shrink_to_fit();
    check_plan(scattered, rng);

    RandomPlan components{float32(), {{20000, 3, 64}}, {{12000, 3, 64}}, {}, "scattered rows with components"};
    for (uintptr_t i = 0; i < 12000; i++) {
        components.movements.push_back({samples[i] % 20000, 11999 - i, 0, 0, 64});
    }
    components.movements.shrink_to_fit();
    check_plan(components, rng);

    // long lists (checked in parts, on several threads where there are)
    // whose movements share their ranges but one late movement, and whose
    // halves have ranges of their own
    RandomPlan one_differs{float64(), {{20000, 8}}, {{20000, 16}}, {}, "one late movement with its own ranges"};
    for (uintptr_t i = 0; i < 20000; i++) {
        one_differs.movements.push_back({samples[i] % 20000, i, 0, 8, 8});
    }
    one_differs.movements[15000] = {3, 15000, 2, 1, 5};
    check_plan(one_differs, rng);
    RandomPlan halves{float64(), {{20000, 8}}, {{20000, 16}}, {}, "halves with ranges of their own"};
    for (uintptr_t i = 0; i < 20000; i++) {
        halves.movements.push_back({samples[i] % 20000, i, 0, uintptr_t(i < 10000 ? 8 : 4), uintptr_t(i < 10000 ? 8 : 2)});
    }
    check_plan(halves, rng);
    // movements that share their ranges and merge into runs of eight
    // samples (on several threads, then on one), and a few long scattered
    // movements (their bytes cut between threads)
    RandomPlan runs{float64(), {{20000, 16}}, {{20000, 16}}, {}, "runs of eight samples"};
    for (uintptr_t i = 0; i < 20000; i++) {
        runs.movements.push_back({(2499 - i / 8) * 8 + i % 8, i, 0, 0, 16});
    }
    check_plan(runs, rng);
    RandomPlan short_runs{float64(), {{400, 4}}, {{400, 6}}, {}, "runs of four samples, few bytes"};
    for (uintptr_t i = 0; i < 100; i++) {
        short_runs.movements.push_back({(99 - i / 4) * 4 + i % 4, i + 7, 0, 2, 4});
    }
    check_plan(short_runs, rng);
    RandomPlan long_rows{float32(), {{64, 2, 4096}}, {{70, 2, 4096}}, {}, "few long scattered rows"};
    for (uintptr_t i = 0; i < 64; i++) {
        long_rows.movements.push_back({(i * 37) % 64, i + 3, 0, 0, 4096});
    }
    check_plan(long_rows, rng);

    RandomPlan partial{make_dtype(kDLComplex, 128), {{500, 2, 1000}}, {{500, 2, 999}}, {}, "partial rows"};
    for (uintptr_t i = 0; i < 500; i++) {
        partial.movements.push_back({499 - i, i, i % 7, (i * 3) % 11, 977});
    }
    check_plan(partial, rng);
}

TEST_P(MoveData, WithinOneArrayReadsTheOriginal) {
    // shifting samples down by one: a sequential in-place copy would smear
    // sample 0 over every row; the contract reads the input as it was
    std::mt19937_64 rng(3);
    const std::vector<uintptr_t> shape = {6, 2, 5};
    auto bytes = random_bytes(rng, product(shape) * 4);
    auto array = array_from_bytes(device(), float32(), shape, bytes);
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 5; i++) {
        movements.push_back({i, i + 1, 0, 0, 5});
    }
    auto expected = bytes;
    reference_move(expected, {shape}, bytes, {shape}, 4, movements);
    ASSERT_EQ(call_move_data(array, array.get().ptr, movements), MTS_SUCCESS) << last_error();
    EXPECT_EQ(read_bytes(array), expected);

    // shifting properties right by one inside every row
    bytes = read_bytes(array);
    movements.clear();
    for (uintptr_t i = 0; i < 6; i++) {
        movements.push_back({i, i, 0, 1, 4});
    }
    expected = bytes;
    reference_move(expected, {shape}, bytes, {shape}, 4, movements);
    ASSERT_EQ(call_move_data(array, array.get().ptr, movements), MTS_SUCCESS) << last_error();
    EXPECT_EQ(read_bytes(array), expected);

    // swapping two samples
    bytes = read_bytes(array);
    movements = {{0, 5, 0, 0, 5}, {5, 0, 0, 0, 5}};
    expected = bytes;
    reference_move(expected, {shape}, bytes, {shape}, 4, movements);
    ASSERT_EQ(call_move_data(array, array.get().ptr, movements), MTS_SUCCESS) << last_error();
    EXPECT_EQ(read_bytes(array), expected);
}

TEST_P(MoveData, RandomPlansWithinOneArray) {
    std::mt19937_64 rng(1234);
    for (int i = 0; i < 200; i++) {
        auto plan = random_plan(rng);
        plan.out = plan.in;  // same array: regenerate movements for its shape
        plan.movements.clear();
        const auto samples = plan.in.shape.front();
        const auto properties = plan.in.properties();
        if (samples > 0) {
            std::vector<uintptr_t> targets(samples);
            std::iota(targets.begin(), targets.end(), 0);
            std::shuffle(targets.begin(), targets.end(), rng);
            for (uintptr_t k = 0; k < uniform(rng, 0, samples); k++) {
                const uintptr_t length = uniform(rng, 0, properties);
                plan.movements.push_back({uniform(rng, 0, samples - 1), targets[k],
                                          uniform(rng, 0, properties - length), uniform(rng, 0, properties - length),
                                          length});
            }
        }
        SCOPED_TRACE(::testing::Message() << "plan " << i);
        const size_t element = element_size(plan.dtype);
        auto bytes = random_bytes(rng, product(plan.in.shape) * element);
        auto array = array_from_bytes(device(), plan.dtype, plan.in.shape, bytes);
        auto expected = bytes;
        reference_move(expected, plan.in, bytes, plan.in, element, plan.movements);
        ASSERT_EQ(call_move_data(array, array.get().ptr, plan.movements), MTS_SUCCESS) << last_error();
        ASSERT_EQ(read_bytes(array), expected);
    }
}

// ---- errors: each rejected before anything is written -------------------------

class MoveDataErrors : public MoveData {
protected:
    void SetUp() override {
        MoveData::SetUp();
        if (IsSkipped()) {
            return;
        }
        std::mt19937_64 rng(11);
        output_bytes_ = random_bytes(rng, 3 * 2 * 4 * 8);
        output_ = std::make_unique<mtsarray::Array>(array_from_bytes(device(), float64(), {3, 2, 4}, output_bytes_));
        input_ = std::make_unique<mtsarray::Array>(
            array_from_bytes(device(), float64(), {5, 2, 6}, random_bytes(rng, 5 * 2 * 6 * 8)));
    }

    /// move_data fails with a message containing `expected`, and the output
    /// is bit-for-bit unchanged.
    void expect_rejected(const void* input, const std::vector<mts_data_movement_t>& movements,
                         const std::string& expected) {
        reset_last_error();
        ASSERT_EQ(call_move_data(*output_, input, movements), MTS_CALLBACK_ERROR);
        const auto message = last_error();
        EXPECT_NE(message.find(expected), std::string::npos) << message;
        EXPECT_NE(message.find("move_data"), std::string::npos) << message;
        EXPECT_EQ(last_error_origin(), "mtsarray");
        EXPECT_EQ(read_bytes(*output_), output_bytes_) << "the output changed on error";
    }

    std::vector<uint8_t> output_bytes_;
    std::unique_ptr<mtsarray::Array> output_;
    std::unique_ptr<mtsarray::Array> input_;
};

INSTANTIATE_TEST_SUITE_P(AllBackends, MoveDataErrors, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) { return device_name(info.param); });

constexpr uintptr_t max_size = std::numeric_limits<uintptr_t>::max();

TEST_P(MoveDataErrors, SampleOutOfRange) {
    // a valid movement first: nothing may be written before validation ends
    expect_rejected(input_->get().ptr, {{0, 0, 0, 0, 4}, {5, 1, 0, 0, 1}},
                    "movement 1: sample_in = 5 is out of range for an input with 5 samples");
    expect_rejected(input_->get().ptr, {{0, 0, 0, 0, 4}, {1, 3, 0, 0, 1}},
                    "movement 1: sample_out = 3 is out of range for an output with 3 samples");
    expect_rejected(input_->get().ptr, {{max_size, 0, 0, 0, 1}}, "sample_in = 18446744073709551615");
}

TEST_P(MoveDataErrors, PropertiesOutOfRange) {
    expect_rejected(input_->get().ptr, {{0, 0, 0, 0, 4}, {0, 0, 3, 0, 4}},
                    "movement 1: properties_start_in = 3 with properties_length = 4 goes past the 6 properties "
                    "of the input");
    expect_rejected(input_->get().ptr, {{0, 0, 0, 1, 4}},
                    "movement 0: properties_start_out = 1 with properties_length = 4 goes past the 4 properties "
                    "of the output");
    // start + length overflows: must not wrap around to a small number
    expect_rejected(input_->get().ptr, {{0, 0, max_size, 0, 1}},
                    "properties_start_in = 18446744073709551615 with properties_length = 1");
    expect_rejected(input_->get().ptr, {{0, 0, 1, 0, max_size}},
                    "properties_start_in = 1 with properties_length = 18446744073709551615");
    expect_rejected(input_->get().ptr, {{0, 0, 0, max_size, 2}}, "properties_start_out = 18446744073709551615");
    expect_rejected(input_->get().ptr, {{0, 0, 0, 7, 0}},
                    "properties_start_out = 7 with properties_length = 0 goes past the 4 properties");
}

TEST_P(MoveDataErrors, MismatchedDtype) {
    auto other = mtsarray::Array::zeros(device(), float32(), {5, 2, 6});
    expect_rejected(other.get().ptr, {{0, 0, 0, 0, 1}},
                    "input (float32 array of shape [5, 2, 6] on ");
    expect_rejected(other.get().ptr, {{0, 0, 0, 0, 1}}, "and output have different dtypes");
}

TEST_P(MoveDataErrors, MismatchedComponents) {
    auto other = mtsarray::Array::zeros(device(), float64(), {5, 3, 6});
    expect_rejected(other.get().ptr, {{0, 0, 0, 0, 1}},
                    "input [5, 3, 6] and output [3, 2, 4] do not have the same component axes");
    auto more_axes = mtsarray::Array::zeros(device(), float64(), {5, 2, 1, 6});
    expect_rejected(more_axes.get().ptr, {{0, 0, 0, 0, 1}}, "do not have the same component axes");
    auto fewer_axes = mtsarray::Array::zeros(device(), float64(), {5, 6});
    expect_rejected(fewer_axes.get().ptr, {}, "do not have the same component axes");
    auto vector = mtsarray::Array::zeros(device(), float64(), {6});
    expect_rejected(vector.get().ptr, {}, "needs arrays with at least two axes");
}

TEST_P(MoveDataErrors, ForeignInput) {
    auto simple = metatensor::DataArrayBase::to_mts_array(
        std::make_unique<metatensor::SimpleDataArray<double>>(std::vector<uintptr_t>{5, 2, 6}, 1.0));
    auto raw = simple.as_mts_array_t();
    expect_rejected(raw.ptr, {{0, 0, 0, 0, 1}},
                    "input array was not made by mtsarray (or was already destroyed): mtsarray can only operate "
                    "on its own arrays");
    std::vector<uint64_t> garbage(64, 0xDEADBEEF);
    expect_rejected(garbage.data(), {{0, 0, 0, 0, 1}}, "input array was not made by mtsarray");
    expect_rejected(nullptr, {{0, 0, 0, 0, 1}}, "input array is NULL");

    // a destroyed input
    auto destroyed = std::move(mtsarray::Array::zeros(device(), float64(), {5, 2, 6})).release();
    destroyed.destroy(destroyed.ptr);
    expect_rejected(destroyed.ptr, {{0, 0, 0, 0, 1}}, "was already destroyed");
}

TEST_P(MoveDataErrors, NullMovements) {
    reset_last_error();
    const auto& raw = output_->get();
    ASSERT_EQ(raw.move_data(raw.ptr, input_->get().ptr, nullptr, 2), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("movements is NULL but movements_count = 2"), std::string::npos) << last_error();
    EXPECT_EQ(read_bytes(*output_), output_bytes_);
}

TEST_P(MoveDataErrors, ForeignOutput) {
    // calling our move_data with an output that is not ours
    std::vector<uint64_t> garbage(64, 0xDEADBEEF);
    const auto garbage_copy = garbage;
    const auto& raw = output_->get();
    mts_data_movement_t movement = {0, 0, 0, 0, 1};
    ASSERT_EQ(raw.move_data(garbage.data(), input_->get().ptr, &movement, 1), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("output array was not made by mtsarray"), std::string::npos) << last_error();
    EXPECT_EQ(garbage, garbage_copy);
}

TEST_P(MoveDataErrors, InputOnAnotherDevice) {
    if (device().device_type == kDLCPU) {
        // needs a second device type: CPU output, GPU input
        bool any = false;
        for (auto other : test_devices()) {
            if (other.device_type != kDLCPU && backend_available(other.device_type)) {
                any = true;
                auto input = mtsarray::Array::zeros(other, float64(), {5, 2, 6});
                expect_rejected(input.get().ptr, {{0, 0, 0, 0, 1}}, "is not on the output's device");
            }
        }
        if (!any) {
            GTEST_SKIP() << "no GPU backend available: "
                         << mtsarray_backend_unavailable_reason(MTSARRAY_HAS_HIP ? kDLROCM : kDLCUDA);
        }
        return;
    }
    auto input = mtsarray::Array::zeros(DLDevice{kDLCPU, 0}, float64(), {5, 2, 6});
    expect_rejected(input.get().ptr, {{0, 0, 0, 0, 1}}, "(float64 array of shape [5, 2, 6] on cpu) is not on the "
                                                        "output's device");
}

// ---- the movements are read once ----------------------------------------------

// Movements read once, before anything is written: a list that lives in the
// output's own memory is applied as it was when the call started, even when
// the first movement overwrites a later one with a movement out of range.
// The output is a view of the first rows of a larger buffer: a write past
// its end lands in the guard rows after it, which must stay untouched.
TEST(MoveDataMovements, ListInTheOutputIsReadBeforeTheCopy) {
    constexpr size_t fields = 5;  // one uint64 row of the output is one movement
    static_assert(sizeof(mts_data_movement_t) == fields * sizeof(uint64_t), "a movement is five 64-bit fields");
    const DLDataType uint64 = make_dtype(kDLUInt, 64);
    int32_t threads_before = 0;
    ASSERT_EQ(mtsarray_get_num_threads(&threads_before), MTS_SUCCESS);
    for (int32_t threads : {1, 2}) {
        ASSERT_EQ(mtsarray_set_num_threads(threads), MTS_SUCCESS);
        for (size_t count : {2, 4, 5, 17, 100, 5000, 20000}) {
            SCOPED_TRACE(::testing::Message() << count << " movements, " << threads << " threads");
            const size_t rows = count + 8;  // the list, then the rows the movements write
            const size_t guard_rows = 4;
            std::vector<uint64_t> memory((rows + guard_rows) * fields, 0);
            auto* list = reinterpret_cast<mts_data_movement_t*>(memory.data() + 2 * fields);  // rows 2 .. 2 + count
            // movement 0 copies input row 1 over movement 1; movement 1 and
            // the others copy input row 0 after the list (samples going back
            // and forth: not one run)
            list[0] = {1, 3, 0, 0, fields};
            for (size_t i = 1; i < count; i++) {
                list[i] = {0, 2 + count + (i % 5), 0, 0, fields};
            }
            // input row 1: a movement writing one row past the output
            const std::vector<uint64_t> input_values = {9, 9, 9, 9, 9, 0, rows, 0, 0, fields};
            auto input = mtsarray::Array::wrap(const_cast<uint64_t*>(input_values.data()), DLDevice{kDLCPU, 0},
                                               uint64, {2, fields});
            auto output = mtsarray::Array::wrap(memory.data(), DLDevice{kDLCPU, 0}, uint64, {rows, fields});
            const auto& raw = output.get();
            ASSERT_EQ(raw.move_data(raw.ptr, input.get().ptr, list, count), MTS_SUCCESS) << last_error();
            for (size_t i = rows * fields; i < memory.size(); i++) {
                ASSERT_EQ(memory[i], 0u) << "written past the output, element " << i;
            }
            // movement 0's row, and the rows of the others, as listed at the start
            EXPECT_EQ(std::vector<uint64_t>(memory.begin() + 3 * fields, memory.begin() + 4 * fields),
                      std::vector<uint64_t>(input_values.begin() + fields, input_values.end()));
            for (size_t i = 1; i < std::min<size_t>(count, 6); i++) {
                const size_t row = 2 + count + (i % 5);
                EXPECT_EQ(std::vector<uint64_t>(memory.begin() + row * fields, memory.begin() + (row + 1) * fields),
                          std::vector<uint64_t>(fields, 9))
                    << "row " << row;
            }
        }
    }
    ASSERT_EQ(mtsarray_set_num_threads(threads_before), MTS_SUCCESS);
}

// One movement (a path of its own) that lies in the output, in the first
// of the rows it writes: its first row overwrites it with another valid
// movement, and the second row must still be copied as listed at the start.
// Rows of 5 of the 6 properties of the output: copied row by row.
TEST(MoveDataMovements, OneMovementInTheOutputIsReadBeforeTheCopy) {
    constexpr size_t fields = 5;
    const DLDataType uint64 = make_dtype(kDLUInt, 64);
    constexpr size_t samples = 4;
    constexpr size_t components = 2;
    constexpr size_t properties = 6;
    // input [2, 2, 5]: sample 1, component 0 is a movement into output sample 0
    const std::vector<uint64_t> input_values = {
        7, 7, 7, 7, 7,  //
        8, 8, 8, 8, 8,  //
        0, 0, 0, 0, fields,  //
        9, 9, 9, 9, 9,  //
    };
    auto input = mtsarray::Array::wrap(const_cast<uint64_t*>(input_values.data()), DLDevice{kDLCPU, 0}, uint64,
                                       {2, components, fields});
    std::vector<uint64_t> memory(samples * components * properties, 0);
    const size_t sample = 2;
    auto* movement = reinterpret_cast<mts_data_movement_t*>(memory.data() + sample * components * properties);
    *movement = {1, sample, 0, 0, fields};
    auto output =
        mtsarray::Array::wrap(memory.data(), DLDevice{kDLCPU, 0}, uint64, {samples, components, properties});
    const auto& raw = output.get();
    ASSERT_EQ(raw.move_data(raw.ptr, input.get().ptr, movement, 1), MTS_SUCCESS) << last_error();
    std::vector<uint64_t> expected(samples * components * properties, 0);
    std::copy(input_values.begin() + 10, input_values.begin() + 15, expected.begin() + 24);  // sample 2, component 0
    std::copy(input_values.begin() + 15, input_values.end(), expected.begin() + 30);         // component 1
    EXPECT_EQ(memory, expected);
}

// The same from another thread: a list edited while move_data runs. Each
// movement is either the valid one or one out of range; whatever the
// timing, the call either succeeds having written only inside the output,
// or fails naming a movement, and never writes past the output.
TEST(MoveDataMovements, ListEditedByAnotherThreadNeverWritesOutside) {
    const DLDataType float64_type = float64();
    constexpr size_t samples = 64;
    constexpr size_t properties = 8;
    constexpr size_t guard = 1024;
    constexpr size_t count = 3000;
    std::vector<double> memory((samples * properties) + guard, 0.0);
    std::vector<double> input_values(samples * properties, 1.0);
    auto input = mtsarray::Array::wrap(input_values.data(), DLDevice{kDLCPU, 0}, float64_type, {samples, properties});
    auto output = mtsarray::Array::wrap(memory.data(), DLDevice{kDLCPU, 0}, float64_type, {samples, properties});
    std::vector<mts_data_movement_t> list(count);
    for (size_t i = 0; i < count; i++) {
        list[i] = {i % samples, (i * 7) % samples, 0, 0, properties};
    }
    std::atomic<bool> stop{false};
    std::thread editor([&] {
        volatile uintptr_t* field = &list[count / 2].sample_out;
        for (uintptr_t round = 0; !stop.load(std::memory_order_relaxed); round++) {
            *field = (round % 2 == 0) ? (uintptr_t(1) << 40) : 3;
        }
    });
    const auto& raw = output.get();
    for (int call = 0; call < 300; call++) {
        const mts_status_t status = raw.move_data(raw.ptr, input.get().ptr, list.data(), count);
        if (status != MTS_SUCCESS) {
            EXPECT_NE(last_error().find("sample_out"), std::string::npos) << last_error();
        }
    }
    stop.store(true);
    editor.join();
    for (size_t i = samples * properties; i < memory.size(); i++) {
        ASSERT_EQ(memory[i], 0.0) << "written past the output, element " << i;
    }
}

}  // namespace
