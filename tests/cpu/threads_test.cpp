// Host threads (mtsarray_set_num_threads): the setting and its errors, and
// every host operation that may run on several threads (move_data, copy,
// create, swap_axes, strided DLPack import) giving the very bytes of one
// thread and of a plain reference loop, for random plans, every element
// size, empty arrays, zero movements, 0-d arrays, misaligned memory and
// sizes well above the 1 MiB from which work is split.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/backends.hpp"

using namespace mtsarray_test;

namespace {

constexpr DLDevice cpu = {kDLCPU, 0};

// the thread counts compared with one thread (odd ones split unevenly)
const std::vector<int32_t> thread_counts = {2, 3, 4, 7};

// one dtype per element size
std::vector<DType> one_dtype_per_size() {
    return {{make_dtype(kDLUInt, 8), "uint8"},
            {make_dtype(kDLInt, 16), "int16"},
            {make_dtype(kDLFloat, 32), "float32"},
            {make_dtype(kDLFloat, 64), "float64"},
            {make_dtype(kDLComplex, 128), "complex128"}};
}

/// Sets the thread count for the scope, back to the previous one after.
class ThreadCount {
public:
    explicit ThreadCount(int32_t count) {
        EXPECT_EQ(mtsarray_get_num_threads(&previous_), MTS_SUCCESS) << last_error();
        EXPECT_EQ(mtsarray_set_num_threads(count), MTS_SUCCESS) << last_error();
    }
    ~ThreadCount() { EXPECT_EQ(mtsarray_set_num_threads(previous_), MTS_SUCCESS) << last_error(); }
    ThreadCount(const ThreadCount&) = delete;
    ThreadCount& operator=(const ThreadCount&) = delete;

private:
    int32_t previous_ = 1;
};

/// Runs `operation()` (which returns bytes) with one thread, then with each
/// of thread_counts, and checks they all give the same bytes as `expected`.
template <typename Operation>
void expect_same_bytes_on_every_thread_count(const std::vector<uint8_t>& expected, Operation operation,
                                             const std::string& what) {
    {
        ThreadCount one(1);
        ASSERT_EQ(operation(), expected) << what << ": one thread differs from the reference";
    }
    for (int32_t threads : thread_counts) {
        ThreadCount many(threads);
        ASSERT_EQ(operation(), expected) << what << ": " << threads << " threads differ from one thread";
    }
}

/// Memory for wrapped arrays whose first element is `misalignment` bytes
/// past a 64-byte boundary.
class Misaligned {
public:
    Misaligned(const std::vector<uint8_t>& bytes, size_t misalignment)
        : storage_(bytes.size() + 64 + misalignment) {
        const auto address = reinterpret_cast<uintptr_t>(storage_.data());
        offset_ = (64 - address % 64) % 64 + misalignment;
        if (!bytes.empty()) {
            std::memcpy(storage_.data() + offset_, bytes.data(), bytes.size());
        }
    }
    void* data() { return storage_.data() + offset_; }

private:
    std::vector<uint8_t> storage_;
    size_t offset_ = 0;
};

// ---- move_data --------------------------------------------------------------

enum class Outputs { increasing, permuted, duplicated, in_order };

struct MoveCase {
    std::vector<uintptr_t> components;
    uintptr_t samples_in;
    uintptr_t samples_out;
    uintptr_t properties_in;
    uintptr_t properties_out;
    size_t movements;
    Outputs outputs;
    bool whole_rows;  // every movement copies whole rows (they coalesce)
};

std::vector<mts_data_movement_t> make_movements(std::mt19937_64& rng, const MoveCase& c) {
    std::vector<uintptr_t> samples_out(c.samples_out);
    std::iota(samples_out.begin(), samples_out.end(), uintptr_t(0));
    if (c.outputs == Outputs::permuted) {
        std::shuffle(samples_out.begin(), samples_out.end(), rng);
    }
    std::vector<mts_data_movement_t> movements;
    if (c.outputs == Outputs::in_order) {
        // consecutive samples on both sides, one property range: one run
        const uintptr_t widest = std::min(c.properties_in, c.properties_out);
        const uintptr_t length = c.whole_rows ? widest : widest / 2 + 1;
        const uintptr_t start_in = c.whole_rows ? 0 : (c.properties_in - length) / 2;
        const uintptr_t start_out = c.properties_out - length;
        const uintptr_t first_in = std::uniform_int_distribution<uintptr_t>(0, c.samples_in - c.movements)(rng);
        for (size_t i = 0; i < c.movements; i++) {
            movements.push_back({first_in + i, c.samples_out - c.movements + i, start_in, start_out, length});
        }
        return movements;
    }
    for (size_t i = 0; i < c.movements; i++) {
        mts_data_movement_t m = {};
        m.sample_in = std::uniform_int_distribution<uintptr_t>(0, c.samples_in - 1)(rng);
        if (c.outputs == Outputs::duplicated) {
            // a few output samples, written many times with overlapping ranges
            m.sample_out = std::uniform_int_distribution<uintptr_t>(0, std::min<uintptr_t>(c.samples_out, 8) - 1)(rng);
        } else {
            m.sample_out = samples_out[i % samples_out.size()];
        }
        const uintptr_t widest = std::min(c.properties_in, c.properties_out);
        if (c.whole_rows && c.properties_in == c.properties_out) {
            m.properties_length = widest;
        } else {
            m.properties_length = std::uniform_int_distribution<uintptr_t>(0, widest)(rng);
            m.properties_start_in =
                std::uniform_int_distribution<uintptr_t>(0, c.properties_in - m.properties_length)(rng);
            m.properties_start_out =
                std::uniform_int_distribution<uintptr_t>(0, c.properties_out - m.properties_length)(rng);
        }
        movements.push_back(m);
    }
    return movements;
}

// output[s_out, c..., p_out + x] = input[s_in, c..., p_in + x], in order
std::vector<uint8_t> reference_move(std::vector<uint8_t> output, const std::vector<uint8_t>& input,
                                    const MoveCase& c, const std::vector<mts_data_movement_t>& movements,
                                    size_t element) {
    size_t components = 1;
    for (auto size : c.components) {
        components *= size;
    }
    for (const auto& m : movements) {
        for (size_t k = 0; k < components; k++) {
            const size_t in = ((m.sample_in * components + k) * c.properties_in + m.properties_start_in) * element;
            const size_t out =
                ((m.sample_out * components + k) * c.properties_out + m.properties_start_out) * element;
            std::copy_n(input.begin() + static_cast<std::ptrdiff_t>(in), m.properties_length * element,
                        output.begin() + static_cast<std::ptrdiff_t>(out));
        }
    }
    return output;
}

std::vector<uintptr_t> shape_of_case(uintptr_t samples, const std::vector<uintptr_t>& components, uintptr_t properties) {
    std::vector<uintptr_t> shape = {samples};
    shape.insert(shape.end(), components.begin(), components.end());
    shape.push_back(properties);
    return shape;
}

void check_move_case(const DType& dtype, const MoveCase& c, uint64_t seed, size_t misalignment) {
    std::mt19937_64 rng(seed);
    const size_t element = element_size(dtype.dtype);
    const auto input_shape = shape_of_case(c.samples_in, c.components, c.properties_in);
    const auto output_shape = shape_of_case(c.samples_out, c.components, c.properties_out);
    const auto input_bytes = random_bytes(rng, product(input_shape) * element);
    const auto output_bytes = random_bytes(rng, product(output_shape) * element);
    const auto movements = make_movements(rng, c);
    const auto expected = reference_move(output_bytes, input_bytes, c, movements, element);

    Misaligned input_memory(input_bytes, misalignment);
    auto input = mtsarray::Array::wrap(input_memory.data(), cpu, dtype.dtype, input_shape);
    auto run = [&] {
        Misaligned output_memory(output_bytes, misalignment == 0 ? 0 : misalignment + 2);
        auto output = mtsarray::Array::wrap(output_memory.data(), cpu, dtype.dtype, output_shape);
        const auto& out = output.get();
        EXPECT_EQ(out.move_data(out.ptr, input.get().ptr, movements.data(), movements.size()), MTS_SUCCESS)
            << last_error();
        return read_bytes(output);
    };
    expect_same_bytes_on_every_thread_count(expected, run,
                                            std::string("move_data ") + dtype.name + " (" +
                                                std::to_string(c.movements) + " movements, seed " +
                                                std::to_string(seed) + ")");
}

}  // namespace

