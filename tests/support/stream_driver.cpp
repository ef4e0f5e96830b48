// The simulated StreamDriver (support/stream_driver.hpp), always built, and
// the choice of the process's driver: the simulation when it serves
// kDLCUDA, the CUDA one (support/cuda_stream_driver.cu, compiled in with
// MTSARRAY_TEST_CUDA_DRIVER) otherwise.

#include "support/stream_driver.hpp"

#include <cstring>
#include <exception>
#include <stdexcept>
#include <utility>
#include <vector>

#include "base/stream.hpp"
#include "support/simulated_runtime.hpp"

namespace mtsarray_test {

#if MTSARRAY_TEST_CUDA_DRIVER
StreamDriver& cuda_stream_driver();  // support/cuda_stream_driver.cu
#endif

namespace {

class SimulatedHold final : public StreamHold {
public:
    explicit SimulatedHold(sim::Gate gate) : gate_(std::move(gate)) {}
    void release() override { gate_.open(); }
    bool running() const override { return !gate_.is_open(); }

private:
    sim::Gate gate_;
};

class SimulatedGraph final : public CapturedGraph {
public:
    explicit SimulatedGraph(sim::Graph graph) : graph_(std::move(graph)) {}
    size_t nodes() const override { return graph_.size(); }
    size_t kernel_nodes() const override { return graph_.count(sim::NodeKind::kernel); }
    size_t copy_nodes() const override { return graph_.count(sim::NodeKind::copy); }
    void replay(int64_t stream, int device) override { sim::launch(graph_, stream, device); }

private:
    sim::Graph graph_;
};

sim::CaptureMode simulated_mode(CaptureMode mode) {
    switch (mode) {
    case CaptureMode::global: return sim::CaptureMode::global;
    case CaptureMode::thread_local_mode: return sim::CaptureMode::thread_local_mode;
    case CaptureMode::relaxed: return sim::CaptureMode::relaxed;
    }
    return sim::CaptureMode::global;
}

class SimulatedStreamDriver final : public StreamDriver {
public:
    std::string name() const override { return "simulated CUDA"; }
    bool simulated() const override { return true; }
    int device_count() const override { return sim::device_count(); }
    int current_device() const override { return sim::current_device(); }

    int64_t create_stream(int device) override { return sim::create_stream(device); }
    void destroy_stream(int64_t stream, int) override { sim::destroy_stream(stream); }

    std::unique_ptr<StreamHold> hold(int64_t stream, int device) override {
        return std::make_unique<SimulatedHold>(sim::hold(stream, device));
    }

    void begin_capture(int64_t stream, int device, CaptureMode mode) override {
        sim::begin_capture(stream, device, simulated_mode(mode));
    }

    std::unique_ptr<CapturedGraph> end_capture(int64_t stream, int device, std::string& why) override {
        try {
            return std::make_unique<SimulatedGraph>(sim::end_capture(stream, device));
        } catch (const std::exception& error) {
            why = error.what();
            for (const auto& line : sim::capture_invalidations()) {
                why += "; " + line;
            }
            return nullptr;
        }
    }

    // simulated device memory is host memory, written by the streams'
    // workers when their turn comes
    void peek(int, void* destination, const void* source, size_t bytes) override {
        std::memcpy(destination, source, bytes);
    }

    std::shared_ptr<void> host_buffer(size_t bytes) override {
        return std::shared_ptr<void>(new char[bytes], [](void* data) { delete[] static_cast<char*>(data); });
    }

    void read_on_stream(int64_t stream, int device, void* destination, const void* source, size_t bytes) override {
        sim::enqueue_read(stream, device, destination, source, bytes);
    }

    void synchronize_stream(int64_t stream, int device) override {
        simulated_backend().synchronize(mtsarray::detail::Stream::parse(DLDevice{kDLCUDA, device}, stream));
    }

    void synchronize_all() override { sim::drain(); }

    std::string host_waits_unseen() const override { return ""; }
    size_t host_waits() const override { return sim::host_waits(); }
};

}  // namespace

StreamDriver* stream_driver() {
    if (sim::in_use()) {
        static SimulatedStreamDriver simulated;
        return &simulated;
    }
#if MTSARRAY_TEST_CUDA_DRIVER
    return &cuda_stream_driver();
#else
    return nullptr;
#endif
}

}  // namespace mtsarray_test
