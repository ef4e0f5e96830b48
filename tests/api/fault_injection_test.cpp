// Fault injection (built only with -DMTSARRAY_TEST_HOOKS=ON): every
// allocation and every fallible backend call of an operation is made to fail
// in turn (k = 0, 1, 2, ... until the operation runs to completion). Each
// failure must give a clear error ("injected fault"), leave every input
// unchanged and usable, call each foreign deleter / destroy exactly once, and
// leak nothing: scripts/sanitizers.sh runs this under ASan with leak
// detection.

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"
#include "support/test_hooks_api.h"

using namespace mtsarray_test;

namespace {

int64_t faults_survived = 0;

// Runs `operation` with a fault after k = 0, 1, 2, ... fault points until it
// succeeds. After every injected fault, `after_failure` checks the inputs;
// after the final success `after_success` checks the result. Returns the
// number of faults injected (the operation's number of fault points).
int64_t sweep(const std::function<mts_status_t()>& operation, const std::function<void()>& after_failure,
              const std::function<void()>& after_success) {
    for (int64_t k = 0; k < 10000; k++) {
        const int64_t injected_before = mtsarray_test_faults_injected();
        mtsarray_test_fail_after(-1);  // reset the point counter
        mtsarray_test_fail_after(k);
        reset_last_error();
        const auto status = operation();
        const int64_t points = mtsarray_test_fail_after(-1);
        const bool fired = mtsarray_test_faults_injected() != injected_before;
        if (status == MTS_SUCCESS) {
            EXPECT_FALSE(fired) << "k = " << k << ": a fault was injected but the operation succeeded";
            EXPECT_EQ(points, k) << "the operation passed " << points << " fault points";
            std::printf("[fault injection] %s: %lld fault points, each failed once\n",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                        static_cast<long long>(k));
            after_success();
            return k;
        }
        EXPECT_TRUE(fired) << "k = " << k << ": the operation failed without an injected fault: "
                           << last_error();
        const auto message = last_error();
        EXPECT_NE(message.find("injected fault"), std::string::npos) << message;
        EXPECT_EQ(message.rfind("mtsarray", 0), 0u) << "the message names the function: " << message;
        EXPECT_EQ(last_error_origin(), "mtsarray");
        if (::testing::Test::HasFailure()) {
            return k;
        }
        after_failure();
        if (::testing::Test::HasFailure()) {
            return k;
        }
        faults_survived += 1;
    }
    ADD_FAILURE() << "the operation never succeeded";
    return -1;
}

std::vector<double> iota(size_t count, double start = 0.5) {
    std::vector<double> values(count);
    for (size_t i = 0; i < count; i++) {
        values[i] = start + static_cast<double>(i);
    }
    return values;
}

mtsarray::Array cpu_array(const std::vector<uintptr_t>& shape, double start = 0.5) {
    return array_from_bytes(DLDevice{kDLCPU, 0}, float64(), shape, to_bytes(iota(product(shape), start)));
}

mts_array_t scalar_fill_value(double value, int* destroyed) {
    return ForeignArray::make(float64(), {}, to_bytes(std::vector<double>{value}), destroyed);
}

void destroy(mts_array_t& array) {
    if (array.destroy != nullptr) {
        array.destroy(array.ptr);
    }
    array = {};
}

// A DLPack tensor over its own heap copy of `values`, with `strides` (none:
// C-contiguous) and `flags`; `deleted` counts deleter calls.
struct OwnedTensor {
    DLManagedTensorVersioned managed;
    std::vector<double> values;
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;
    int* deleted;

    static DLManagedTensorVersioned* make(std::vector<double> values, std::vector<int64_t> shape,
                                          std::vector<int64_t> strides, uint64_t flags, int* deleted) {
        auto* self = new OwnedTensor{{}, std::move(values), std::move(shape), std::move(strides), deleted};
        auto& managed = self->managed;
        managed.version = dlpack_version();
        managed.manager_ctx = self;
        managed.flags = flags;
        managed.deleter = [](DLManagedTensorVersioned* tensor) {
            auto* owner = static_cast<OwnedTensor*>(tensor->manager_ctx);
            *owner->deleted += 1;
            delete owner;
        };
        managed.dl_tensor.data = self->values.data();
        managed.dl_tensor.device = DLDevice{kDLCPU, 0};
        managed.dl_tensor.ndim = static_cast<int32_t>(self->shape.size());
        managed.dl_tensor.dtype = float64();
        managed.dl_tensor.shape = self->shape.data();
        managed.dl_tensor.strides = self->strides.empty() ? nullptr : self->strides.data();
        managed.dl_tensor.byte_offset = 0;
        return &managed;
    }
};

class FaultInjection : public ::testing::Test {
protected:
    void SetUp() override { mtsarray_test_fail_after(-1); }
    void TearDown() override { mtsarray_test_fail_after(-1); }
};

}  // namespace