TEST(HostThreads, SetAndGetTheCount) {
    int32_t initial = 0;
    ASSERT_EQ(mtsarray_get_num_threads(&initial), MTS_SUCCESS) << last_error();
    EXPECT_GE(initial, 1);
    for (int32_t count : {1, 2, 7, 64, 4096}) {
        ASSERT_EQ(mtsarray_set_num_threads(count), MTS_SUCCESS) << last_error();
        int32_t read = 0;
        ASSERT_EQ(mtsarray_get_num_threads(&read), MTS_SUCCESS) << last_error();
        EXPECT_EQ(read, count);
    }
    ASSERT_EQ(mtsarray_set_num_threads(3), MTS_SUCCESS);
    for (int32_t bad : {0, -1, -1000, 4097, INT32_MIN, INT32_MAX}) {
        reset_last_error();
        ASSERT_EQ(mtsarray_set_num_threads(bad), MTS_CALLBACK_ERROR) << bad;
        const auto message = last_error();
        EXPECT_NE(message.find("mtsarray_set_num_threads"), std::string::npos) << message;
        EXPECT_NE(message.find("number of threads must be in [1, 4096], got " + std::to_string(bad)),
                  std::string::npos)
            << message;
        EXPECT_EQ(last_error_origin(), "mtsarray");
        int32_t read = 0;
        ASSERT_EQ(mtsarray_get_num_threads(&read), MTS_SUCCESS);
        EXPECT_EQ(read, 3) << "a rejected count changed the setting";
    }
    reset_last_error();
    EXPECT_EQ(mtsarray_get_num_threads(nullptr), MTS_CALLBACK_ERROR);
    EXPECT_NE(last_error().find("count is NULL"), std::string::npos) << last_error();
    ASSERT_EQ(mtsarray_set_num_threads(initial), MTS_SUCCESS);
}

