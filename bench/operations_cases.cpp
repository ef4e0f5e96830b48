// libmetatensor's own operations -- keys_to_properties, keys_to_samples,
// components_to_properties -- on TensorMaps of realistic shape whose arrays
// (values and labels) are mtsarray arrays, on the CPU and on a CUDA GPU when
// one is usable, against the same TensorMaps of metatensor::SimpleDataArray,
// libmetatensor's own host array. Every result is read back and compared,
// value by value, with the SimpleDataArray one.
//
// Beside the time, each row gives the share of it spent inside mtsarray's
// callbacks (create, move_data, the labels' as_dlpack, destroy, ...): the
// same operation runs on the same arrays seen through TimedArray, a vtable
// that forwards every callback to the mtsarray array and adds up the time
// the callback took. What is left is libmetatensor's own work (labels,
// merging, bookkeeping), which is not ours to change.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "cases.hpp"

namespace bench {
namespace {

// ---- TimedArray: an mtsarray array seen through a timing vtable ---------------------

/// Nanoseconds spent inside the callbacks of the wrapped arrays (outermost
/// calls only: a callback that reads another wrapped array through its
/// vtable, such as create reading its fill value, is counted once).
std::atomic<int64_t> callback_nanoseconds{0};
thread_local int callback_depth = 0;

class CallbackTimer {
public:
    CallbackTimer() : start_(callback_depth++ == 0 ? std::chrono::steady_clock::now() : Clock::time_point()) {}
    ~CallbackTimer() {
        if (--callback_depth == 0) {
            const auto elapsed = std::chrono::steady_clock::now() - start_;
            callback_nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count();
        }
    }
    CallbackTimer(const CallbackTimer&) = delete;
    CallbackTimer& operator=(const CallbackTimer&) = delete;

private:
    using Clock = std::chrono::steady_clock;
    Clock::time_point start_;
};

mts_array_t timed(mts_array_t inner);

const mts_array_t& inner_of(const void* array) {
    return *static_cast<const mts_array_t*>(array);
}
mts_array_t& inner_of(void* array) {
    return *static_cast<mts_array_t*>(array);
}

/// The array a new_array out-parameter received, wrapped in its turn
/// (left alone when the callback failed).
mts_status_t wrap_result(mts_status_t status, mts_array_t* new_array) {
    if (status == MTS_SUCCESS) {
        *new_array = timed(*new_array);
    }
    return status;
}

mts_array_t timed(mts_array_t inner) {
    mts_array_t array = {};
    array.ptr = new mts_array_t(inner);
    array.destroy = [](void* self) {
        auto* wrapped = static_cast<mts_array_t*>(self);
        {
            CallbackTimer timer;
            wrapped->destroy(wrapped->ptr);
        }
        delete wrapped;
    };
    array.origin = [](const void* self, mts_data_origin_t* origin) {
        CallbackTimer timer;
        return inner_of(self).origin(inner_of(self).ptr, origin);
    };
    array.device = [](const void* self, DLDevice* device) {
        CallbackTimer timer;
        return inner_of(self).device(inner_of(self).ptr, device);
    };
    array.dtype = [](const void* self, DLDataType* dtype) {
        CallbackTimer timer;
        return inner_of(self).dtype(inner_of(self).ptr, dtype);
    };
    array.as_dlpack = [](void* self, DLManagedTensorVersioned** tensor, DLDevice device, const int64_t* stream,
                         DLPackVersion version) {
        CallbackTimer timer;
        return inner_of(self).as_dlpack(inner_of(self).ptr, tensor, device, stream, version);
    };
    array.from_dlpack = [](const void* self, DLManagedTensorVersioned* tensor, mts_array_t* new_array) {
        CallbackTimer timer;
        return wrap_result(inner_of(self).from_dlpack(inner_of(self).ptr, tensor, new_array), new_array);
    };
    array.shape = [](const void* self, const uintptr_t** shape, uintptr_t* count) {
        CallbackTimer timer;
        return inner_of(self).shape(inner_of(self).ptr, shape, count);
    };
    array.reshape = [](void* self, const uintptr_t* shape, uintptr_t count) {
        CallbackTimer timer;
        return inner_of(self).reshape(inner_of(self).ptr, shape, count);
    };
    array.swap_axes = [](void* self, uintptr_t axis_1, uintptr_t axis_2) {
        CallbackTimer timer;
        return inner_of(self).swap_axes(inner_of(self).ptr, axis_1, axis_2);
    };
    array.create = [](const void* self, const uintptr_t* shape, uintptr_t count, mts_array_t fill,
                      mts_array_t* new_array) {
        CallbackTimer timer;
        return wrap_result(inner_of(self).create(inner_of(self).ptr, shape, count, fill, new_array), new_array);
    };
    array.copy = [](const void* self, DLDevice device, mts_array_t* new_array) {
        CallbackTimer timer;
        return wrap_result(inner_of(self).copy(inner_of(self).ptr, device, new_array), new_array);
    };
    array.move_data = [](void* output, const void* input, const mts_data_movement_t* movements, uintptr_t count) {
        CallbackTimer timer;
        // both sides of a move are arrays of the same kind: libmetatensor
        // creates the output from the input
        return inner_of(output).move_data(inner_of(output).ptr, inner_of(input).ptr, movements, count);
    };
    return array;
}

// ---- TensorMaps of each kind of array -------------------------------------------------

enum class Kind { simple, mtsarray, timed_mtsarray };

struct Arrays {
    Kind kind;
    DLDevice device;  // of mtsarray arrays

