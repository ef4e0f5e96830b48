// Movement plans (mtsarray_move_plan_*): every execution gives the bytes
// move_data gives on the same arrays; the arrays a plan accepts, and the
// ones it refuses with nothing written; freeing, threads, the C++ wrapper.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/move_data.hpp"
#include "cpu/host_move_plan.hpp"
#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

mts_status_t call_move_data(const mtsarray::Array& output, const mts_array_t& input,
                            const std::vector<mts_data_movement_t>& movements) {
    const auto& raw = output.get();
    return raw.move_data(raw.ptr, input.ptr, movements.data(), movements.size());
}

/// A plan made through the C API, freed with the object.
struct CPlan {
    mtsarray_move_plan_t* plan = nullptr;
    CPlan() = default;
    CPlan(const CPlan&) = delete;
    CPlan& operator=(const CPlan&) = delete;
    ~CPlan() { EXPECT_EQ(mtsarray_move_plan_free(plan), MTS_SUCCESS); }
};

/// Shapes and movements of one random plan; `samples_*` are the sample
/// counts of the arrays it is made for.
struct Case {
    DLDataType dtype;
    std::vector<uintptr_t> components;
    uintptr_t samples_in = 0, samples_out = 0;
    uintptr_t properties_in = 0, properties_out = 0;
    std::vector<mts_data_movement_t> movements;

    std::vector<uintptr_t> input_shape(uintptr_t samples) const { return shape(samples, properties_in); }
    std::vector<uintptr_t> output_shape(uintptr_t samples) const { return shape(samples, properties_out); }
    std::vector<uintptr_t> shape(uintptr_t samples, uintptr_t properties) const {
        std::vector<uintptr_t> result = {samples};
        result.insert(result.end(), components.begin(), components.end());
        result.push_back(properties);
        return result;
    }
};

uintptr_t uniform(std::mt19937_64& rng, uintptr_t low, uintptr_t high) {
    return std::uniform_int_distribution<uintptr_t>(low, high)(rng);
}

/// Checks `output` after the movements of `c` from `input` into an array
/// that held `before`, where several movements may write one element: on
/// the CPU the last one wins, on a GPU which one wins is unspecified
/// (include/mtsarray.h), so each element must hold the value of one of its
/// writers, or its old value where none writes it.
void expect_one_writer_per_element(const Case& c, const std::vector<uint8_t>& input,
                                   const std::vector<uint8_t>& before, const std::vector<uint8_t>& output) {
    const size_t size = element_size(c.dtype);
    size_t components = 1;
    for (auto axis : c.components) {
        components *= axis;
    }
    // element index -> the input elements written there, in movement order
    std::vector<std::vector<size_t>> writers(before.size() / size);
    for (const auto& movement : c.movements) {
        for (size_t component = 0; component < components; component++) {
            for (size_t x = 0; x < movement.properties_length; x++) {
                const size_t out = (movement.sample_out * components + component) * c.properties_out +
                                   movement.properties_start_out + x;
                const size_t in = (movement.sample_in * components + component) * c.properties_in +
                                  movement.properties_start_in + x;
                writers[out].push_back(in);
            }
        }
    }
    size_t mismatches = 0;
    for (size_t element = 0; element < writers.size(); element++) {
        const uint8_t* got = output.data() + element * size;
        bool matched = writers[element].empty() && std::memcmp(got, before.data() + element * size, size) == 0;
        for (size_t in : writers[element]) {
            matched = matched || std::memcmp(got, input.data() + in * size, size) == 0;
        }
        if (!matched && mismatches++ < 5) {
            ADD_FAILURE() << "element " << element << " holds a value none of its " << writers[element].size()
                          << " writers wrote";
        }
    }
    EXPECT_EQ(mismatches, 0u);
}

/// Random shapes (0 to 2 component axes, some of size 0) and movements:
/// scattered, in order (runs), whole rows, any start (non-aligned), some of
/// length 0, some repeated outputs (the last one wins on the CPU, so these
/// are only made for the CPU).
Case random_case(std::mt19937_64& rng, DLDataType dtype, bool repeated_outputs, size_t max_movements) {
    Case c;
    c.dtype = dtype;
    c.components.resize(uniform(rng, 0, 2));
    for (auto& size : c.components) {
        size = uniform(rng, 0, 9) == 0 ? 0 : uniform(rng, 1, 3);
    }
    c.samples_in = uniform(rng, 0, 40);
    c.samples_out = uniform(rng, 0, 40);
    c.properties_in = uniform(rng, 0, 13);
    c.properties_out = uniform(rng, 0, 13);
    const int mode = static_cast<int>(uniform(rng, 0, 3));
    if (mode == 2) {
        c.properties_out = c.properties_in;
    }
    if (c.samples_in == 0 || c.samples_out == 0) {
        return c;
    }
    const uintptr_t max_length = std::min(c.properties_in, c.properties_out);
    const size_t count = uniform(rng, 0, std::min<size_t>(max_movements, c.samples_out));
    std::vector<uintptr_t> targets(c.samples_out);
    std::iota(targets.begin(), targets.end(), 0);
    std::shuffle(targets.begin(), targets.end(), rng);
    const uintptr_t first_in = uniform(rng, 0, c.samples_in - 1);
    for (size_t i = 0; i < count; i++) {
        mts_data_movement_t m = {};
        if (mode == 0 || mode == 3) {  // scattered
            m.sample_in = uniform(rng, 0, c.samples_in - 1);
            m.sample_out = repeated_outputs && mode == 3 ? uniform(rng, 0, c.samples_out - 1) : targets[i];
            m.properties_length = uniform(rng, 0, max_length);
            m.properties_start_in = uniform(rng, 0, c.properties_in - m.properties_length);
            m.properties_start_out = uniform(rng, 0, c.properties_out - m.properties_length);
        } else {  // in order: consecutive samples on both sides
            m.sample_in = (first_in + i) % c.samples_in;
            m.sample_out = i;
            m.properties_length = mode == 2 ? c.properties_in : max_length / 2;
            m.properties_start_in = mode == 2 ? 0 : (c.properties_in - m.properties_length) / 2;
            m.properties_start_out = mode == 2 ? 0 : c.properties_out - m.properties_length;
        }
        c.movements.push_back(m);
    }
    return c;
}