TEST(HostThreads, CppInterface) {
    const int32_t initial = mtsarray::num_threads();
    mtsarray::set_num_threads(5);
    EXPECT_EQ(mtsarray::num_threads(), 5);
    EXPECT_THROW(mtsarray::set_num_threads(0), mtsarray::Error);
    EXPECT_EQ(mtsarray::num_threads(), 5);
    mtsarray::set_num_threads(initial);
}

TEST(HostThreads, MoveDataIsBitIdentical) {
    // large plans (several MiB: split), small ones (not split), whole rows
    // (coalesced into long runs), component axes, few long movements (split
    // by bytes), output samples increasing / permuted / written many times
    const std::vector<MoveCase> cases = {
        {{}, 3000, 2500, 64, 80, 2500, Outputs::increasing, false},
        {{}, 3000, 2500, 64, 80, 2500, Outputs::permuted, false},
        {{}, 3000, 2500, 64, 80, 2500, Outputs::duplicated, false},
        {{}, 40000, 40000, 16, 16, 40000, Outputs::increasing, true},
        {{}, 40000, 40000, 16, 16, 40000, Outputs::permuted, true},
        {{3}, 2000, 1500, 40, 100, 1500, Outputs::permuted, false},
        {{2, 3}, 500, 700, 48, 48, 600, Outputs::increasing, true},
        {{}, 8, 6, 200000, 250000, 6, Outputs::increasing, false},  // few movements of ~1.6 MB
        {{}, 4, 3, 300000, 300000, 3, Outputs::permuted, true},
        {{}, 30000, 25000, 64, 64, 20000, Outputs::in_order, true},   // one contiguous block
        {{3}, 9000, 8000, 40, 100, 7000, Outputs::in_order, false},   // one strided run
        {{}, 50, 40, 7, 9, 20, Outputs::in_order, false},            // one small run
        {{}, 50, 40, 7, 9, 30, Outputs::permuted, false},  // small: never split
        {{}, 50, 40, 7, 9, 0, Outputs::increasing, false},  // no movement
        {{0}, 50, 40, 7, 9, 30, Outputs::permuted, false},  // an empty component axis
    };
    uint64_t seed = 1;
    for (const auto& dtype : one_dtype_per_size()) {
        for (const auto& c : cases) {
            SCOPED_TRACE(dtype.name);
            // large cases with the two widest types only, to keep the test short
            size_t payload = c.movements * std::min(c.properties_in, c.properties_out) * element_size(dtype.dtype);
            if (payload > (size_t(8) << 20) && element_size(dtype.dtype) < 8) {
                continue;
            }
            check_move_case(dtype, c, seed++, /*misalignment=*/0);
            if (HasFatalFailure()) {
                return;
            }
        }
    }
}