    mts_array_t make(DLDataType dtype, const std::vector<uintptr_t>& shape, const void* values) const {
        const size_t count = product(shape);
        if (kind == Kind::simple) {
            if (dtype.code == kDLFloat) {
                std::vector<double> data(static_cast<const double*>(values), static_cast<const double*>(values) + count);
                return metatensor::DataArrayBase::to_mts_array(
                           std::make_unique<metatensor::SimpleDataArray<double>>(shape, std::move(data)))
                    .release();
            }
            std::vector<int32_t> data(static_cast<const int32_t*>(values), static_cast<const int32_t*>(values) + count);
            return metatensor::DataArrayBase::to_mts_array(
                       std::make_unique<metatensor::SimpleDataArray<int32_t>>(shape, std::move(data)))
                .release();
        }
        mts_array_t host;
        check(mtsarray_zeros(DLDevice{kDLCPU, 0}, dtype, shape.data(), shape.size(), &host));
        metatensor::MtsArray owned_host(host);
        if (count != 0) {
            std::memcpy(mtsarray_pointer(owned_host), values, count * (dtype.bits / 8));
        }
        mts_array_t array = std::move(owned_host).release();
        if (device.device_type != kDLCPU) {
            mts_array_t on_device;
            const mts_status_t status = array.copy(array.ptr, device, &on_device);
            array.destroy(array.ptr);
            check(status);
            array = on_device;
        }
        return kind == Kind::timed_mtsarray ? timed(array) : array;
    }
};

struct LabelsFree {
    void operator()(const mts_labels_t* labels) const { mts_labels_free(labels); }
};
using LabelsPointer = std::unique_ptr<const mts_labels_t, LabelsFree>;
struct TensorFree {
    void operator()(mts_tensormap_t* tensor) const { mts_tensormap_free(tensor); }
};
using TensorPointer = std::unique_ptr<mts_tensormap_t, TensorFree>;

LabelsPointer make_labels(const Arrays& arrays, const std::vector<const char*>& names,
                          const std::vector<int32_t>& values) {
    const uintptr_t count = values.size() / names.size();
    const mts_labels_t* labels =
        mts_labels(names.data(), names.size(), arrays.make({kDLInt, 32, 1}, {count, names.size()}, values.data()));
    if (labels == nullptr) {
        check(MTS_INVALID_PARAMETER_ERROR);
    }
    return LabelsPointer(labels);
}

/// The shape of a descriptor: keys (center_type, neighbor_type), samples
/// (system, atom) -- the atoms of the center type, less a few that have no
/// neighbor of that type (holes once merged) --, an optional xyz component,
/// properties n.
struct TensorShape {
    std::string name;
    size_t centers;
    size_t neighbors;
    size_t atoms_per_center;
    size_t components;  // 0: none, else the length of the xyz axis
    size_t properties;
};

bool has_sample(size_t atom, size_t neighbor) {
    return (atom * 7 + neighbor * 3) % 11 != 0;
}

double value_of(size_t block, size_t index) {
    return static_cast<double>(block) * 0.5 + static_cast<double>(index % 100003) * 0.25;
}

TensorPointer make_tensor(const Arrays& arrays, const TensorShape& shape) {
    std::vector<int32_t> keys;
    std::vector<mts_block_t*> blocks;
    for (size_t center = 0; center < shape.centers; center++) {
        for (size_t neighbor = 0; neighbor < shape.neighbors; neighbor++) {
            keys.insert(keys.end(), {static_cast<int32_t>(center), static_cast<int32_t>(neighbor)});
            std::vector<int32_t> samples;
            for (size_t atom = 0; atom < shape.atoms_per_center; atom++) {
                if (has_sample(atom, neighbor)) {
                    samples.insert(samples.end(), {static_cast<int32_t>(atom / 64), static_cast<int32_t>(atom)});
                }
            }
            const uintptr_t count = samples.size() / 2;
            std::vector<uintptr_t> value_shape = {count};
            if (shape.components != 0) {
                value_shape.push_back(shape.components);
            }
            value_shape.push_back(shape.properties);
            std::vector<double> values(product(value_shape));
            for (size_t i = 0; i < values.size(); i++) {
                values[i] = value_of(blocks.size(), i);
            }
            std::vector<int32_t> properties(shape.properties);
            for (size_t p = 0; p < shape.properties; p++) {
                properties[p] = static_cast<int32_t>(p);
            }
            std::vector<int32_t> xyz(shape.components);
            for (size_t c = 0; c < shape.components; c++) {
                xyz[c] = static_cast<int32_t>(c);
            }
            auto sample_labels = make_labels(arrays, {"system", "atom"}, samples);
            auto property_labels = make_labels(arrays, {"n"}, properties);
            LabelsPointer component_labels;
            const mts_labels_t* components[1] = {nullptr};
            if (shape.components != 0) {
                component_labels = make_labels(arrays, {"xyz"}, xyz);
                components[0] = component_labels.get();
            }
            mts_block_t* block =
                mts_block(arrays.make({kDLFloat, 64, 1}, value_shape, values.data()), sample_labels.get(),
                          components, shape.components != 0 ? 1 : 0, property_labels.get());
            if (block == nullptr) {
                check(MTS_INVALID_PARAMETER_ERROR);
            }
            blocks.push_back(block);
        }
    }
    auto key_labels = make_labels(arrays, {"center_type", "neighbor_type"}, keys);
    mts_tensormap_t* tensor = mts_tensormap(key_labels.get(), blocks.data(), blocks.size());
    if (tensor == nullptr) {
        check(MTS_INVALID_PARAMETER_ERROR);
    }
    return TensorPointer(tensor);
}

// ---- the operations ------------------------------------------------------------------

enum class Operation { keys_to_properties, keys_to_samples, components_to_properties };

const char* operation_name(Operation operation) {
    switch (operation) {
    case Operation::keys_to_properties: return "keys_to_properties";
    case Operation::keys_to_samples: return "keys_to_samples";
    case Operation::components_to_properties: return "components_to_properties";
    }
    return "?";
}

/// The operation on `tensor`, whose arrays are those `arrays` makes (the
/// keys to move, and the fill value, are of the same kind).
TensorPointer run_operation(Operation operation, const Arrays& arrays, mts_tensormap_t* tensor) {
    mts_tensormap_t* result = nullptr;
    if (operation == Operation::components_to_properties) {
        const char* dimension = "xyz";
        result = mts_tensormap_components_to_properties(tensor, &dimension, 1);
    } else {
        // the keys to move and the fill value live on the host, whatever
        // the device of the tensor (libmetatensor reads them there)
        const Arrays host = {arrays.kind, {kDLCPU, 0}};
        auto keys_to_move = make_labels(host, {"neighbor_type"}, {});
        const double fill = 0.0;
        mts_array_t fill_value = host.make({kDLFloat, 64, 1}, {}, &fill);
        result = operation == Operation::keys_to_properties
                     ? mts_tensormap_keys_to_properties(tensor, keys_to_move.get(), fill_value, true)
                     : mts_tensormap_keys_to_samples(tensor, keys_to_move.get(), fill_value, true);
    }
    if (result == nullptr) {
        check(MTS_INVALID_PARAMETER_ERROR);
    }
    return TensorPointer(result);
}

/// The values of every block of `tensor`, read on the host, one after the
/// other, with the shapes.
std::vector<double> values_of(mts_tensormap_t* tensor, std::vector<uintptr_t>& shapes) {
    LabelsPointer keys(mts_tensormap_keys(tensor));
    const int32_t* key_values = nullptr;
    uintptr_t count = 0;
    uintptr_t size = 0;
    check(mts_labels_values_cpu(keys.get(), &key_values, &count, &size));
    std::vector<double> values;
    for (uintptr_t b = 0; b < count; b++) {
        mts_block_t* block = nullptr;
        check(mts_tensormap_block_by_id(tensor, &block, b));
        mts_array_t data = {};
        check(mts_block_data(block, &data));
        DLManagedTensorVersioned* exported = nullptr;
        check(data.as_dlpack(data.ptr, &exported, DLDevice{kDLCPU, 0}, nullptr, DLPackVersion{1, 0}));
        const DLTensor& view = exported->dl_tensor;
        size_t elements = 1;
        for (int32_t axis = 0; axis < view.ndim; axis++) {
            elements *= static_cast<size_t>(view.shape[axis]);
            shapes.push_back(static_cast<uintptr_t>(view.shape[axis]));
        }
        shapes.push_back(0);  // between blocks
        // in row-major order, whatever the strides of the export
        const auto* first = reinterpret_cast<const double*>(static_cast<const char*>(view.data) + view.byte_offset);
        std::vector<int64_t> index(static_cast<size_t>(view.ndim), 0);
        for (size_t i = 0; i < elements; i++) {
            int64_t offset = 0;
            int64_t contiguous_stride = 1;
            for (int32_t axis = view.ndim; axis-- > 0;) {
                const int64_t stride = view.strides != nullptr ? view.strides[axis] : contiguous_stride;
                offset += index[static_cast<size_t>(axis)] * stride;
                contiguous_stride *= view.shape[axis];
            }
            values.push_back(first[offset]);
            for (int32_t axis = view.ndim; axis-- > 0;) {
                if (++index[static_cast<size_t>(axis)] < view.shape[axis]) {
                    break;
                }
                index[static_cast<size_t>(axis)] = 0;
            }
        }
        if (exported->deleter != nullptr) {
            exported->deleter(exported);
        }
    }
    return values;
}

Row run_operation_case(const Options& options, Operation operation, const TensorShape& shape, DLDevice device) {
    const Arrays simple = {Kind::simple, {kDLCPU, 0}};
    const Arrays ours = {Kind::mtsarray, device};
    const Arrays timed_ours = {Kind::timed_mtsarray, device};
    auto reference_tensor = make_tensor(simple, shape);
    auto tensor = make_tensor(ours, shape);
    auto timed_tensor = make_tensor(timed_ours, shape);

    // the results agree with SimpleDataArray's, value by value; but for
    // components_to_properties, whose values keep their order (the new
    // properties are (component, property) pairs, row-major: what
    // metatensor-core gives with NumPy arrays), where the reference is the
    // input itself: libmetatensor swaps axes there, and SimpleDataArray's
    // swap_axes is wrong (bench/README.md, the caveats of the baseline)
    std::vector<uintptr_t> expected_shapes, shapes, timed_shapes;
    auto expected = values_of(run_operation(operation, simple, reference_tensor.get()).get(), expected_shapes);
    if (operation == Operation::components_to_properties) {
        std::vector<uintptr_t> input_shapes;
        expected = values_of(reference_tensor.get(), input_shapes);
    }
    auto actual = values_of(run_operation(operation, ours, tensor.get()).get(), shapes);
    auto actual_timed = values_of(run_operation(operation, timed_ours, timed_tensor.get()).get(), timed_shapes);
    if (shapes != expected_shapes || actual != expected || timed_shapes != expected_shapes ||
        actual_timed != expected) {
        throw std::runtime_error(std::string(operation_name(operation)) + " " + shape.name +
                                 ": the mtsarray result differs from the reference");
    }
    const double bytes = static_cast<double>(expected.size() * sizeof(double));

    auto seconds = measure(options, {
                                        wall_clock([&] { run_operation(operation, ours, tensor.get()); }),
                                        wall_clock([&] { run_operation(operation, simple, reference_tensor.get()); }),
                                    });

    // the share of the time inside mtsarray's callbacks, on the timed arrays
    const size_t calls = options.smoke() ? 2 : 10;
    callback_nanoseconds = 0;
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < calls; i++) {
        run_operation(operation, timed_ours, timed_tensor.get());
    }
    const double timed_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(calls);
    const double callback_seconds = 1e-9 * static_cast<double>(callback_nanoseconds.load()) / static_cast<double>(calls);
    const double share = callback_seconds / timed_seconds;