class MovePlan : public ::testing::TestWithParam<DLDevice> {
protected:
    void SetUp() override { MTSARRAY_SKIP_UNLESS_AVAILABLE(GetParam()); }
    DLDevice device() const { return GetParam(); }

    mtsarray::Array random_array(std::mt19937_64& rng, DLDataType dtype, const std::vector<uintptr_t>& shape) {
        return array_from_bytes(device(), dtype, shape, random_bytes(rng, product(shape) * element_size(dtype)));
    }

    /// Makes a plan for `c` on arrays of its sample counts, then executes it
    /// on arrays with `extra` more samples each: the bytes of every
    /// execution are those of move_data on the same arrays.
    void check_case(const Case& c, std::mt19937_64& rng, uintptr_t extra = 0) {
        auto planned_input = random_array(rng, c.dtype, c.input_shape(c.samples_in));
        auto planned_output = random_array(rng, c.dtype, c.output_shape(c.samples_out));
        auto movements = c.movements;
        CPlan plan;
        ASSERT_EQ(mtsarray_move_plan_create(&planned_output.get(), &planned_input.get(), movements.data(),
                                            movements.size(), &plan.plan),
                  MTS_SUCCESS)
            << last_error();
        // the plan keeps its own copy of the list
        for (auto& m : movements) {
            m.sample_in = std::numeric_limits<uintptr_t>::max();
        }

        for (uintptr_t more : {uintptr_t(0), extra}) {
            auto input = random_array(rng, c.dtype, c.input_shape(c.samples_in + more));
            const auto output_bytes = random_bytes(rng, product(c.output_shape(c.samples_out + more)) *
                                                            element_size(c.dtype));
            auto output = array_from_bytes(device(), c.dtype, c.output_shape(c.samples_out + more), output_bytes);
            auto expected = array_from_bytes(device(), c.dtype, c.output_shape(c.samples_out + more), output_bytes);
            ASSERT_EQ(call_move_data(expected, input.get(), c.movements), MTS_SUCCESS) << last_error();
            ASSERT_EQ(mtsarray_move_plan_execute(plan.plan, &output.get(), &input.get()), MTS_SUCCESS)
                << last_error();
            const auto once = read_bytes(output);
            ASSERT_EQ(once, read_bytes(expected)) << c.movements.size() << " movements, extra samples " << more;
            // again: the same bytes
            ASSERT_EQ(mtsarray_move_plan_execute(plan.plan, &output.get(), &input.get()), MTS_SUCCESS)
                << last_error();
            ASSERT_EQ(read_bytes(output), once);
        }
    }
};

INSTANTIATE_TEST_SUITE_P(AllBackends, MovePlan, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) { return device_name(info.param); });

TEST_P(MovePlan, RandomPlansMatchMoveDataForEveryDtype) {
    std::mt19937_64 rng(26);
    const bool host = device().device_type == kDLCPU;
    for (const auto& dtype : all_dtypes()) {
        SCOPED_TRACE(dtype.name);
        for (int i = 0; i < 12; i++) {
            check_case(random_case(rng, dtype.dtype, host, 40), rng, uniform(rng, 1, 5));
        }
    }
}

TEST_P(MovePlan, EmptyArraysAndNoMovements) {
    std::mt19937_64 rng(1);
    Case c;
    c.dtype = float64();
    c.components = {3};
    c.properties_in = 4;
    c.properties_out = 5;
    check_case(c, rng, 7);  // 0 samples, then 7
    c.samples_in = 3;
    c.samples_out = 2;
    check_case(c, rng, 0);  // no movement
    c.components = {0, 2};  // no row to copy
    c.movements = {{2, 1, 1, 2, 3}, {0, 0, 0, 0, 4}};
    check_case(c, rng, 2);
}

TEST_P(MovePlan, NonAlignedStartsAndOneMovement) {
    std::mt19937_64 rng(2);
    Case c;
    c.dtype = make_dtype(kDLUInt, 8);
    c.samples_in = 9;
    c.samples_out = 7;
    c.properties_in = 13;
    c.properties_out = 11;
    c.movements = {{8, 6, 3, 5, 5}};
    check_case(c, rng, 3);
    c.dtype = make_dtype(kDLComplex, 128);
    c.movements = {{0, 0, 1, 0, 11}, {1, 1, 1, 0, 11}, {2, 2, 1, 0, 11}};  // one run, not whole rows
    check_case(c, rng, 1);
}

