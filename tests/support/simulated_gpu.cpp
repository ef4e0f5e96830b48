#include "simulated_gpu.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <string>
#include <utility>

#include "core/backend_registry.hpp"
#include "cpu/fill.hpp"
#include "cpu/strided_copy.hpp"
#include "base/device.hpp"
#include "base/error.hpp"
#include "base/move_plan.hpp"

namespace mtsarray_test {

using mtsarray::detail::Error;
using mtsarray::detail::MovePlan;
using mtsarray::detail::MoveRun;
using mtsarray::detail::StridedView;

namespace {

// A host wait that would need a held stream to move on fails after this.
constexpr auto host_wait_timeout = std::chrono::seconds(3);
constexpr unsigned char poison = 0xDD;

}  // namespace

// ---- queues: one worker thread each ------------------------------------------------

class SimulatedGpu::Queue {
public:
    Queue(int device, std::string name) : device_(device), name_(std::move(name)), worker_([this] { run(); }) {}

    ~Queue() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        wake_.notify_all();
        worker_.join();
    }

    int device() const { return device_; }
    const std::string& name() const { return name_; }

    void push(std::function<void()> task) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (capturing_) {
            captured_.push_back(std::move(task));
            return;
        }
        tasks_.push_back(std::move(task));
        wake_.notify_all();
    }

    /// Waits until everything queued so far ran; false on timeout.
    bool wait_idle(std::chrono::milliseconds timeout) {
        std::unique_lock<std::mutex> lock(mutex_);
        return idle_.wait_for(lock, timeout, [&] { return tasks_.empty() && !running_; });
    }

    bool capturing() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return capturing_;
    }
    void begin_capture() {
        std::lock_guard<std::mutex> lock(mutex_);
        capturing_ = true;
        captured_.clear();
    }
    Graph end_capture() {
        std::lock_guard<std::mutex> lock(mutex_);
        capturing_ = false;
        return std::move(captured_);
    }

private:
    void run() {
        std::unique_lock<std::mutex> lock(mutex_);
        while (true) {
            wake_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
            if (tasks_.empty()) {
                return;  // stopping, nothing left
            }
            auto task = std::move(tasks_.front());
            tasks_.pop_front();
            running_ = true;
            lock.unlock();
            task();
            lock.lock();
            running_ = false;
            idle_.notify_all();
        }
    }

    int device_;
    std::string name_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable idle_;
    std::deque<std::function<void()>> tasks_;
    bool running_ = false;
    bool stopping_ = false;
    bool capturing_ = false;
    Graph captured_;
    std::thread worker_;  // last: starts once the rest exists
};

struct SimulatedGpu::Event {
    std::mutex mutex;
    std::condition_variable done_changed;
    bool done = false;

    void complete() {
        std::lock_guard<std::mutex> lock(mutex);
        done = true;
        done_changed.notify_all();
    }
    void wait() {
        std::unique_lock<std::mutex> lock(mutex);
        done_changed.wait(lock, [&] { return done; });
    }
};

struct SimulatedGpu::Marker final : mtsarray::detail::StreamMarker {
    explicit Marker(std::shared_ptr<Event> recorded) : event(std::move(recorded)) {}
    std::shared_ptr<Event> event;
};

struct SimulatedGpu::Gate::State {
    std::mutex mutex;
    std::condition_variable opened;
    bool open = false;
};

void SimulatedGpu::Gate::open() {
    if (state_ == nullptr) {
        return;
    }
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->open = true;
    state_->opened.notify_all();
}

bool SimulatedGpu::Gate::is_open() const {
    if (state_ == nullptr) {
        return true;
    }
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->open;
}

// ---- construction ----------------------------------------------------------------------

SimulatedGpu::SimulatedGpu(int device_count)
    : device_count_(device_count), releases_(std::make_unique<Queue>(-1, "deferred releases")) {
    for (int device = 0; device < device_count; device++) {
        zero_size_.push_back(std::make_unique<char[]>(1));
    }
}