TEST_F(FaultInjection, ZerosFullAndWrap) {
    const std::vector<uintptr_t> shape = {4, 5};
    mts_array_t result = {};
    const auto unchanged = [&] { EXPECT_EQ(result.ptr, nullptr) << "output written on error"; };
    EXPECT_GT(sweep([&] { return mtsarray_zeros(DLDevice{kDLCPU, 0}, float64(), shape.data(), 2, &result); },
                    unchanged,
                    [&] {
                        EXPECT_EQ(from_bytes<double>(read_bytes(result)), std::vector<double>(20, 0.0));
                        destroy(result);
                    }),
              0);
    const double value = 2.5;
    EXPECT_GT(sweep([&] { return mtsarray_full(DLDevice{kDLCPU, 0}, float64(), shape.data(), 2, &value, &result); },
                    unchanged,
                    [&] {
                        EXPECT_EQ(from_bytes<double>(read_bytes(result)), std::vector<double>(20, 2.5));
                        destroy(result);
                    }),
              0);

    auto data = iota(20);
    int deleted = 0;
    EXPECT_GT(sweep(
                  [&] {
                      return mtsarray_wrap(
                          data.data(), DLDevice{kDLCPU, 0}, float64(), shape.data(), 2,
                          [](void* context) { *static_cast<int*>(context) += 1; }, &deleted, &result);
                  },
                  [&] {
                      unchanged();
                      EXPECT_EQ(deleted, 0) << "the deleter of a failed wrap must not run";
                  },
                  [&] {
                      EXPECT_EQ(from_bytes<double>(read_bytes(result)), iota(20));
                      destroy(result);
                      EXPECT_EQ(deleted, 1);
                  }),
              0);
}

TEST_F(FaultInjection, Create) {
    auto prototype = cpu_array({3, 4});
    const auto before = read_bytes(prototype);
    const auto& array = prototype.get();
    mts_array_t result = {};
    int destroyed = 0;
    int calls = 0;
    const std::vector<uintptr_t> shape = {2, 7};
    EXPECT_GT(sweep(
                  [&] {
                      calls += 1;
                      return array.create(array.ptr, shape.data(), 2, scalar_fill_value(-3.0, &destroyed), &result);
                  },
                  [&] {
                      EXPECT_EQ(result.ptr, nullptr);
                      EXPECT_EQ(destroyed, calls) << "fill_value must be destroyed exactly once";
                      EXPECT_EQ(read_bytes(prototype), before);
                      EXPECT_EQ(shape_of(array), (std::vector<uintptr_t>{3, 4}));
                  },
                  [&] {
                      EXPECT_EQ(destroyed, calls);
                      EXPECT_EQ(shape_of(result), shape);
                      EXPECT_EQ(from_bytes<double>(read_bytes(result)), std::vector<double>(14, -3.0));
                      destroy(result);
                  }),
              0);
}

TEST_F(FaultInjection, Copy) {
    auto source = cpu_array({5, 2, 3});
    const auto before = read_bytes(source);
    const auto& array = source.get();
    mts_array_t result = {};
    EXPECT_GT(sweep([&] { return array.copy(array.ptr, DLDevice{kDLCPU, 0}, &result); },
                    [&] {
                        EXPECT_EQ(result.ptr, nullptr);
                        EXPECT_EQ(read_bytes(source), before);
                    },
                    [&] {
                        EXPECT_EQ(read_bytes(result), before);
                        EXPECT_NE(result.ptr, array.ptr);
                        destroy(result);
                    }),
              0);
}