// Long lists on several threads: every split (one run, movement blocks,
// byte pieces, serial for repeated outputs), and a thread count changed
// between the plan and its execution.
TEST_P(MovePlan, LargePlansOnEveryThreadSplit) {
    std::mt19937_64 rng(3);
    const int32_t threads = mtsarray::num_threads();
    for (int32_t planned : {1, 4}) {
        for (int32_t executed : {planned, 5 - planned}) {
            SCOPED_TRACE("threads " + std::to_string(planned) + " then " + std::to_string(executed));
            Case c;
            c.dtype = float64();
            c.samples_in = 30000;
            c.samples_out = 20000;
            c.properties_in = 32;
            c.properties_out = 32;
            std::vector<uintptr_t> order(c.samples_out);
            std::iota(order.begin(), order.end(), 0);
            std::shuffle(order.begin(), order.end(), rng);
            std::vector<Case> cases;
            // scattered, one output each: movement blocks
            for (uintptr_t i = 0; i < c.samples_out; i++) {
                c.movements.push_back({uniform(rng, 0, c.samples_in - 1), order[i], 0, 0, 32});
            }
            cases.push_back(c);
            // in order, whole rows: one run
            c.movements.clear();
            for (uintptr_t i = 0; i < c.samples_out; i++) {
                c.movements.push_back({i + 17, i, 0, 0, 32});
            }
            cases.push_back(c);
            // in order, part of the rows: merged runs
            c.movements.clear();
            for (uintptr_t i = 0; i < c.samples_out; i++) {
                c.movements.push_back({i + 3, i, 1, 5, 27});
            }
            cases.push_back(c);
            // few long movements: byte pieces
            c.samples_in = 40;
            c.samples_out = 40;
            c.properties_in = 70000;
            c.properties_out = 70001;
            c.movements = {{3, 0, 1, 0, 69999}, {7, 20, 0, 2, 69999}, {39, 39, 5, 1, 69990}};
            cases.push_back(c);
            // repeated outputs: on the CPU the last one wins; on a GPU any
            // of them may, and the plan's kernel and move_data's need not
            // agree
            c.movements = {{3, 0, 1, 0, 60000}, {7, 0, 0, 2, 69999}, {39, 0, 5, 1, 10}};
            cases.push_back(c);
            for (const auto& one : cases) {
                mtsarray::set_num_threads(planned);
                auto input = random_array(rng, one.dtype, one.input_shape(one.samples_in));
                auto output = random_array(rng, one.dtype, one.output_shape(one.samples_out));
                auto expected = output.copy(device());
                const auto before = read_bytes(output);
                mtsarray::MovePlan plan(output, input, one.movements);
                mtsarray::set_num_threads(executed);
                plan.execute(output, input);
                ASSERT_EQ(call_move_data(expected, input.get(), one.movements), MTS_SUCCESS) << last_error();
                if (device().device_type == kDLCPU || &one != &cases.back()) {
                    ASSERT_EQ(read_bytes(output), read_bytes(expected));
                } else {
                    expect_one_writer_per_element(one, read_bytes(input), before, read_bytes(output));
                    expect_one_writer_per_element(one, read_bytes(input), before, read_bytes(expected));
                }
            }
        }
    }
    mtsarray::set_num_threads(threads);
}

TEST_P(MovePlan, WithinOneArrayReadsTheOriginal) {
    std::mt19937_64 rng(4);
    auto array = random_array(rng, float32(), {6, 2, 5});
    auto expected = array.copy(device());
    const std::vector<mts_data_movement_t> movements = {{0, 1, 0, 0, 5}, {1, 2, 0, 0, 5}, {5, 0, 1, 0, 3}};
    mtsarray::MovePlan plan(array, array, movements);
    plan.execute(array, array);
    ASSERT_EQ(call_move_data(expected, expected.get(), movements), MTS_SUCCESS) << last_error();
    EXPECT_EQ(read_bytes(array), read_bytes(expected));
}

// ---- arrays a plan refuses -------------------------------------------------------

class MovePlanErrors : public MovePlan {
protected:
    void SetUp() override {
        MovePlan::SetUp();
        if (IsSkipped()) {
            return;
        }
        std::mt19937_64 rng(5);
        input_ = std::make_unique<mtsarray::Array>(random_array(rng, float64(), {5, 2, 6}));
        output_ = std::make_unique<mtsarray::Array>(random_array(rng, float64(), {4, 2, 4}));
        ASSERT_EQ(mtsarray_move_plan_create(&output_->get(), &input_->get(), movements_.data(), movements_.size(),
                                            &plan_.plan),
                  MTS_SUCCESS)
            << last_error();
    }

    /// Executing the plan fails with a message containing `expected`, and
    /// `output` keeps its bytes.
    void expect_refused(const mts_array_t* output, const mts_array_t* input, const std::string& expected,
                        bool readable = true) {
        readable = readable && output != nullptr;
        const auto before = readable ? read_bytes(*output) : std::vector<uint8_t>();
        reset_last_error();
        ASSERT_EQ(mtsarray_move_plan_execute(plan_.plan, output, input), MTS_CALLBACK_ERROR);
        const auto message = last_error();
        EXPECT_NE(message.find(expected), std::string::npos) << message;
        EXPECT_NE(message.find("mtsarray_move_plan_execute"), std::string::npos) << message;
        EXPECT_EQ(last_error_origin(), "mtsarray");
        if (readable) {
            EXPECT_EQ(read_bytes(*output), before) << "the output changed on error";
        }
    }

    // reach sample_in 4 and sample_out 3
    std::vector<mts_data_movement_t> movements_ = {{0, 0, 0, 0, 4}, {4, 3, 2, 0, 4}, {1, 1, 5, 3, 1}};
    std::unique_ptr<mtsarray::Array> input_;
    std::unique_ptr<mtsarray::Array> output_;
    CPlan plan_;
};

INSTANTIATE_TEST_SUITE_P(AllBackends, MovePlanErrors, ::testing::ValuesIn(test_devices()),
                         [](const ::testing::TestParamInfo<DLDevice>& info) { return device_name(info.param); });

TEST_P(MovePlanErrors, AnotherDtype) {
    auto output = mtsarray::Array::zeros(device(), float32(), {4, 2, 4});
    auto input = mtsarray::Array::zeros(device(), float32(), {5, 2, 6});
    expect_refused(&output.get(), &input_->get(), "output (float32 array of shape [4, 2, 4] on");
    expect_refused(&output.get(), &input_->get(), "does not match a plan of 3 movements for float64 arrays");
    expect_refused(&output.get(), &input_->get(), ": another dtype");
    expect_refused(&output_->get(), &input.get(), "input (float32 array of shape [5, 2, 6] on");
}

TEST_P(MovePlanErrors, AnotherShape) {
    auto components = mtsarray::Array::zeros(device(), float64(), {4, 3, 4});
    expect_refused(&components.get(), &input_->get(), "the axes after the samples must be those of the plan");
    auto properties = mtsarray::Array::zeros(device(), float64(), {5, 2, 7});
    expect_refused(&output_->get(), &properties.get(), "the axes after the samples must be those of the plan");
    expect_refused(&output_->get(), &properties.get(), "input [>= 5, 2, 6]");
    auto axes = mtsarray::Array::zeros(device(), float64(), {4, 2, 1, 4});
    expect_refused(&axes.get(), &input_->get(), "output [>= 4, 2, 4]");
}