SimulatedGpu::~SimulatedGpu() {
    try {
        drain();
    } catch (const std::exception& error) {
        std::fprintf(stderr, "%s\n", error.what());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    // queues stop before the memory their work may touch goes
    default_queues_.clear();
    user_queues_.clear();
    for (auto& allocation : live_) {
        delete[] static_cast<const char*>(allocation.first);
    }
    for (auto& allocation : quarantine_) {
        delete[] static_cast<const char*>(allocation.first);
    }
}

UseSimulatedGpu::UseSimulatedGpu(SimulatedGpu& gpu)
    : previous_(mtsarray::detail::set_cuda_backend_for_testing(&gpu)) {}

UseSimulatedGpu::~UseSimulatedGpu() {
    mtsarray::detail::set_cuda_backend_for_testing(previous_);
}

// ---- test controls ---------------------------------------------------------------------

int64_t SimulatedGpu::create_stream(int device) {
    check_device(DLDevice{kDLCUDA, device});
    auto queue = std::make_unique<Queue>(device, "user stream");
    const auto number = static_cast<int64_t>(reinterpret_cast<intptr_t>(queue.get()));
    std::lock_guard<std::mutex> lock(mutex_);
    user_queues_.emplace(number, std::move(queue));
    return number;
}

SimulatedGpu::Queue& SimulatedGpu::queue(int64_t number, int device) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (number == 1 || number == 2) {
        auto& slot = default_queues_[{device, number}];
        if (slot == nullptr) {
            slot = std::make_unique<Queue>(device, number == 1 ? "legacy stream" : "per-thread stream");
        }
        return *slot;
    }
    const auto found = user_queues_.find(number);
    if (found == user_queues_.end()) {
        throw Error("stream number " + std::to_string(number) + " is not a stream of the simulated GPU");
    }
    if (found->second->device() != device) {
        throw Error("stream number " + std::to_string(number) + " belongs to simulated device " +
                    std::to_string(found->second->device()) + ", not " + std::to_string(device));
    }
    return *found->second;
}

SimulatedGpu::Queue& SimulatedGpu::queue(const Stream& stream) const {
    if (stream.is_none() || stream.device().device_type != kDLCUDA) {
        throw Error("the simulated GPU only computes on kDLCUDA streams, got " + stream.describe());
    }
    return queue(stream.number(), stream.device().device_id);
}

SimulatedGpu::Gate SimulatedGpu::hold(int64_t stream, int device) {
    Gate gate;
    gate.state_ = std::make_shared<Gate::State>();
    auto state = gate.state_;
    queue(stream, device).push([state] {
        std::unique_lock<std::mutex> lock(state->mutex);
        state->opened.wait(lock, [&] { return state->open; });
    });
    return gate;
}

void SimulatedGpu::enqueue(int64_t stream, int device, std::function<void()> work) {
    queue(stream, device).push(std::move(work));
}

std::vector<std::string> SimulatedGpu::violations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return violations_;
}

void SimulatedGpu::clear_violations() {
    std::lock_guard<std::mutex> lock(mutex_);
    violations_.clear();
}

size_t SimulatedGpu::allocated_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t bytes = 0;
    for (const auto& allocation : live_) {
        bytes += allocation.second;
    }
    return bytes;
}

void SimulatedGpu::drain() {
    // frees and releases can queue more work: until everything is quiet
    for (int round = 0; round < 16; round++) {
        std::vector<Queue*> queues;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto& entry : default_queues_) {
                queues.push_back(entry.second.get());
            }
            for (auto& entry : user_queues_) {
                queues.push_back(entry.second.get());
            }
        }
        queues.push_back(releases_.get());
        for (auto* queue : queues) {
            if (!queue->wait_idle(std::chrono::seconds(10))) {
                throw Error("simulated GPU: " + queue->name() + " is still busy after 10 s (a gate left closed?)");
            }
        }
    }
}

void SimulatedGpu::begin_capture(int64_t stream, int device) {
    queue(stream, device).begin_capture();
}

SimulatedGpu::Graph SimulatedGpu::end_capture(int64_t stream, int device) {
    Queue& captured = queue(stream, device);
    auto graph = captured.end_capture();
    // work deferred while the stream was capturing can run now
    std::vector<std::function<void()>> ready;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = after_capture_.begin(); it != after_capture_.end();) {
            if (it->first == &captured) {
                ready.push_back(std::move(it->second));
                it = after_capture_.erase(it);
            } else {
                ++it;
            }
        }
    }
    for (auto& work : ready) {
        work();
    }
    return graph;
}

void SimulatedGpu::launch(const Graph& graph, int64_t stream, int device) {
    Queue& target = queue(stream, device);
    for (const auto& task : graph) {
        target.push(task);
    }
}

// ---- memory ------------------------------------------------------------------------------

void SimulatedGpu::check_device(DLDevice device) const {
    if (device.device_type != kDLCUDA && device.device_type != kDLCUDAHost &&
        device.device_type != kDLCUDAManaged) {
        throw Error("the simulated GPU does not manage " + mtsarray::detail::describe(device));
    }
    if (device.device_id < 0 || device.device_id >= device_count_) {
        throw Error("device id " + std::to_string(device.device_id) + " out of range (" +
                    std::to_string(device_count_) + " simulated devices)");
    }
}

