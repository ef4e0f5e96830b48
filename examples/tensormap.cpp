// tensormap.cpp: a per-species descriptor as a metatensor TensorMap whose
// arrays are mtsarray arrays, built from C++ with metatensor.hpp and
// mtsarray.hpp.
//
// Two blocks (keys: center_type = 1 for H, 8 for O) hold a 4-feature
// descriptor for the atoms of one water dimer. keys_to_properties merges them
// into one block over all atoms: libmetatensor creates the merged array with
// mtsarray's `create` (missing entries get the fill value) and fills it with
// mtsarray's `move_data`, on the arrays' device. keys_to_samples stacks them.
// Every value is checked; the program exits with status 1 if one is wrong.
//
// Usage: tensormap [--device cpu|cuda|rocm|auto]   (default: cpu)
//   auto picks CUDA, then ROCm, when mtsarray can use one, else the CPU.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <metatensor.hpp>
#include <mtsarray.hpp>

namespace {

constexpr DLDevice CPU = {kDLCPU, 0};
constexpr DLDataType FLOAT64 = {kDLFloat, 64, 1};
constexpr DLDataType INT32 = {kDLInt, 32, 1};
constexpr double FILL = -1.0;
constexpr size_t N_FEATURES = 4;

// The water dimer: atom i has type TYPES[i].
const std::vector<int32_t> TYPES = {8, 1, 1, 8, 1, 1};

// What the descriptor of `atom` holds in feature `n` (made up, but unique).
double feature(int32_t atom, int32_t n) {
    return 100.0 * atom + n;
}

DLDevice pick_device(const std::string& name) {
    if (name == "cpu") {
        return CPU;
    }
    if (name == "cuda" || (name == "auto" && mtsarray::backend_available(kDLCUDA))) {
        return {kDLCUDA, 0};
    }
    if (name == "rocm" || (name == "auto" && mtsarray::backend_available(kDLROCM))) {
        return {kDLROCM, 0};
    }
    if (name == "auto") {
        return CPU;
    }
    throw std::invalid_argument("unknown device '" + name + "', use cpu, cuda, rocm or auto");
}

// `host` itself on the CPU, else a deep copy of it on `device`.
metatensor::MtsArray on_device(mtsarray::Array host, DLDevice device) {
    if (device.device_type == kDLCPU) {
        return std::move(host).into_metatensor();
    }
    return host.copy(device).into_metatensor();
}

// Labels with `names` and `values` (row-major, names.size() per entry); the
// values live on `device`, like the block values they describe.
metatensor::Labels make_labels(const std::vector<std::string>& names,
                               const std::vector<int32_t>& values, DLDevice device) {
    const uintptr_t count = values.size() / names.size();
    auto host = mtsarray::Array::zeros(CPU, INT32, {count, names.size()});
    if (!values.empty()) {
        std::memcpy(host.data(), values.data(), values.size() * sizeof(int32_t));
    }
    return metatensor::Labels(names, on_device(std::move(host), device));
}

// TensorBlock takes a DataArrayBase; an mts_array_t goes through the C API.
metatensor::TensorBlock make_block(metatensor::MtsArray values, const metatensor::Labels& samples,
                                   const metatensor::Labels& properties) {
    auto* block = mts_block(std::move(values).release(), samples.as_mts_labels_t(), nullptr, 0,
                            properties.as_mts_labels_t());
    metatensor::details::check_pointer(block);
    return metatensor::TensorBlock::unsafe_from_ptr(block);
}

// The block of atoms of type `type`: samples (system, atom), properties n.
metatensor::TensorBlock descriptor_block(int32_t type, DLDevice device) {
    std::vector<int32_t> samples;
    std::vector<double> values;
    for (int32_t atom = 0; atom < static_cast<int32_t>(TYPES.size()); atom++) {
        if (TYPES[atom] != type) {
            continue;
        }
        samples.insert(samples.end(), {0, atom});
        for (int32_t n = 0; n < static_cast<int32_t>(N_FEATURES); n++) {
            values.push_back(feature(atom, n));
        }
    }
    const uintptr_t n_samples = samples.size() / 2;
    auto host = mtsarray::Array::zeros(CPU, FLOAT64, {n_samples, N_FEATURES});
    std::memcpy(host.data(), values.data(), values.size() * sizeof(double));

    std::vector<int32_t> features;
    for (int32_t n = 0; n < static_cast<int32_t>(N_FEATURES); n++) {
        features.push_back(n);
    }
    return make_block(on_device(std::move(host), device),
                      make_labels({"system", "atom"}, samples, device),
                      make_labels({"n"}, features, device));
}

int n_errors = 0;

void expect(double actual, double expected, const char* what, int32_t atom, int32_t column) {
    if (actual != expected && !(std::isnan(actual) && std::isnan(expected))) {
        std::fprintf(stderr, "WRONG VALUE: %s, atom %d column %d: %g, expected %g\n", what, atom,
                     column, actual, expected);
        n_errors++;
    }
}

// Checks a merged block: one row per sample (system, atom); property columns
// named by `property_names`, of which the first may be center_type.
void check_block(metatensor::TensorBlock& block, const char* what) {
    const auto sample_labels = block.samples();
    const auto properties = block.properties();
    // const: NDArray views of labels are read-only
    const auto samples = sample_labels.values_cpu();
    const auto property_values = properties.values_cpu();
    const auto names = properties.names();
    const bool has_type_column = std::string(names[0]) == "center_type";
    const auto sample_names = sample_labels.names();

    auto values = block.values<double>(CPU);  // copied to the host if needed
    if (values.shape().size() != 2 || values.shape()[0] != sample_labels.count() ||
        values.shape()[1] != properties.count()) {
        std::fprintf(stderr, "WRONG: %s has an unexpected shape\n", what);
        n_errors++;
        return;
    }
    // keys_to_samples adds center_type as the first sample dimension.
    const size_t atom_column = std::string(sample_names[0]) == "center_type" ? 2 : 1;
    for (size_t row = 0; row < values.shape()[0]; row++) {
        const int32_t atom = samples(row, atom_column);
        for (size_t column = 0; column < values.shape()[1]; column++) {
            const int32_t n = property_values(column, has_type_column ? 1 : 0);
            double expected = feature(atom, n);
            if (has_type_column && property_values(column, 0) != TYPES[atom]) {
                expected = FILL;  // this atom has no entry in that block
            }
            expect(values(row, column), expected, what, atom, static_cast<int32_t>(column));
        }
    }
    std::printf("%s: %zu samples x %zu properties, values checked\n", what, values.shape()[0],
                values.shape()[1]);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string device_name = "cpu";
        for (int i = 1; i < argc; i++) {
            if (std::string(argv[i]) == "--device" && i + 1 < argc) {
                device_name = argv[++i];
            } else {
                std::fprintf(stderr, "usage: %s [--device cpu|cuda|rocm|auto]\n", argv[0]);
                return 2;
            }
        }
        const DLDevice device = pick_device(device_name);
        std::printf("mtsarray %s: arrays on %s:%d\n", mtsarray_version(),
                    device.device_type == kDLCPU ? "cpu"
                    : device.device_type == kDLCUDA ? "cuda" : "rocm",
                    device.device_id);

        std::vector<metatensor::TensorBlock> blocks;
        blocks.push_back(descriptor_block(1, device));
        blocks.push_back(descriptor_block(8, device));
        auto keys = make_labels({"center_type"}, {1, 8}, device);
        auto tensor = metatensor::TensorMap(std::move(keys), std::move(blocks));

        // Merge the species along properties: a (6 atoms, 2 x 4) block where
        // the columns of the other species hold FILL.
        auto fill = mtsarray::Array::full(CPU, {}, FILL);  // a 0-d double
        auto by_properties = tensor.keys_to_properties(
            metatensor::Labels({"center_type"}), std::move(fill).into_metatensor(), true);
        auto merged = by_properties.block_by_id(0);
        check_block(merged, "keys_to_properties");

        // Stack the species along samples: (6 atoms, 4), no fill needed.
        auto zero = mtsarray::Array::zeros(CPU, FLOAT64, {});
        auto by_samples = tensor.keys_to_samples(metatensor::Labels({"center_type"}),
                                                 std::move(zero).into_metatensor(), true);
        auto stacked = by_samples.block_by_id(0);
        check_block(stacked, "keys_to_samples");

        // The merged arrays are mtsarray arrays, on the same device.
        auto merged_array = merged.mts_array();
        auto raw = merged_array.as_mts_array_t();
        bool is_ours = false;
        metatensor::details::check_status(mtsarray_is_mtsarray(&raw, &is_ours));
        if (!is_ours || merged_array.device().device_type != device.device_type) {
            std::fprintf(stderr, "WRONG: the merged array is not an mtsarray array on %s\n",
                         device_name.c_str());
            n_errors++;
        }
    } catch (const std::exception& error) {
        std::fprintf(stderr, "tensormap: error: %s\n", error.what());
        return 1;
    }

    if (n_errors != 0) {
        std::fprintf(stderr, "tensormap: %d wrong value(s)\n", n_errors);
        return 1;
    }
    std::printf("tensormap: ok\n");
    return 0;
}