TEST_P(MovePlanErrors, TooFewSamples) {
    auto output = mtsarray::Array::zeros(device(), float64(), {3, 2, 4});
    expect_refused(&output.get(), &input_->get(), "too few samples (the movements reach sample 3)");
    auto input = mtsarray::Array::zeros(device(), float64(), {4, 2, 6});
    expect_refused(&output_->get(), &input.get(), "too few samples (the movements reach sample 4)");
    // more samples than planned are fine
    auto larger = mtsarray::Array::zeros(device(), float64(), {9, 2, 4});
    EXPECT_EQ(mtsarray_move_plan_execute(plan_.plan, &larger.get(), &input_->get()), MTS_SUCCESS) << last_error();
}

TEST_P(MovePlanErrors, AnotherDevice) {
    const DLDevice other = device().device_type == kDLCPU ? DLDevice{kDLCUDA, 0} : DLDevice{kDLCPU, 0};
    if (!backend_available(other.device_type)) {
        GTEST_SKIP() << "needs a second device: " << mtsarray_backend_unavailable_reason(other.device_type);
    }
    auto output = mtsarray::Array::zeros(other, float64(), {4, 2, 4});
    auto input = mtsarray::Array::zeros(other, float64(), {5, 2, 6});
    expect_refused(&output.get(), &input_->get(), ": another device");
    expect_refused(&output_->get(), &input.get(), ": another device");
    expect_refused(&output.get(), &input.get(), ": another device");
}

TEST_P(MovePlanErrors, ForeignAndNullArrays) {
    // a foreign output: never written
    auto simple = metatensor::DataArrayBase::to_mts_array(
        std::make_unique<metatensor::SimpleDataArray<double>>(std::vector<uintptr_t>{4, 2, 4}, 1.0));
    const mts_array_t foreign = simple.as_mts_array_t();
    expect_refused(&foreign, &input_->get(), "output was not made by mtsarray");
    const auto values = read_bytes(foreign);
    EXPECT_EQ(from_bytes<double>(values), std::vector<double>(32, 1.0));

    expect_refused(nullptr, &input_->get(), "output is NULL");
    expect_refused(&output_->get(), nullptr, "input is NULL");
    reset_last_error();
    EXPECT_EQ(mtsarray_move_plan_execute(nullptr, &output_->get(), &input_->get()), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("plan is NULL"), std::string::npos) << last_error();

    // a destroyed output
    auto destroyed = std::move(mtsarray::Array::zeros(device(), float64(), {4, 2, 4})).release();
    destroyed.destroy(destroyed.ptr);
    expect_refused(&destroyed, &input_->get(), "was already destroyed", /*readable=*/false);
}

TEST_P(MovePlanErrors, CreateRefusesWhatMoveDataRefuses) {
    auto create = [&](const mts_array_t* output, const mts_array_t* input,
                      const std::vector<mts_data_movement_t>& movements, const std::string& expected) {
        mtsarray_move_plan_t* plan = nullptr;
        reset_last_error();
        ASSERT_EQ(mtsarray_move_plan_create(output, input, movements.data(), movements.size(), &plan),
                  MTS_CALLBACK_ERROR);
        EXPECT_EQ(plan, nullptr);
        EXPECT_NE(last_error().find(expected), std::string::npos) << last_error();
        EXPECT_NE(last_error().find("mtsarray_move_plan_create"), std::string::npos) << last_error();
    };
    create(&output_->get(), &input_->get(), {{0, 0, 0, 0, 4}, {5, 1, 0, 0, 1}},
           "movement 1: sample_in = 5 is out of range for an input with 5 samples");
    create(&output_->get(), &input_->get(), {{0, 0, 0, 1, 4}},
           "movement 0: properties_start_out = 1 with properties_length = 4 goes past the 4 properties");
    auto float32_input = mtsarray::Array::zeros(device(), float32(), {5, 2, 6});
    create(&output_->get(), &float32_input.get(), {}, "have different dtypes");
    auto components = mtsarray::Array::zeros(device(), float64(), {5, 3, 6});
    create(&output_->get(), &components.get(), {}, "do not have the same component axes");
    auto simple = metatensor::DataArrayBase::to_mts_array(
        std::make_unique<metatensor::SimpleDataArray<double>>(std::vector<uintptr_t>{4, 2, 4}, 1.0));
    const mts_array_t foreign = simple.as_mts_array_t();
    create(&foreign, &input_->get(), {}, "output was not made by mtsarray");
    create(nullptr, &input_->get(), {}, "output is NULL");
    create(&output_->get(), nullptr, {}, "input is NULL");
    reset_last_error();
    mtsarray_move_plan_t* plan = nullptr;
    EXPECT_EQ(mtsarray_move_plan_create(&output_->get(), &input_->get(), nullptr, 2, &plan), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("movements is NULL but movements_count = 2"), std::string::npos) << last_error();
    EXPECT_EQ(mtsarray_move_plan_create(&output_->get(), &input_->get(), nullptr, 0, nullptr), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("plan is NULL"), std::string::npos) << last_error();
    EXPECT_EQ(mtsarray_move_plan_free(nullptr), MTS_SUCCESS);
}

// ---- foreign inputs, threads, freeing -----------------------------------------

TEST(MovePlanForeignInput, ReadThroughItsDlpackExport) {
    std::vector<double> values(5 * 2 * 6);
    std::iota(values.begin(), values.end(), 0.0);
    auto simple = metatensor::DataArrayBase::to_mts_array(
        std::make_unique<metatensor::SimpleDataArray<double>>(std::vector<uintptr_t>{5, 2, 6}, 0.0));
    mts_array_t foreign = simple.as_mts_array_t();
    // fill the foreign array through its own export
    DLManagedTensorVersioned* tensor = nullptr;
    ASSERT_EQ(foreign.as_dlpack(foreign.ptr, &tensor, DLDevice{kDLCPU, 0}, nullptr, dlpack_version()), MTS_SUCCESS);
    std::memcpy(tensor->dl_tensor.data, values.data(), values.size() * sizeof(double));
    tensor->deleter(tensor);

    auto input = mtsarray::Array::zeros(mtsarray::cpu(), float64(), {5, 2, 6});
    input.copy_from(foreign);
    auto output = mtsarray::Array::zeros(mtsarray::cpu(), float64(), {4, 2, 4});
    auto expected = mtsarray::Array::zeros(mtsarray::cpu(), float64(), {4, 2, 4});
    const std::vector<mts_data_movement_t> movements = {{4, 0, 2, 0, 4}, {1, 3, 0, 1, 3}};
    mtsarray::MovePlan plan(output, foreign, movements);
    plan.execute(output, foreign);
    ASSERT_EQ(call_move_data(expected, input.get(), movements), MTS_SUCCESS) << last_error();
    EXPECT_EQ(read_bytes(output), read_bytes(expected));

    // a foreign input of another shape is refused
    auto small = metatensor::DataArrayBase::to_mts_array(
        std::make_unique<metatensor::SimpleDataArray<double>>(std::vector<uintptr_t>{4, 2, 6}, 0.0));
    EXPECT_THROW(plan.execute(output, small.as_mts_array_t()), mtsarray::Error);
    EXPECT_NE(last_error().find("too few samples"), std::string::npos) << last_error();
}