TEST(HostThreads, MoveDataOnMisalignedMemory) {
    const MoveCase c = {{}, 3000, 2500, 64, 80, 2500, Outputs::permuted, false};
    for (const auto& dtype : one_dtype_per_size()) {
        SCOPED_TRACE(dtype.name);
        check_move_case(dtype, c, 77, /*misalignment=*/3);
        ASSERT_FALSE(HasFatalFailure());
    }
}

TEST(HostThreads, MoveDataErrorsComeFirstWithAnyThreadCount) {
    // one bad movement (first, in the middle, last): nothing may be written,
    // however the check (from 4096 movements: in parts on the pool) and the
    // copy would have been split, and the error names the first bad one
    for (const uintptr_t samples : {uintptr_t(4000), uintptr_t(10000)}) {
        const std::vector<uintptr_t> shape = {samples, 16};
        std::mt19937_64 rng(5);
        const auto bytes = random_bytes(rng, product(shape) * 8);
        auto input = array_from_bytes(cpu, float64(), shape, bytes);
        auto output = array_from_bytes(cpu, float64(), shape, bytes);
        const auto before = read_bytes(output);
        for (const uintptr_t bad : {uintptr_t(0), samples / 2 + 1, samples - 1}) {
            for (const bool in_order : {false, true}) {
                std::vector<mts_data_movement_t> movements;
                for (uintptr_t s = 0; s < samples; s++) {
                    movements.push_back({in_order ? s : samples - 1 - s, s, 0, 0, 16});
                }
                movements[bad].sample_in = samples;
                movements.back().properties_length = 17;  // a second bad movement (or the same one)
                const std::string expected =
                    "movement " + std::to_string(bad) + ": sample_in = " + std::to_string(samples);
                for (int32_t threads : thread_counts) {
                    SCOPED_TRACE("samples " + std::to_string(samples) + ", bad " + std::to_string(bad) + ", threads " +
                                 std::to_string(threads) + (in_order ? ", in order" : ", reversed"));
                    ThreadCount count(threads);
                    const auto& out = output.get();
                    EXPECT_EQ(out.move_data(out.ptr, input.get().ptr, movements.data(), movements.size()),
                              MTS_CALLBACK_ERROR);
                    EXPECT_NE(last_error().find(expected), std::string::npos) << last_error();
                    EXPECT_EQ(read_bytes(output), before);
                }
            }
        }
    }
}

// ---- copy and create ----------------------------------------------------------