    Row row;
    row.group = "metatensor operations";
    row.device = device.device_type == kDLCPU ? "cpu" : "cuda";
    row.name = std::string(operation_name(operation)) + " " + shape.name;
    row.parameters = {{"operation", operation_name(operation)},
                      {"blocks", std::to_string(shape.centers * shape.neighbors)},
                      {"atoms_per_center", std::to_string(shape.atoms_per_center)},
                      {"components", std::to_string(shape.components)},
                      {"properties", std::to_string(shape.properties)}};
    row.bytes = bytes;
    row.seconds = seconds[0];
    row.baseline_name = "SimpleDataArray";
    row.baseline_seconds = seconds[1];
    row.measurements = {{"callback_share", share},
                        {"callback_seconds", callback_seconds},
                        {"timed_operation_seconds", timed_seconds}};
    char text[200];
    std::snprintf(text, sizeof(text), "%.0f%% of the time in mtsarray's callbacks (%s of %s, timed arrays)",
                  100.0 * share, format_seconds(callback_seconds).c_str(), format_seconds(timed_seconds).c_str());
    row.note = text;
    const bool on_cpu = device.device_type == kDLCPU;
    row.targets.push_back({on_cpu ? "<=20% in callbacks" : "<=10% in callbacks", share <= (on_cpu ? 0.20 : 0.10)});
    if (on_cpu) {
        row.targets.push_back({">=1.2x SDA", row.speedup() >= 1.2});
    }
    return row;
}

std::vector<TensorShape> tensor_shapes(const Options& options) {
    if (options.smoke()) {
        return {{"4 blocks 2x2, 300 atoms, xyz 3, 4 props", 2, 2, 300, 3, 4}};
    }
    return {
        {"4 blocks 2x2, 5e3 atoms, 32 props", 2, 2, 5000, 0, 32},
        {"16 blocks 4x4, 2e4 atoms, xyz 3, 8 props", 4, 4, 20000, 3, 8},
        {"32 blocks 4x8, 2.5e4 atoms, 16 props", 4, 8, 25000, 0, 16},
    };
}

}  // namespace