TEST_P(MovePlan, ConcurrentExecutesFromEightThreads) {
    std::mt19937_64 rng(6);
    const size_t samples = 3000;
    auto input = random_array(rng, float64(), {samples, 3, 8});
    std::vector<mts_data_movement_t> movements;
    for (size_t i = 0; i < samples; i++) {
        movements.push_back({uniform(rng, 0, samples - 1), i, uniform(rng, 0, 4), uniform(rng, 0, 4), 4});
    }
    std::vector<mtsarray::Array> outputs;
    for (int t = 0; t < 8; t++) {
        outputs.push_back(random_array(rng, float64(), {samples, 3, 8}));
    }
    auto expected = outputs[0].copy(device());
    mtsarray::MovePlan plan(outputs[0], input, movements);
    ASSERT_EQ(call_move_data(expected, input.get(), movements), MTS_SUCCESS) << last_error();
    const auto expected_bytes = read_bytes(expected);
    // every output starts like the first
    for (auto& output : outputs) {
        output.copy_from(outputs[0]);
    }

    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; t++) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 20; i++) {
                if (mtsarray_move_plan_execute(plan.get(), &outputs[t].get(), &input.get()) != MTS_SUCCESS) {
                    failures++;
                }
            }
        });
    }
    for (auto& thread : threads) {
        thread.join();
    }
    EXPECT_EQ(failures.load(), 0);
    for (auto& output : outputs) {
        EXPECT_EQ(read_bytes(output), expected_bytes);
    }
}

TEST_P(MovePlan, FreedWhileExecutionsAreQueued) {
    std::mt19937_64 rng(7);
    auto input = random_array(rng, int32(), {50, 7});
    auto output = random_array(rng, int32(), {60, 7});
    auto expected = output.copy(device());
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < 50; i++) {
        movements.push_back({49 - i, i + 10, 1, 0, 6});
    }
    ASSERT_EQ(call_move_data(expected, input.get(), movements), MTS_SUCCESS) << last_error();

#if MTSARRAY_TEST_SIMULATED_GPU
    // on the simulated GPU: the executions wait behind a held stream while
    // the plan is freed
    const bool held = device().device_type == kDLCUDA && simulated_gpu();
    int64_t stream = 0;
    sim::Gate gate;
    if (held) {
        stream = sim::create_stream(device().device_id);  // a stream of the arrays' own device
        output.set_stream(stream);
        gate = sim::hold(stream, device().device_id);
    }
#endif
    auto* plan = new mtsarray::MovePlan(output, input, movements);
    for (int i = 0; i < 5; i++) {
        plan->execute(output, input);
    }
    delete plan;
#if MTSARRAY_TEST_SIMULATED_GPU
    if (held) {
        gate.open();
    }
#endif
    EXPECT_EQ(read_bytes(output), read_bytes(expected));
#if MTSARRAY_TEST_SIMULATED_GPU
    if (held) {
        output.synchronize();
        EXPECT_TRUE(sim::violations().empty()) << sim::violations().front();
        output.set_stream(1);
        sim::destroy_stream(stream);
    }
#endif
}

// ---- plan handles: a freed plan, or anything else, is recognised -----------------

const std::string not_a_plan = "plan was not made by mtsarray_move_plan_create, or was already freed";

TEST(MovePlanHandles, ASecondFreeAndAUseAfterFreeAreErrors) {
    const DLDevice cpu = {kDLCPU, 0};
    auto input = mtsarray::Array::full<double>(cpu, {3, 2}, 1.5);
    auto output = mtsarray::Array::zeros(cpu, float64(), {3, 2});
    const mts_data_movement_t movement = {0, 2, 0, 0, 2};
    mtsarray_move_plan_t* plan = nullptr;
    ASSERT_EQ(mtsarray_move_plan_create(&output.get(), &input.get(), &movement, 1, &plan), MTS_SUCCESS)
        << last_error();
    ASSERT_EQ(mtsarray_move_plan_free(plan), MTS_SUCCESS) << last_error();

    EXPECT_EQ(mtsarray_move_plan_free(plan), MTS_CALLBACK_ERROR);
    EXPECT_EQ(last_error(), "mtsarray_move_plan_free: " + not_a_plan);
    EXPECT_EQ(mtsarray_move_plan_execute(plan, &output.get(), &input.get()), MTS_CALLBACK_ERROR);
    EXPECT_EQ(last_error(), "mtsarray_move_plan_execute: " + not_a_plan);
    EXPECT_EQ(from_bytes<double>(read_bytes(output)), std::vector<double>(6, 0.0));

    // plans made since, wherever they live, are their own: the freed handle
    // never reaches one of them
    std::vector<mtsarray_move_plan_t*> later(64, nullptr);
    for (auto& made : later) {
        ASSERT_EQ(mtsarray_move_plan_create(&output.get(), &input.get(), &movement, 1, &made), MTS_SUCCESS);
        EXPECT_NE(made, plan);
    }
    EXPECT_EQ(mtsarray_move_plan_execute(plan, &output.get(), &input.get()), MTS_CALLBACK_ERROR);
    EXPECT_EQ(from_bytes<double>(read_bytes(output)), std::vector<double>(6, 0.0));
    ASSERT_EQ(mtsarray_move_plan_execute(later.back(), &output.get(), &input.get()), MTS_SUCCESS) << last_error();
    EXPECT_EQ(from_bytes<double>(read_bytes(output)), (std::vector<double>{0.0, 0.0, 0.0, 0.0, 1.5, 1.5}));
    for (auto* made : later) {
        EXPECT_EQ(mtsarray_move_plan_free(made), MTS_SUCCESS) << last_error();
    }
    EXPECT_EQ(mtsarray_move_plan_free(nullptr), MTS_SUCCESS) << "NULL stays a no-op, as for free()";
}