TEST(HostThreads, CopyIsBitIdentical) {
    std::mt19937_64 rng(2);
    for (const auto& dtype : one_dtype_per_size()) {
        const size_t element = element_size(dtype.dtype);
        for (const std::vector<uintptr_t>& shape :
             {std::vector<uintptr_t>{}, {0}, {1}, {17, 3}, {(size_t(1) << 20) / element}, {(size_t(5) << 20) / element + 3}}) {
            SCOPED_TRACE(std::string(dtype.name) + " " + std::to_string(product(shape)) + " elements");
            const auto bytes = random_bytes(rng, product(shape) * element);
            for (size_t misalignment : {size_t(0), size_t(1)}) {
                Misaligned memory(bytes, misalignment);
                auto source = mtsarray::Array::wrap(memory.data(), cpu, dtype.dtype, shape);
                expect_same_bytes_on_every_thread_count(bytes, [&] { return read_bytes(source.copy(cpu)); }, "copy");
                ASSERT_FALSE(HasFatalFailure());
            }
        }
    }
}

TEST(HostThreads, CreateIsBitIdentical) {
    std::mt19937_64 rng(3);
    for (const auto& dtype : one_dtype_per_size()) {
        const size_t element = element_size(dtype.dtype);
        // zero (memset), one byte repeated (memset), any bytes
        std::vector<std::vector<uint8_t>> values = {std::vector<uint8_t>(element, 0),
                                                    std::vector<uint8_t>(element, 0xA5), random_bytes(rng, element)};
        for (const auto& value : values) {
            for (const std::vector<uintptr_t>& shape :
                 {std::vector<uintptr_t>{}, {0}, {0, 5}, {3}, {7, 5}, {(size_t(3) << 20) / element + 5},
                  {1000, (size_t(2) << 10) / element + 1}}) {
                SCOPED_TRACE(std::string(dtype.name) + " " + std::to_string(product(shape)) + " elements");
                const auto expected = repeat(value, product(shape));
                // the create callback, with a fill value of another library
                auto prototype = mtsarray::Array::zeros(cpu, dtype.dtype, {1});
                auto created = [&] {
                    int destroyed = 0;
                    auto fill = ForeignArray::make(dtype.dtype, {}, value, &destroyed);
                    const auto& p = prototype.get();
                    mts_array_t result = {};
                    EXPECT_EQ(p.create(p.ptr, shape.data(), shape.size(), fill, &result), MTS_SUCCESS) << last_error();
                    return read_bytes(mtsarray::Array(result));
                };
                expect_same_bytes_on_every_thread_count(expected, created, "create");
                // mtsarray_full
                auto full = [&] {
                    mts_array_t result = {};
                    EXPECT_EQ(mtsarray_full(cpu, dtype.dtype, shape.data(), shape.size(), value.data(), &result),
                              MTS_SUCCESS)
                        << last_error();
                    return read_bytes(mtsarray::Array(result));
                };
                expect_same_bytes_on_every_thread_count(expected, full, "mtsarray_full");
                ASSERT_FALSE(HasFatalFailure());
            }
        }
    }
}

// ---- swap_axes and strided imports ----------------------------------------------

namespace {

// The bytes of a C-contiguous array of `shape` after swapping two axes.
std::vector<uint8_t> reference_swap(const std::vector<uint8_t>& bytes, const std::vector<uintptr_t>& shape,
                                    size_t axis_1, size_t axis_2, size_t element) {
    auto swapped = shape;
    std::swap(swapped[axis_1], swapped[axis_2]);
    std::vector<uint8_t> result(bytes.size());
    std::vector<uintptr_t> index(shape.size(), 0);
    const size_t count = product(shape);
    for (size_t i = 0; i < count; i++) {
        auto target = index;
        std::swap(target[axis_1], target[axis_2]);
        size_t linear = 0;
        for (size_t axis = 0; axis < shape.size(); axis++) {
            linear = linear * swapped[axis] + target[axis];
        }
        std::memcpy(result.data() + linear * element, bytes.data() + i * element, element);
        for (size_t axis = shape.size(); axis-- > 0;) {
            if (++index[axis] < shape[axis]) {
                break;
            }
            index[axis] = 0;
        }
    }
    return result;
}

struct SwapCase {
    std::vector<uintptr_t> shape;
    size_t axis_1;
    size_t axis_2;
};

}  // namespace

