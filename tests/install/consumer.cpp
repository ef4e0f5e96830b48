// Installed-package check, in C++: mtsarray::Array through metatensor.hpp,
// as the values of a TensorBlock; prints "ok", exit status 1 on error.
#include <cstdio>
#include <exception>

#include <metatensor.hpp>
#include <mtsarray.hpp>

int main() {
    try {
        auto values = mtsarray::Array::full(mtsarray::cpu(), {2, 3}, 1.25);
        auto* data = static_cast<const double*>(values.data());
        for (int i = 0; i < 6; i++) {
            if (data[i] != 1.25) {
                std::fprintf(stderr, "consumer-cxx: element %d is %g\n", i, data[i]);
                return 1;
            }
        }
        auto samples = metatensor::Labels({"sample"}, {{0}, {1}});
        auto properties = metatensor::Labels({"property"}, {{0}, {1}, {2}});
        auto* block = mts_block(std::move(values).release(), samples.as_mts_labels_t(), nullptr, 0,
                                properties.as_mts_labels_t());
        metatensor::details::check_pointer(block);
        auto tensor_block = metatensor::TensorBlock::unsafe_from_ptr(block);
        auto read_back = tensor_block.values<double>();
        if (read_back.shape().size() != 2 || read_back(1, 2) != 1.25) {
            std::fprintf(stderr, "consumer-cxx: wrong values in the block\n");
            return 1;
        }
    } catch (const std::exception& error) {
        std::fprintf(stderr, "consumer-cxx: error: %s\n", error.what());
        return 1;
    }
    std::printf("consumer-cxx: ok\n");
    return 0;
}