TEST(MovePlanHandles, AnythingElseIsRefusedWithoutBeingRead) {
    const DLDevice cpu = {kDLCPU, 0};
    auto input = mtsarray::Array::full<double>(cpu, {3, 2}, 1.5);
    auto output = mtsarray::Array::zeros(cpu, float64(), {3, 2});
    // an array's handle is not a plan: refused, and the array lives on
    auto* array_handle = static_cast<mtsarray_move_plan_t*>(output.get().ptr);
    EXPECT_EQ(mtsarray_move_plan_free(array_handle), MTS_CALLBACK_ERROR);
    EXPECT_EQ(last_error(), "mtsarray_move_plan_free: " + not_a_plan);
    EXPECT_EQ(mtsarray_move_plan_execute(array_handle, &output.get(), &input.get()), MTS_CALLBACK_ERROR);
    EXPECT_EQ(last_error(), "mtsarray_move_plan_execute: " + not_a_plan);
    EXPECT_EQ(output.shape(), (std::vector<uintptr_t>{3, 2}));

    // nor is any other memory, which is left alone
    std::vector<uint64_t> garbage(64, 0x0123456789ABCDEF);
    auto* address = reinterpret_cast<mtsarray_move_plan_t*>(garbage.data());
    EXPECT_EQ(mtsarray_move_plan_free(address), MTS_CALLBACK_ERROR);
    EXPECT_EQ(mtsarray_move_plan_execute(address, &output.get(), &input.get()), MTS_CALLBACK_ERROR);
    EXPECT_EQ(garbage, std::vector<uint64_t>(64, 0x0123456789ABCDEF));
    EXPECT_EQ(mtsarray_move_plan_execute(nullptr, &output.get(), &input.get()), MTS_CALLBACK_ERROR);
    EXPECT_EQ(last_error(), "mtsarray_move_plan_execute: plan is NULL");

    // and a plan's handle is not an array
    const mts_data_movement_t movement = {0, 2, 0, 0, 2};
    mtsarray_move_plan_t* plan = nullptr;
    ASSERT_EQ(mtsarray_move_plan_create(&output.get(), &input.get(), &movement, 1, &plan), MTS_SUCCESS);
    mts_array_t disguised = output.get();
    disguised.ptr = plan;
    bool ours = true;
    ASSERT_EQ(mtsarray_is_mtsarray(&disguised, &ours), MTS_SUCCESS);
    EXPECT_FALSE(ours);
    EXPECT_EQ(mtsarray_move_plan_free(plan), MTS_SUCCESS) << last_error();
    EXPECT_EQ(from_bytes<double>(read_bytes(output)), std::vector<double>(6, 0.0));
}

TEST(MovePlanHandles, OfEightThreadsFreeingOnePlanOneFreesIt) {
    const DLDevice cpu = {kDLCPU, 0};
    auto input = mtsarray::Array::full<double>(cpu, {3, 2}, 1.5);
    auto output = mtsarray::Array::zeros(cpu, float64(), {3, 2});
    const mts_data_movement_t movement = {0, 2, 0, 0, 2};
    for (int round = 0; round < 50; round++) {
        mtsarray_move_plan_t* plan = nullptr;
        ASSERT_EQ(mtsarray_move_plan_create(&output.get(), &input.get(), &movement, 1, &plan), MTS_SUCCESS);
        std::atomic<bool> start{false};
        std::atomic<int> freed{0};
        std::atomic<int> refused{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < 8; t++) {
            threads.emplace_back([&] {
                while (!start.load()) {
                }
                if (mtsarray_move_plan_free(plan) == MTS_SUCCESS) {
                    freed++;
                } else if (last_error() == "mtsarray_move_plan_free: " + not_a_plan) {
                    refused++;
                }
            });
        }
        start = true;
        for (auto& thread : threads) {
            thread.join();
        }
        ASSERT_EQ(freed.load(), 1);
        ASSERT_EQ(refused.load(), 7);
    }
}

// ---- graph capture (simulated CUDA: it sees host waits and freed memory) -----------

#if MTSARRAY_TEST_SIMULATED_GPU
namespace {

/// Streams of the simulated device 0 for one test, given back with the
/// arrays that used them.
struct CaptureStreams {
    /// Streams of `device`: an array works on a stream of its own device.
    explicit CaptureStreams(int device) : planning(sim::create_stream(device)), capturing(sim::create_stream(device)) {}
    int64_t planning;
    int64_t capturing;
    std::vector<mtsarray::Array*> arrays;

    ~CaptureStreams() {
        for (auto* array : arrays) {
            array->set_stream(1);
        }
        sim::drain();
        sim::destroy_stream(planning);
        sim::destroy_stream(capturing);
    }
    void use(mtsarray::Array& array, int64_t stream) {
        array.set_stream(stream);
        arrays.push_back(&array);
    }
};

/// Scattered runs of 5 of 6 float64 (a table of `count` entries, more than
/// a kernel's parameters hold).
std::vector<mts_data_movement_t> capture_movements(uintptr_t count) {
    std::vector<mts_data_movement_t> movements;
    for (uintptr_t i = 0; i < count; i++) {
        movements.push_back({(i * 7) % count, i, 1, 0, 5});
    }
    return movements;
}

}  // namespace