TEST(HostThreads, SwapAxesIsBitIdentical) {
    const std::vector<SwapCase> cases = {
        {{700, 900}, 0, 1},           // a transpose, several MiB for 8-byte elements
        {{1203, 517}, 1, 0},          // sizes that are not multiples of any tile
        {{20833, 3, 16}, 1, 2},       // many small transposes
        {{30, 200, 50, 4}, 0, 2},     // the innermost axis stays: whole runs
        {{64, 3, 5000}, 0, 1},        // long runs
        {{9, 1, 13, 1, 2000}, 1, 3},  // size-1 axes only: a reshape
        {{300, 1, 2000}, 0, 2},
        {{0, 4, 5}, 0, 2},            // empty
        {{5, 7}, 0, 1},               // small: never split
    };
    std::mt19937_64 rng(4);
    for (const auto& dtype : one_dtype_per_size()) {
        const size_t element = element_size(dtype.dtype);
        for (const auto& c : cases) {
            if (product(c.shape) * element > (size_t(8) << 20) && element > 4) {
                continue;  // the largest cases with the narrow types only, to keep the test short
            }
            SCOPED_TRACE(std::string(dtype.name) + " swap " + std::to_string(c.axis_1) + "<->" +
                         std::to_string(c.axis_2) + " of " + std::to_string(c.shape.size()) + "-d array with " +
                         std::to_string(product(c.shape)) + " elements");
            const auto bytes = random_bytes(rng, product(c.shape) * element);
            const auto expected = reference_swap(bytes, c.shape, c.axis_1, c.axis_2, element);
            auto swap = [&] {
                auto array = array_from_bytes(cpu, dtype.dtype, c.shape, bytes);
                const auto& a = array.get();
                EXPECT_EQ(a.swap_axes(a.ptr, c.axis_1, c.axis_2), MTS_SUCCESS) << last_error();
                return read_bytes(array);
            };
            expect_same_bytes_on_every_thread_count(expected, swap, "swap_axes");
            ASSERT_FALSE(HasFatalFailure());
        }
    }
}

namespace {

// A DLPack tensor over `memory` (owned by the caller) with the given shape
// and strides in elements; its deleter frees only itself.
DLManagedTensorVersioned* strided_tensor(void* memory, DLDataType dtype, std::vector<int64_t> shape,
                                         std::vector<int64_t> strides) {
    struct Owned {
        DLManagedTensorVersioned tensor;
        std::vector<int64_t> shape;
        std::vector<int64_t> strides;
    };
    auto* owned = new Owned{{}, std::move(shape), std::move(strides)};
    auto& tensor = owned->tensor;
    tensor.version = dlpack_version();
    tensor.manager_ctx = owned;
    tensor.deleter = [](DLManagedTensorVersioned* self) { delete static_cast<Owned*>(self->manager_ctx); };
    tensor.dl_tensor.data = memory;
    tensor.dl_tensor.device = cpu;
    tensor.dl_tensor.ndim = static_cast<int32_t>(owned->shape.size());
    tensor.dl_tensor.dtype = dtype;
    tensor.dl_tensor.shape = owned->shape.data();
    tensor.dl_tensor.strides = owned->strides.data();
    tensor.dl_tensor.byte_offset = 0;
    return &tensor;
}

}  // namespace