void* SimulatedGpu::allocate(const Stream& stream, size_t bytes) const {
    const DLDevice device = stream.device();
    check_device(device);
    if (device.device_type != kDLCUDA) {
        return new char[bytes == 0 ? 1 : bytes];  // host-accessible: the CPU computes on it
    }
    if (bytes == 0) {
        return zero_size_[static_cast<size_t>(device.device_id)].get();
    }
    (void)queue(stream);  // an invalid stream fails here, as a real allocation would
    auto* data = new char[bytes];
    std::memset(data, poison, bytes);
    std::lock_guard<std::mutex> lock(mutex_);
    live_[data] = bytes;
    return data;
}

void SimulatedGpu::deallocate(const Stream& stream, void* data, size_t) const noexcept {
    const DLDevice device = stream.device();
    if (device.device_type != kDLCUDA) {
        delete[] static_cast<char*>(data);
        return;
    }
    if (data == zero_size_[static_cast<size_t>(device.device_id)].get()) {
        return;
    }
    try {
        queue(stream).push([this, data] {
            std::lock_guard<std::mutex> lock(mutex_);
            const auto found = live_.find(data);
            if (found == live_.end()) {
                violations_.push_back("free of memory that is not allocated");
                return;
            }
            std::memset(data, poison, found->second);
            quarantine_.insert(*found);
            live_.erase(found);
        });
    } catch (const std::exception& error) {
        std::lock_guard<std::mutex> lock(mutex_);
        violations_.push_back(std::string("deallocate failed: ") + error.what());
    }
}

void SimulatedGpu::check_live(const void* data, size_t bytes, const char* what) const {
    if (bytes == 0) {
        return;
    }
    const auto* begin = static_cast<const char*>(data);
    std::lock_guard<std::mutex> lock(mutex_);
    const auto contains = [&](const std::map<const void*, size_t>& allocations) {
        auto found = allocations.upper_bound(data);
        if (found == allocations.begin()) {
            return false;
        }
        --found;
        const auto* start = static_cast<const char*>(found->first);
        return begin >= start && begin + bytes <= start + found->second;
    };
    if (!contains(live_) && contains(quarantine_)) {
        violations_.push_back(std::string(what) + " touched freed device memory");
    }
    // neither: memory mtsarray was given (wrapped, imported), not ours to check
}

// ---- work ---------------------------------------------------------------------------------

void SimulatedGpu::fill(const Stream& stream, void* data, size_t count, const void* value,
                        size_t element_size) const {
    std::vector<unsigned char> pattern(static_cast<const unsigned char*>(value),
                                       static_cast<const unsigned char*>(value) + element_size);
    queue(stream).push([this, data, count, pattern, element_size] {
        check_live(data, count * element_size, "fill");
        mtsarray::detail::cpu::fill(data, count, pattern.data(), element_size, /*threads=*/1);
    });
}

void SimulatedGpu::copy(const Stream& stream, void* destination, const void* source, size_t bytes) const {
    queue(stream).push([this, destination, source, bytes] {
        check_live(source, bytes, "copy (source)");
        check_live(destination, bytes, "copy (destination)");
        std::memcpy(destination, source, bytes);
    });
}

void SimulatedGpu::move_data(const Stream& stream, void* output, const void* input, const Stream& input_stream,
                             const MovePlan& plan) const {
    plan.validate();
    // the plan borrows the caller's movements: the queued work keeps the runs
    std::vector<MoveRun> runs;
    plan.for_each_run([&](const MoveRun& run) { runs.push_back(run); });
    wait(stream, input_stream);
    const uint64_t input_stride = plan.input_row_stride();
    const uint64_t output_stride = plan.output_row_stride();
    queue(stream).push([this, runs = std::move(runs), output, input, input_stride, output_stride] {
        for (const auto& run : runs) {
            for (uint64_t row = 0; row < run.rows; row++) {
                const auto* from = static_cast<const char*>(input) + run.input_offset + row * input_stride;
                auto* to = static_cast<char*>(output) + run.output_offset + row * output_stride;
                check_live(from, run.bytes, "move_data (input)");
                check_live(to, run.bytes, "move_data (output)");
                std::memcpy(to, from, run.bytes);
            }
        }
    });
}