std::vector<Case> operation_cases(const Options& options) {
    std::vector<DLDevice> devices = {{kDLCPU, 0}};
    bool gpu = false;
    if (mtsarray_backend_available(kDLCUDA, &gpu) == MTS_SUCCESS && gpu) {
        devices.push_back({kDLCUDA, 0});
    }
    std::vector<Case> cases;
    for (const DLDevice device : devices) {
        const std::string device_name = device.device_type == kDLCPU ? "cpu" : "cuda";
        for (const auto& shape : tensor_shapes(options)) {
            for (Operation operation :
                 {Operation::keys_to_properties, Operation::keys_to_samples, Operation::components_to_properties}) {
                if (operation == Operation::components_to_properties && shape.components == 0) {
                    continue;
                }
                const std::string name = std::string(operation_name(operation)) + " " + shape.name;
                cases.push_back(Case{"metatensor operations", device_name, name, [=] {
                                         try {
                                             return run_operation_case(options, operation, shape, device);
                                         } catch (const std::exception& error) {
                                             // a row that could not run, or whose values are wrong, is
                                             // a MISS that says why; the other rows still run
                                             Row row;
                                             row.group = "metatensor operations";
                                             row.device = device_name;
                                             row.name = name;
                                             row.note = std::string("error: ") + error.what();
                                             row.targets.push_back({"runs, values right", false});
                                             return row;
                                         }
                                     }});
            }
        }
    }
    return cases;
}

}  // namespace bench