TEST(HostThreads, StridedImportIsBitIdentical) {
    // every other row of a matrix, read backwards, and every third column:
    // a copy through the strided path, on several threads when large
    const int64_t rows = 1600;
    const int64_t columns = 1500;
    std::mt19937_64 rng(6);
    for (const auto& dtype : one_dtype_per_size()) {
        const size_t element = element_size(dtype.dtype);
        auto bytes = random_bytes(rng, static_cast<size_t>(rows * columns) * element);
        const int64_t out_rows = rows / 2;
        const int64_t out_columns = columns / 3;
        std::vector<uint8_t> expected(static_cast<size_t>(out_rows * out_columns) * element);
        for (int64_t r = 0; r < out_rows; r++) {
            for (int64_t c = 0; c < out_columns; c++) {
                const int64_t source_row = rows - 1 - 2 * r;
                std::memcpy(expected.data() + static_cast<size_t>(r * out_columns + c) * element,
                            bytes.data() + static_cast<size_t>(source_row * columns + 3 * c) * element, element);
            }
        }
        auto import = [&] {
            void* last_row = bytes.data() + static_cast<size_t>((rows - 1) * columns) * element;
            auto* tensor = strided_tensor(last_row, dtype.dtype, {out_rows, out_columns}, {-2 * columns, 3});
            mts_array_t array = {};
            EXPECT_EQ(mtsarray_from_dlpack(tensor, &array), MTS_SUCCESS) << last_error();
            return read_bytes(mtsarray::Array(array));
        };
        SCOPED_TRACE(dtype.name);
        expect_same_bytes_on_every_thread_count(expected, import, "from_dlpack (strided)");
        ASSERT_FALSE(HasFatalFailure());
    }
}

// ---- an invalid count in the environment --------------------------------------
//
// MTSARRAY_NUM_THREADS is read once per process: this test runs in a process
// of its own with MTSARRAY_NUM_THREADS=lots (tests/CMakeLists.txt), and skips
// in the other runs. Every host data operation then fails, whatever
// its size, with the variable named; reading and wrapping memory still work.

namespace {

const std::string invalid_count = "MTSARRAY_NUM_THREADS='lots' is not a whole number";

/// `status` is an error whose message is "<function>: <invalid_count>...".
::testing::AssertionResult fails_for_the_count(mts_status_t status, const std::string& function) {
    if (status == MTS_SUCCESS) {
        return ::testing::AssertionFailure() << function << " succeeded";
    }
    const std::string message = last_error();
    if (message.rfind(function + ": " + invalid_count, 0) != 0) {
        return ::testing::AssertionFailure() << function << " failed with: " << message;
    }
    return ::testing::AssertionSuccess();
}

/// Host memory wrapped (mtsarray_wrap is no data operation), kept alive
/// with the array.
struct WrappedDoubles {
    explicit WrappedDoubles(const std::vector<uintptr_t>& shape, double value = 0.0)
        : values(product(shape), value),
          array(mtsarray::Array::wrap(values.empty() ? nullptr : values.data(), cpu, float64(), shape)) {}
    std::vector<double> values;
    mtsarray::Array array;
};

}  // namespace