TEST_F(FaultInjection, MoveDataBetweenArrays) {
    // three movements, and one (a path of its own), with a component axis
    // of 2 or none
    const std::vector<mts_data_movement_t> all = {{0, 1, 0, 2, 3}, {3, 0, 1, 0, 2}, {2, 2, 0, 3, 2}};
    for (const size_t components : {size_t(2), size_t(1)}) {
        for (const size_t count : {all.size(), size_t(1)}) {
            SCOPED_TRACE(::testing::Message() << count << " movements, " << components << " components");
            const std::vector<mts_data_movement_t> movements(all.begin(), all.begin() + count);
            auto input = components == 1 ? cpu_array({4, 3}, 100.5) : cpu_array({4, components, 3}, 100.5);
            auto output = components == 1 ? cpu_array({3, 5}, -50.5) : cpu_array({3, components, 5}, -50.5);
            const auto input_before = read_bytes(input);
            const auto output_before = read_bytes(output);
            const auto& out = output.get();
            EXPECT_GT(
                sweep([&] { return out.move_data(out.ptr, input.get().ptr, movements.data(), movements.size()); },
                      [&] {
                          EXPECT_EQ(read_bytes(output), output_before) << "output written on error";
                          EXPECT_EQ(read_bytes(input), input_before);
                      },
                      [&] {
                          EXPECT_EQ(read_bytes(input), input_before);
                          // naive reference
                          auto expected = from_bytes<double>(output_before);
                          const auto in = from_bytes<double>(input_before);
                          for (const auto& m : movements) {
                              for (size_t c = 0; c < components; c++) {
                                  for (size_t x = 0; x < m.properties_length; x++) {
                                      expected[(m.sample_out * components + c) * 5 + m.properties_start_out + x] =
                                          in[(m.sample_in * components + c) * 3 + m.properties_start_in + x];
                                  }
                              }
                          }
                          EXPECT_EQ(from_bytes<double>(read_bytes(output)), expected);
                      }),
                0);
        }
    }
}

TEST_F(FaultInjection, MoveDataInPlaceSnapshot) {
    auto array = cpu_array({4, 3});
    const auto before = read_bytes(array);
    const auto& handle = array.get();
    // rotate the samples: every movement reads what another one writes
    const std::vector<mts_data_movement_t> movements = {{0, 1, 0, 0, 3}, {1, 2, 0, 0, 3}, {2, 3, 0, 0, 3},
                                                         {3, 0, 0, 0, 3}};
    const int64_t faults =
        sweep([&] { return handle.move_data(handle.ptr, handle.ptr, movements.data(), movements.size()); },
              [&] { EXPECT_EQ(read_bytes(array), before) << "array written on error"; },
              [&] {
                  const auto old = from_bytes<double>(before);
                  std::vector<double> expected(12);
                  for (size_t s = 0; s < 4; s++) {
                      for (size_t p = 0; p < 3; p++) {
                          expected[((s + 1) % 4) * 3 + p] = old[s * 3 + p];
                      }
                  }
                  EXPECT_EQ(from_bytes<double>(read_bytes(array)), expected);
              });
    // the snapshot's allocation, its copy and the move itself at least
    EXPECT_GE(faults, 3);
}

TEST_F(FaultInjection, SwapAxes) {
    auto array = cpu_array({3, 4, 5});
    const auto before = read_bytes(array);
    const auto& handle = array.get();
    EXPECT_GT(sweep([&] { return handle.swap_axes(handle.ptr, 0, 2); },
                    [&] {
                        EXPECT_EQ(shape_of(handle), (std::vector<uintptr_t>{3, 4, 5}));
                        EXPECT_EQ(read_bytes(array), before);
                    },
                    [&] {
                        EXPECT_EQ(shape_of(handle), (std::vector<uintptr_t>{5, 4, 3}));
                        const auto old = from_bytes<double>(before);
                        const auto now = from_bytes<double>(read_bytes(array));
                        for (size_t i = 0; i < 3; i++) {
                            for (size_t j = 0; j < 4; j++) {
                                for (size_t k = 0; k < 5; k++) {
                                    ASSERT_EQ(now[(k * 4 + j) * 3 + i], old[(i * 4 + j) * 5 + k]);
                                }
                            }
                        }
                    }),
              0);
}

TEST_F(FaultInjection, AsDlpack) {
    auto array = cpu_array({2, 3});
    const auto before = read_bytes(array);
    const auto& handle = array.get();
    DLManagedTensorVersioned* tensor = nullptr;
    EXPECT_GT(sweep([&] { return handle.as_dlpack(handle.ptr, &tensor, DLDevice{kDLCPU, 0}, nullptr, dlpack_version()); },
                    [&] {
                        EXPECT_EQ(tensor, nullptr);
                        EXPECT_EQ(read_bytes(array), before);
                    },
                    [&] {
                        ASSERT_NE(tensor, nullptr);
                        // the export outlives the array's owner going away
                        auto bytes = before;
                        std::memcpy(bytes.data(), tensor->dl_tensor.data, bytes.size());
                        EXPECT_EQ(bytes, before);
                        tensor->deleter(tensor);
                    }),
              0);
}

