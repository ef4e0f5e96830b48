// quick_start.cpp: the C++ API (mtsarray.hpp) in four steps. Arrays that
// own themselves, a movement plan checked once and executed every step, a
// TensorBlock made of mtsarray arrays, and errors as exceptions. Every value
// is checked; the program exits with status 1 if one is wrong.
//
// Usage: quick_start_cpp [--device cpu|auto]   (default: cpu)
//   auto picks CUDA, then ROCm, when mtsarray can use one, else the CPU.
#include <cstdio>
#include <cstring>
#include <vector>

#include <metatensor.hpp>
#include <mtsarray.hpp>

namespace {

DLDevice pick_device(int argc, char** argv) {
    if (argc == 3 && std::strcmp(argv[1], "--device") == 0 && std::strcmp(argv[2], "auto") == 0) {
        if (mtsarray::backend_available(kDLCUDA)) {
            return mtsarray::cuda();
        }
        if (mtsarray::backend_available(kDLROCM)) {
            return mtsarray::rocm();
        }
    }
    return mtsarray::cpu();
}

// The values of `array`, read on the host (copy_from into a host array waits
// for the copy).
std::vector<double> values_of(const mtsarray::Array& array) {
    auto shape = array.shape();
    std::vector<double> values(shape[0] * shape[1]);
    auto host = mtsarray::Array::wrap(values.data(), mtsarray::cpu(), mtsarray::dtype_of<double>(), shape);
    host.copy_from(array);
    return values;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        // [step 1]
        // 1. Arrays own their data and are destroyed with the object.
        const DLDevice device = pick_device(argc, argv);
        auto source = mtsarray::Array::full(device, {100, 8}, 2.5);  // 100 atoms x 8 features
        auto batch = mtsarray::Array::zeros(device, mtsarray::dtype_of<double>(), {4, 8});
        // [step 1]

        // [step 2]
        // 2. A movement plan: the movements are checked once, then every
        //    execute() is one copy queued on the batch's stream.
        std::vector<mts_data_movement_t> movements;
        for (uintptr_t row = 0; row < 4; row++) {
            movements.push_back({/*sample_in=*/10 * row, /*sample_out=*/row, 0, 0, /*properties_length=*/8});
        }
        const mtsarray::MovePlan gather(batch, source, movements);
        for (int step = 0; step < 3; step++) {
            gather.execute(batch, source);
        }
        for (double value : values_of(batch)) {
            if (value != 2.5) {
                std::fprintf(stderr, "WRONG VALUE: %g, expected 2.5\n", value);
                return 1;
            }
        }
        // [step 2]

        // [step 3]
        // 3. Hand an array to metatensor: the block owns it from here on.
        auto atoms = metatensor::Labels({"atom"}, {{0}, {1}, {2}, {3}});
        auto features = metatensor::Labels({"feature"}, {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}});
        auto block = mtsarray::make_block(std::move(batch), atoms, {}, features);
        std::printf("a block of %zu atoms x %zu features\n", block.samples().count(), block.properties().count());
        // [step 3]

        // [step 4]
        // 4. Errors are exceptions (mtsarray::Error, a metatensor::Error),
        //    and the arrays are left as they were.
        try {
            auto wrong = mtsarray::Array::zeros(device, mtsarray::dtype_of<float>(), {4, 8});
            wrong.copy_from(source);  // another dtype and shape
            std::fprintf(stderr, "copy_from accepted another dtype\n");
            return 1;
        } catch (const mtsarray::Error& error) {
            std::printf("as expected: %s\n", error.what());
        }
        // [step 4]
    } catch (const metatensor::Error& error) {
        std::fprintf(stderr, "quick_start_cpp failed: %s\n", error.what());
        return 1;
    }
    std::printf("quick_start_cpp: every value is right\n");
    return 0;
}
