// The CUDA StreamDriver (support/stream_driver.hpp): built with the CUDA
// backend only, used when a real GPU serves kDLCUDA. A stream is held by a
// one-thread kernel that spins until a flag in mapped page-locked memory
// says so; a peek copies device memory on a stream of its own that nothing
// of mtsarray's is ordered with.

#include "support/stream_driver.hpp"

#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace mtsarray_test {

StreamDriver& cuda_stream_driver();

namespace {

/// About two seconds of clock cycles: how long a held stream stays busy if
/// the host never releases it (because the call under test waited for it).
constexpr long long HOLD_LIMIT_CYCLES = 4000000000LL;
/// Holds that may be taken at once on one device.
constexpr int HOLD_SLOTS = 64;
/// The most bytes one peek reads.
constexpr size_t PEEK_BYTES = size_t(16) << 20;

__global__ void hold_until_released(const volatile int* released, long long max_cycles) {
    const long long start = clock64();
    while (*released == 0 && clock64() - start < max_cycles) {
    }
}

void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) {
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
    }
}

cudaStream_t handle(int64_t stream) {
    if (stream == 1) {
        return cudaStreamLegacy;
    }
    if (stream == 2) {
        return cudaStreamPerThread;
    }
    return reinterpret_cast<cudaStream_t>(static_cast<intptr_t>(stream));
}

/// Makes `device` current until the end of the scope.
class OnDevice {
public:
    explicit OnDevice(int device) {
        check(cudaGetDevice(&previous_), "cudaGetDevice");
        check(cudaSetDevice(device), "cudaSetDevice");
    }
    ~OnDevice() { cudaSetDevice(previous_); }
    OnDevice(const OnDevice&) = delete;
    OnDevice& operator=(const OnDevice&) = delete;

private:
    int previous_ = 0;
};

class CudaHold final : public StreamHold {
public:
    CudaHold(volatile int* flag, cudaEvent_t done) : flag_(flag), done_(done) {}
    ~CudaHold() override { release(); }
    void release() override { *flag_ = 1; }
    bool running() const override { return *flag_ == 0 && cudaEventQuery(done_) == cudaErrorNotReady; }

private:
    volatile int* flag_;
    cudaEvent_t done_;  // recorded right after the hold kernel
};

class CudaGraph final : public CapturedGraph {
public:
    explicit CudaGraph(cudaGraph_t graph) : graph_(graph) {
        check(cudaGraphInstantiate(&executable_, graph_, 0), "cudaGraphInstantiate");
    }
    ~CudaGraph() override {
        cudaGraphExecDestroy(executable_);
        cudaGraphDestroy(graph_);
    }
    size_t nodes() const override {
        size_t count = 0;
        check(cudaGraphGetNodes(graph_, nullptr, &count), "cudaGraphGetNodes");
        return count;
    }
    size_t kernel_nodes() const override { return nodes_of(cudaGraphNodeTypeKernel); }
    size_t copy_nodes() const override { return nodes_of(cudaGraphNodeTypeMemcpy); }
    void replay(int64_t stream, int device) override {
        OnDevice on(device);
        check(cudaGraphLaunch(executable_, handle(stream)), "cudaGraphLaunch");
    }

private:
    size_t nodes_of(cudaGraphNodeType wanted) const {
        size_t count = nodes();
        std::vector<cudaGraphNode_t> nodes(count);
        check(cudaGraphGetNodes(graph_, nodes.data(), &count), "cudaGraphGetNodes");
        size_t found = 0;
        for (auto node : nodes) {
            cudaGraphNodeType type;
            check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
            found += type == wanted ? 1 : 0;
        }
        return found;
    }

    cudaGraph_t graph_ = nullptr;
    cudaGraphExec_t executable_ = nullptr;
};

cudaStreamCaptureMode cuda_mode(CaptureMode mode) {
    switch (mode) {
    case CaptureMode::global: return cudaStreamCaptureModeGlobal;
    case CaptureMode::thread_local_mode: return cudaStreamCaptureModeThreadLocal;
    case CaptureMode::relaxed: return cudaStreamCaptureModeRelaxed;
    }
    return cudaStreamCaptureModeGlobal;
}

class CudaStreamDriver final : public StreamDriver {
public:
    // Everything page-locked is allocated here, before any stream is held.
    CudaStreamDriver() {
        check(cudaGetDeviceCount(&devices_), "cudaGetDeviceCount");
        const size_t slots = static_cast<size_t>(devices_) * HOLD_SLOTS;
        void* flags = nullptr;
        check(cudaHostAlloc(&flags, slots * sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable),
              "cudaHostAlloc");
        flags_ = static_cast<volatile int*>(flags);
        check(cudaMallocHost(&peeked_, PEEK_BYTES), "cudaMallocHost");
        for (size_t slot = 0; slot < slots; slot++) {
            flags_[slot] = 1;
        }
        for (int device = 0; device < devices_; device++) {
            OnDevice on(device);
            cudaStream_t stream = nullptr;
            check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
            peek_streams_.push_back(stream);
            for (int slot = 0; slot < HOLD_SLOTS; slot++) {
                cudaEvent_t event = nullptr;
                check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
                events_.push_back(event);
            }
        }
    }
    // the process's driver lives until exit, when the runtime may be gone:
    // nothing is destroyed