TEST(InvalidThreadCountEnvironment, EveryHostDataOperationFailsWhateverItsSize) {
    const char* setting = std::getenv("MTSARRAY_NUM_THREADS");
    if (setting == nullptr || std::string(setting) != "lots") {
        GTEST_SKIP() << "runs in a process of its own with MTSARRAY_NUM_THREADS=lots (ctest: ...in_its_own_process)";
    }
    int32_t count = 0;
    EXPECT_TRUE(fails_for_the_count(mtsarray_get_num_threads(&count), "mtsarray_get_num_threads"));

    // fills
    for (uintptr_t size : {uintptr_t(0), uintptr_t(5)}) {
        const uintptr_t shape[] = {size};
        const double value = 2.0;
        mts_array_t made = {};
        EXPECT_TRUE(fails_for_the_count(mtsarray_zeros(cpu, float64(), shape, 1, &made), "mtsarray_zeros"));
        EXPECT_TRUE(fails_for_the_count(mtsarray_full(cpu, float64(), shape, 1, &value, &made), "mtsarray_full"));
        EXPECT_EQ(made.ptr, nullptr);
    }
    WrappedDoubles prototype({2, 3}, 1.0);
    const auto& raw = prototype.array.get();
    WrappedDoubles fill({}, 7.0);
    const uintptr_t empty_shape[] = {0};
    mts_array_t made = {};
    EXPECT_TRUE(fails_for_the_count(raw.create(raw.ptr, empty_shape, 1, std::move(fill.array).release(), &made),
                                    "mtsarray: create (float64 array of shape [2, 3] on cpu)"));

    // copies, of any size
    EXPECT_TRUE(fails_for_the_count(raw.copy(raw.ptr, cpu, &made),
                                    "mtsarray: copy (float64 array of shape [2, 3] on cpu)"));
    EXPECT_EQ(made.ptr, nullptr);
    for (uintptr_t samples : {uintptr_t(0), uintptr_t(2)}) {
        WrappedDoubles destination({samples, 3}, 0.0);
        WrappedDoubles source({samples, 3}, 5.0);
        EXPECT_TRUE(fails_for_the_count(mtsarray_copy_into(&destination.array.get(), &source.array.get()),
                                        "mtsarray_copy_into"));
        EXPECT_EQ(destination.values, std::vector<double>(samples * 3, 0.0));
    }

    // move_data and plans: no movement, one run, scattered movements (no
    // plan can be made meanwhile, so none is there to execute)
    WrappedDoubles output({4, 3}, 0.0);
    WrappedDoubles input({4, 3}, 3.0);
    const std::vector<std::vector<mts_data_movement_t>> lists = {
        {},
        {{0, 0, 0, 0, 3}, {1, 1, 0, 0, 3}},
        {{3, 0, 0, 0, 3}, {0, 2, 1, 1, 2}, {2, 1, 0, 0, 1}},
    };
    const auto& out = output.array.get();
    for (const auto& movements : lists) {
        SCOPED_TRACE(std::to_string(movements.size()) + " movements");
        EXPECT_TRUE(fails_for_the_count(out.move_data(out.ptr, input.array.get().ptr, movements.data(),
                                                      movements.size()),
                                        "mtsarray: move_data (float64 array of shape [4, 3] on cpu)"));
        mtsarray_move_plan_t* plan = nullptr;
        EXPECT_TRUE(fails_for_the_count(mtsarray_move_plan_create(&out, &input.array.get(), movements.data(),
                                                                  movements.size(), &plan),
                                        "mtsarray_move_plan_create"));
        EXPECT_EQ(plan, nullptr);
    }
    EXPECT_EQ(output.values, std::vector<double>(12, 0.0));

    // swap_axes, which writes a transposed copy
    auto& mutable_raw = const_cast<mts_array_t&>(raw);
    EXPECT_TRUE(fails_for_the_count(mutable_raw.swap_axes(mutable_raw.ptr, 0, 1),
                                    "mtsarray: swap_axes (float64 array of shape [2, 3] on cpu)"));

    // a strided import copies; a contiguous one and an export do not
    std::vector<double> storage(6, 4.0);
    mts_array_t imported = {};
    auto* strided = strided_tensor(storage.data(), float64(), {3}, {2});
    EXPECT_TRUE(fails_for_the_count(mtsarray_from_dlpack(strided, &imported), "mtsarray_from_dlpack"));
    auto* contiguous = strided_tensor(storage.data(), float64(), {6}, {1});
    ASSERT_EQ(mtsarray_from_dlpack(contiguous, &imported), MTS_SUCCESS) << last_error();
    EXPECT_EQ(read_bytes(mtsarray::Array(imported)), to_bytes(storage));
    EXPECT_EQ(read_bytes(prototype.array), to_bytes(std::vector<double>(6, 1.0)));

    // the count set by the program replaces the environment's
    ASSERT_EQ(mtsarray_set_num_threads(2), MTS_SUCCESS) << last_error();
    WrappedDoubles destination({0, 3});
    WrappedDoubles source({0, 3});
    EXPECT_EQ(mtsarray_copy_into(&destination.array.get(), &source.array.get()), MTS_SUCCESS) << last_error();
    EXPECT_EQ(from_bytes<double>(read_bytes(mtsarray::Array::full<double>(cpu, {2}, 3.0))),
              (std::vector<double>{3.0, 3.0}));
}