// A plan captured while its table's upload is still queued (behind a held
// stream): the capture must not wait for the upload on the host, and the
// graph must move right when it is launched.
TEST_P(MovePlan, ACaptureBeforeTheUploadRanWaitsForNothingOnTheHost) {
    if (device().device_type != kDLCUDA || !simulated_gpu()) {
        GTEST_SKIP() << "needs the simulated CUDA device";
    }
    // a table in the kernel's parameters, and one in device memory
    for (uintptr_t samples : {uintptr_t(150), uintptr_t(400)}) {
        SCOPED_TRACE(std::to_string(samples) + " movements");
        std::mt19937_64 rng(11);
        const auto movements = capture_movements(samples);
        auto planned_input = random_array(rng, float64(), {samples, 6});
        auto planned_output = random_array(rng, float64(), {samples, 6});
        auto input = random_array(rng, float64(), {samples, 6});
        auto output = random_array(rng, float64(), {samples, 6});
        auto expected = output.copy(device());
        ASSERT_EQ(call_move_data(expected, input.get(), movements), MTS_SUCCESS) << last_error();
        CaptureStreams streams(device().device_id);
        streams.use(planned_input, streams.planning);
        streams.use(planned_output, streams.planning);
        streams.use(input, streams.capturing);
        streams.use(output, streams.capturing);
        sim::drain();
        const size_t allocated_before = sim::allocated_bytes();
        const size_t objects_before = sim::retained_objects();

        sim::Gate gate = sim::hold(streams.planning, device().device_id);
        {
            mtsarray::MovePlan plan(planned_output, planned_input, movements);  // its upload waits behind the gate
            const size_t waits = sim::host_waits();
            sim::begin_capture(streams.capturing, device().device_id);
            EXPECT_EQ(mtsarray_move_plan_execute(plan.get(), &output.get(), &input.get()), MTS_SUCCESS)
                << last_error();
            sim::Graph graph = sim::end_capture(streams.capturing, device().device_id);
            EXPECT_EQ(sim::host_waits(), waits) << "the capture waited for the plan's upload on the host";
            EXPECT_FALSE(gate.is_open());
            gate.open();
            for (int replay = 0; replay < 2; replay++) {
                sim::launch(graph, streams.capturing, device().device_id);
                EXPECT_EQ(read_bytes(output), read_bytes(expected));
            }
        }
        sim::drain();
        EXPECT_TRUE(sim::violations().empty()) << sim::violations().front();
        sim::clear_violations();
        EXPECT_EQ(sim::retained_objects(), objects_before) << "the graph's table goes with the graph";
        EXPECT_EQ(sim::allocated_bytes(), allocated_before) << "a table was not freed";
    }
}

// A graph replays a plan freed (mtsarray_move_plan_free) after the capture:
// the graph keeps what it reads alive, and gives it back when it goes.
TEST_P(MovePlan, AGraphOutlivesThePlanItCaptured) {
    if (device().device_type != kDLCUDA || !simulated_gpu()) {
        GTEST_SKIP() << "needs the simulated CUDA device";
    }
    std::mt19937_64 rng(12);
    constexpr uintptr_t samples = 300;
    const auto movements = capture_movements(samples);
    auto input = random_array(rng, float64(), {samples, 6});
    auto output = random_array(rng, float64(), {samples, 6});
    const auto original = read_bytes(output);
    auto expected = output.copy(device());
    ASSERT_EQ(call_move_data(expected, input.get(), movements), MTS_SUCCESS) << last_error();
    CaptureStreams streams(device().device_id);
    streams.use(input, streams.capturing);
    streams.use(output, streams.capturing);
    sim::drain();
    const size_t allocated_before = sim::allocated_bytes();
    const size_t objects_before = sim::retained_objects();

    for (bool freed_during_capture : {false, true}) {
        {
            mtsarray_move_plan_t* plan = nullptr;
            ASSERT_EQ(mtsarray_move_plan_create(&output.get(), &input.get(), movements.data(), movements.size(),
                                                &plan),
                      MTS_SUCCESS)
                << last_error();
            sim::drain();  // the upload is done
            sim::begin_capture(streams.capturing, device().device_id);
            EXPECT_EQ(mtsarray_move_plan_execute(plan, &output.get(), &input.get()), MTS_SUCCESS) << last_error();
            EXPECT_EQ(mtsarray_move_plan_execute(plan, &output.get(), &input.get()), MTS_SUCCESS) << last_error();
            if (freed_during_capture) {
                EXPECT_EQ(mtsarray_move_plan_free(plan), MTS_SUCCESS);
            }
            sim::Graph graph = sim::end_capture(streams.capturing, device().device_id);
            if (!freed_during_capture) {
                EXPECT_EQ(mtsarray_move_plan_free(plan), MTS_SUCCESS);
            }
            sim::drain();
            EXPECT_GT(sim::retained_objects(), objects_before) << "the graph owns the plan's table";
            for (int replay = 0; replay < 2; replay++) {
                mtsarray::Array fresh = array_from_bytes(device(), float64(), {samples, 6}, original);
                output.copy_from(fresh);
                sim::launch(graph, streams.capturing, device().device_id);
                EXPECT_EQ(read_bytes(output), read_bytes(expected)) << "replay " << replay;
            }
        }
        sim::drain();
        EXPECT_TRUE(sim::violations().empty()) << sim::violations().front();
        sim::clear_violations();
        EXPECT_EQ(sim::retained_objects(), objects_before) << "the table goes with the graph";
        EXPECT_EQ(sim::allocated_bytes(), allocated_before) << "the plan's table was not freed";
    }
}
#endif

// ---- the C++ wrapper ----------------------------------------------------------------