    std::string name() const override { return "CUDA"; }
    bool simulated() const override { return false; }
    int device_count() const override { return devices_; }
    int current_device() const override {
        int device = -1;
        check(cudaGetDevice(&device), "cudaGetDevice");
        return device;
    }

    int64_t create_stream(int device) override {
        OnDevice on(device);
        cudaStream_t stream = nullptr;
        check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        return static_cast<int64_t>(reinterpret_cast<intptr_t>(stream));
    }

    void destroy_stream(int64_t stream, int device) override {
        OnDevice on(device);
        check(cudaStreamSynchronize(handle(stream)), "cudaStreamSynchronize");
        check(cudaStreamDestroy(handle(stream)), "cudaStreamDestroy");
    }

    std::unique_ptr<StreamHold> hold(int64_t stream, int device) override {
        OnDevice on(device);
        std::lock_guard<std::mutex> lock(mutex_);
        // a slot of the device whose previous hold was released and has finished
        for (int tried = 0; tried < HOLD_SLOTS; tried++) {
            const int slot = device * HOLD_SLOTS + next_slot_;
            next_slot_ = (next_slot_ + 1) % HOLD_SLOTS;
            cudaEvent_t done = events_[slot];
            if (flags_[slot] == 0 || cudaEventQuery(done) != cudaSuccess) {
                continue;
            }
            void* device_flag = nullptr;
            check(cudaHostGetDevicePointer(&device_flag, const_cast<int*>(flags_ + slot), 0),
                  "cudaHostGetDevicePointer");
            flags_[slot] = 0;
            hold_until_released<<<1, 1, 0, handle(stream)>>>(static_cast<const int*>(device_flag), HOLD_LIMIT_CYCLES);
            check(cudaGetLastError(), "launching the hold kernel");
            check(cudaEventRecord(done, handle(stream)), "cudaEventRecord");
            return std::make_unique<CudaHold>(flags_ + slot, done);
        }
        throw std::runtime_error("more than 64 streams of one device held at once");
    }

    void begin_capture(int64_t stream, int device, CaptureMode mode) override {
        OnDevice on(device);
        check(cudaStreamBeginCapture(handle(stream), cuda_mode(mode)), "cudaStreamBeginCapture");
    }

    std::unique_ptr<CapturedGraph> end_capture(int64_t stream, int device, std::string& why) override {
        OnDevice on(device);
        cudaGraph_t graph = nullptr;
        const cudaError_t status = cudaStreamEndCapture(handle(stream), &graph);
        if (status != cudaSuccess) {
            // the failure is the test's to report, not the next call's: it
            // must not stay the thread's last error (hold() checks that)
            (void)cudaGetLastError();
            why = std::string("cudaStreamEndCapture: ") + cudaGetErrorName(status) + ": " +
                  cudaGetErrorString(status);
            return nullptr;
        }
        return std::make_unique<CudaGraph>(graph);
    }

    void peek(int device, void* destination, const void* source, size_t bytes) override {
        if (bytes > PEEK_BYTES) {
            throw std::runtime_error("peek: at most 16 MiB at once");
        }
        OnDevice on(device);
        cudaStream_t stream = peek_streams_[device];
        check(cudaMemcpyAsync(peeked_, source, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        std::memcpy(destination, peeked_, bytes);
    }

    std::shared_ptr<void> host_buffer(size_t bytes) override {
        void* data = nullptr;
        check(cudaMallocHost(&data, bytes), "cudaMallocHost");
        return std::shared_ptr<void>(data, [](void* pointer) { cudaFreeHost(pointer); });
    }

    void read_on_stream(int64_t stream, int device, void* destination, const void* source, size_t bytes) override {
        OnDevice on(device);
        check(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToHost, handle(stream)),
              "cudaMemcpyAsync");
    }

    void synchronize_stream(int64_t stream, int device) override {
        OnDevice on(device);
        check(cudaStreamSynchronize(handle(stream)), "cudaStreamSynchronize");
    }

    void synchronize_all() override {
        for (int device = 0; device < devices_; device++) {
            OnDevice on(device);
            check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        }
    }

    std::string host_waits_unseen() const override {
        return "the CUDA runtime does not count host waits (the held streams still running after the call "
               "are the check there)";
    }
    size_t host_waits() const override { return 0; }

private:
    int devices_ = 0;
    volatile int* flags_ = nullptr;   // one per device and hold slot, mapped
    std::mutex mutex_;
    void* peeked_ = nullptr;          // page-locked, PEEK_BYTES
    std::vector<cudaStream_t> peek_streams_;  // per device, non-blocking
    std::vector<cudaEvent_t> events_;         // per device and hold slot
    int next_slot_ = 0;
};

}  // namespace

StreamDriver& cuda_stream_driver() {
    static CudaStreamDriver* const driver = new CudaStreamDriver();
    return *driver;
}

}  // namespace mtsarray_test