TEST_F(FaultInjection, FromDlpackZeroCopyAndCopy) {
    // C-contiguous and writable: zero-copy; strided or READ_ONLY: copied
    struct Case {
        const char* name;
        std::vector<int64_t> strides;
        uint64_t flags;
    };
    const std::vector<Case> cases = {
        {"zero-copy", {}, 0},
        {"transposed", {1, 3}, 0},
        {"read-only", {}, DLPACK_FLAG_BITMASK_READ_ONLY},
    };
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        const auto values = iota(12);
        int deleted = 0;
        int made = 0;
        mts_array_t result = {};
        EXPECT_GE(sweep(
                      [&] {
                          made += 1;
                          return mtsarray_from_dlpack(OwnedTensor::make(values, {4, 3}, c.strides, c.flags, &deleted),
                                                      &result);
                      },
                      [&] {
                          EXPECT_EQ(result.ptr, nullptr);
                          EXPECT_EQ(deleted, made) << "the deleter runs exactly once on error";
                      },
                      [&] {
                          std::vector<double> expected = values;
                          if (!c.strides.empty()) {  // element (i, j) at i + 3 j
                              for (size_t i = 0; i < 4; i++) {
                                  for (size_t j = 0; j < 3; j++) {
                                      expected[i * 3 + j] = values[i * c.strides[0] + j * c.strides[1]];
                                  }
                              }
                          }
                          EXPECT_EQ(from_bytes<double>(read_bytes(result)), expected);
                          destroy(result);
                          EXPECT_EQ(deleted, made);
                      }),
                  1);
    }
}

TEST_F(FaultInjection, TensorMapTo) {
    // one block [3, 2] with int32 labels, all on the CPU (mtsarray arrays)
    auto labels_array = [](std::vector<int32_t> values, uintptr_t names) {
        const uintptr_t count = values.size() / names;
        return array_from_bytes(DLDevice{kDLCPU, 0}, int32(), {count, names}, to_bytes(values)).release();
    };
    const char* sample_names[] = {"s"};
    const char* property_names[] = {"p"};
    const char* key_names[] = {"k"};
    const mts_labels_t* samples = mts_labels(sample_names, 1, labels_array({0, 1, 2}, 1));
    const mts_labels_t* properties = mts_labels(property_names, 1, labels_array({5, 6}, 1));
    const mts_labels_t* keys = mts_labels(key_names, 1, labels_array({7}, 1));
    ASSERT_NE(samples, nullptr) << last_error();
    ASSERT_NE(properties, nullptr) << last_error();
    ASSERT_NE(keys, nullptr) << last_error();
    auto values = cpu_array({3, 2});
    const auto before = read_bytes(values);
    mts_block_t* block = mts_block(std::move(values).release(), samples, nullptr, 0, properties);
    ASSERT_NE(block, nullptr) << last_error();
    mts_tensormap_t* tensor = mts_tensormap(keys, &block, 1);
    ASSERT_NE(tensor, nullptr) << last_error();
    mts_labels_free(samples);
    mts_labels_free(properties);
    mts_labels_free(keys);

    const auto block_values = [](mts_tensormap_t* map) {
        mts_block_t* first = nullptr;
        EXPECT_EQ(mts_tensormap_block_by_id(map, &first, 0), MTS_SUCCESS) << last_error();
        mts_array_t array = {};
        EXPECT_EQ(mts_block_data(first, &array), MTS_SUCCESS) << last_error();
        return read_bytes(array);
    };

    mts_tensormap_t* result = nullptr;
    EXPECT_GT(sweep([&] { return mtsarray_tensormap_to(tensor, DLDevice{kDLCPU, 0}, -1, &result); },
                    [&] {
                        EXPECT_EQ(result, nullptr);
                        EXPECT_EQ(block_values(tensor), before);
                    },
                    [&] {
                        ASSERT_NE(result, nullptr);
                        EXPECT_EQ(block_values(result), before);
                        mts_tensormap_free(result);
                    }),
              0);
    mts_tensormap_free(tensor);
}

// Last (gtest runs tests in declaration order within a binary): the figures
// for the report. ctest runs every test in its own process, so each prints
// its own share.
class FaultInjectionReport : public ::testing::Environment {
public:
    void TearDown() override {
        std::printf("[fault injection] %lld faults injected, %lld survived with every check passing\n",
                    static_cast<long long>(mtsarray_test_faults_injected()),
                    static_cast<long long>(faults_survived));
    }
};

static ::testing::Environment* const report_environment =
    ::testing::AddGlobalTestEnvironment(new FaultInjectionReport);