TEST_P(MovePlan, CppWrapperIsMoveOnlyAndThrows) {
    static_assert(!std::is_copy_constructible<mtsarray::MovePlan>::value, "MovePlan is move-only");
    static_assert(std::is_nothrow_move_constructible<mtsarray::MovePlan>::value, "MovePlan moves");
    std::mt19937_64 rng(8);
    auto input = random_array(rng, float64(), {3, 4});
    auto output = mtsarray::Array::zeros(device(), float64(), {3, 4});
    mtsarray::MovePlan plan(output, input, {{2, 0, 0, 0, 4}});
    mtsarray::MovePlan moved(std::move(plan));
    EXPECT_EQ(plan.get(), nullptr);
    EXPECT_THROW(plan.execute(output, input), mtsarray::Error);
    moved.execute(output, input);
    const auto in = from_bytes<double>(read_bytes(input));
    const auto out = from_bytes<double>(read_bytes(output));
    EXPECT_EQ(std::vector<double>(out.begin(), out.begin() + 4), std::vector<double>(in.begin() + 8, in.end()));

    plan = std::move(moved);
    auto wrong = mtsarray::Array::zeros(device(), float32(), {3, 4});
    try {
        plan.execute(wrong, input);
        FAIL() << "a float32 output was accepted";
    } catch (const mtsarray::Error& error) {
        EXPECT_NE(std::string(error.what()).find("another dtype"), std::string::npos) << error.what();
    }
    EXPECT_THROW(mtsarray::MovePlan(output, input, {{3, 0, 0, 0, 4}}), mtsarray::Error);
    mtsarray::Array empty = std::move(output);
    EXPECT_THROW(plan.execute(output, input), mtsarray::Error);
    EXPECT_THROW(mtsarray::MovePlan(output, input, {}), mtsarray::Error);
}

// ---- the CPU's prepared form --------------------------------------------------------

TEST(HostMovePlan, DecidesTheSplitOnce) {
    namespace detail = mtsarray::detail;
    namespace cpu = mtsarray::detail::cpu;
    const int32_t threads = mtsarray::num_threads();
    mtsarray::set_num_threads(4);
    const size_t count = 100000;
    std::vector<mts_data_movement_t> movements(count);
    for (size_t i = 0; i < count; i++) {
        movements[i] = {(i * 7919) % count, i, 0, 0, 32};
    }
    const detail::Shape shape = {count, 32};
    const detail::MovePlan caller_plan(shape, shape, 8, movements.data(), count);
    std::vector<mts_data_movement_t> copy(count);
    const cpu::HostMovePlan scattered(caller_plan, copy.data());
    EXPECT_EQ(scattered.checked().threads, 4u);
    EXPECT_EQ(scattered.checked().split, cpu::MoveDataSplit::movement_blocks);
    EXPECT_FALSE(scattered.checked().merge);
    EXPECT_EQ(std::memcmp(copy.data(), movements.data(), count * sizeof(mts_data_movement_t)), 0);

    for (size_t i = 0; i < count; i++) {
        movements[i] = {i, i, 0, 0, 32};
    }
    const cpu::HostMovePlan in_order(caller_plan, copy.data());
    EXPECT_TRUE(in_order.summary().one_run);
    mtsarray::set_num_threads(threads);
}

// Movements that all share the ranges of the first one (the common list of
// libmetatensor's merges) are kept as their samples alone, and copied from
// them as move_data copies such a list: the same bytes as move_data, at the
// thread count the plan was made with and at another one; scattered, in
// runs, with a component axis, with outputs written twice (the last
// movement wins, as in move_data). A list that does not share its ranges,
// or a short one, keeps the whole movements.
TEST(HostMovePlan, MovementsSharingTheirRangesAreCopiedFromTheirSamples) {
    namespace detail = mtsarray::detail;
    namespace cpu = mtsarray::detail::cpu;
    const int32_t threads = mtsarray::num_threads();
    std::mt19937_64 rng(21);
    struct Layout {
        detail::Shape input;
        detail::Shape output;
    };
    auto check = [&](const Layout& layout, const std::vector<mts_data_movement_t>& movements, bool shared) {
        const detail::MovePlan caller_plan(layout.output, layout.input, sizeof(double), movements.data(),
                                           movements.size());
        std::vector<mts_data_movement_t> copy(movements.size());
        const cpu::HostMovePlan plan(caller_plan, copy.data());
        EXPECT_EQ(plan.checked().shared_samples.size(), shared ? 2 * movements.size() : 0u);
        size_t input_count = 1;
        size_t output_count = 1;
        for (auto size : layout.input) {
            input_count *= size;
        }
        for (auto size : layout.output) {
            output_count *= size;
        }
        std::vector<double> input(input_count);
        for (auto& value : input) {
            value = static_cast<double>(rng() % 1000000);
        }
        for (int32_t count : {mtsarray::num_threads(), int32_t(1), int32_t(3)}) {
            mtsarray::set_num_threads(count);
            std::vector<double> expected(output_count, -1.0);
            std::vector<double> got(output_count, -1.0);
            cpu::move_data(expected.data(), input.data(), caller_plan);
            plan.execute(got.data(), input.data());
            EXPECT_EQ(got, expected) << count << " threads";
        }
    };
    for (int32_t made_with : {1, 2, 4}) {
        SCOPED_TRACE(::testing::Message() << "plan made with " << made_with << " threads");
        mtsarray::set_num_threads(made_with);
        const size_t count = 50000;
        const Layout plain = {{count, 12}, {count, 10}};
        const Layout components = {{count, 3, 12}, {count, 3, 10}};
        // scattered, each output sample once
        std::vector<size_t> order(count);
        std::iota(order.begin(), order.end(), size_t(0));
        std::shuffle(order.begin(), order.end(), rng);
        std::vector<mts_data_movement_t> scattered(count);
        for (size_t i = 0; i < count; i++) {
            scattered[i] = {order[i], i, 3, 1, 5};
        }
        check(plain, scattered, true);
        check(components, scattered, true);
        // runs of 10 consecutive samples, then a jump
        std::vector<mts_data_movement_t> runs(count);
        for (size_t i = 0; i < count; i++) {
            runs[i] = {(i / 10 * 7919 % (count / 10)) * 10 + i % 10, i, 2, 0, 10};
        }
        check(plain, runs, true);
        // an output sample written twice
        std::vector<mts_data_movement_t> twice = scattered;
        twice[count - 1].sample_out = 7;
        check(plain, twice, true);
        // ranges that differ once, and a short list
        std::vector<mts_data_movement_t> differing = scattered;
        differing[count / 2].properties_length = 4;
        check(plain, differing, false);
        check(plain, std::vector<mts_data_movement_t>(scattered.begin(), scattered.begin() + 16), false);
    }
    mtsarray::set_num_threads(threads);
}

}  // namespace