void SimulatedGpu::strided_copy(const Stream& stream, void* destination, const StridedView& source) const {
    size_t count = 1;
    for (auto size : source.shape) {
        count *= size;
    }
    queue(stream).push([this, destination, source, count] {
        check_live(destination, count * source.element_size, "strided_copy (destination)");
        mtsarray::detail::cpu::strided_copy(destination, source, /*threads=*/1);
    });
}

void SimulatedGpu::copy_to_host(const Stream& stream, void* host_destination, const void* source,
                                size_t bytes) const {
    queue(stream).push([this, host_destination, source, bytes] {
        check_live(source, bytes, "copy_to_host");
        std::memcpy(host_destination, source, bytes);
    });
}

void SimulatedGpu::copy_from_host(const Stream& stream, void* destination, const void* host_source,
                                  size_t bytes) const {
    // the caller may reuse its buffer at once: take the bytes now
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(host_source),
                                                      static_cast<const char*>(host_source) + bytes);
    queue(stream).push([this, destination, staged] {
        check_live(destination, staged->size(), "copy_from_host");
        std::memcpy(destination, staged->data(), staged->size());
    });
}

void SimulatedGpu::copy_peer(const Stream& stream, void* destination, DLDevice destination_device,
                             const void* source, size_t bytes) const {
    check_device(destination_device);
    copy(stream, destination, source, bytes);
}

// ---- ordering --------------------------------------------------------------------------

void SimulatedGpu::wait(const Stream& waiting, const Stream& producer) const {
    if (waiting == producer || producer.is_none()) {
        return;
    }
    if (waiting.is_none()) {
        synchronize(producer);
        return;
    }
    Queue& waiting_queue = queue(waiting);
    Queue& producer_queue = queue(producer);
    if (waiting_queue.capturing() || producer_queue.capturing()) {
        throw Error(waiting.describe() + " can not wait for " + producer.describe() +
                    ": one of them is capturing a graph and the other is not part of that capture");
    }
    auto event = std::make_shared<Event>();
    producer_queue.push([event] { event->complete(); });
    waiting_queue.push([event] { event->wait(); });
}

void SimulatedGpu::synchronize(const Stream& stream) const {
    if (stream.is_none()) {
        return;
    }
    host_waits_++;
    Queue& target = queue(stream);
    if (target.capturing()) {
        throw Error("the host can not wait for " + stream.describe() + ": it is capturing a graph");
    }
    if (!target.wait_idle(std::chrono::duration_cast<std::chrono::milliseconds>(host_wait_timeout))) {
        throw Error("simulated GPU: the host waited for " + stream.describe() +
                    ", which is held by a slow kernel: an operation blocked the host");
    }
}

std::shared_ptr<const mtsarray::detail::StreamMarker> SimulatedGpu::mark(const Stream& stream) const {
    if (stream.is_none()) {
        return nullptr;
    }
    Queue& target = queue(stream);
    if (target.capturing()) {
        return nullptr;
    }
    auto event = std::make_shared<Event>();
    target.push([event] { event->complete(); });
    return std::make_shared<Marker>(event);
}

void SimulatedGpu::wait(const Stream& waiting, const mtsarray::detail::StreamMarker& marker) const {
    const auto& ours = dynamic_cast<const Marker&>(marker);
    Queue& target = queue(waiting);
    if (target.capturing()) {
        throw Error(waiting.describe() + " is capturing a graph: it can not wait for work outside the capture");
    }
    auto event = ours.event;
    target.push([event] { event->wait(); });
}

void SimulatedGpu::release_after(const Stream& stream, std::function<void()>&& release) const {
    if (defer_while_capturing(stream, release)) {
        return;
    }
    auto event = std::make_shared<Event>();
    queue(stream).push([event] { event->complete(); });
    releases_->push([event, work = std::move(release)] {
        event->wait();
        work();
    });
}

bool SimulatedGpu::defer_while_capturing(const Stream& stream, std::function<void()>& work) const {
    if (stream.is_none() || stream.device().device_type != kDLCUDA) {
        return false;
    }
    Queue& target = queue(stream);
    if (!target.capturing()) {
        return false;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    after_capture_.emplace_back(&target, std::move(work));
    return true;
}

void SimulatedGpu::check_not_capturing(const Stream& stream, const char* operation) const {
    if (stream.is_none() || stream.device().device_type != kDLCUDA) {
        return;
    }
    if (queue(stream).capturing()) {
        throw Error(std::string(operation) + " can not be captured: " + stream.describe() +
                    " is capturing a graph");
    }
}

}  // namespace mtsarray_test
