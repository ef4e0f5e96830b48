#pragma once
// RelaxedCaptureMode<Runtime>: for its lifetime, the calling thread's
// interaction with graph captures is Relaxed (cudaThreadExchangeStreamCaptureMode
// / hipThreadExchangeStreamCaptureMode), then the previous mode comes back.
//
// In the default (Global) mode, a potentially unsafe call — an event query or
// synchronisation, a page-locked allocation or free — made by ANY thread
// while another thread captures a graph in Global mode (torch.cuda.graph's
// default) fails and invalidates that capture. mtsarray's event queries and
// its deferred-work thread never touch work of such a capture (they query
// events recorded outside it), so they run Relaxed. Traits used:
//   using CaptureMode = ...;
//   static CaptureMode exchange_capture_mode(CaptureMode) noexcept;  // returns the old one
//   static constexpr CaptureMode relaxed_capture_mode;

namespace mtsarray::detail {
namespace gpu {

template <class Runtime> class RelaxedCaptureMode {
public:
    RelaxedCaptureMode() : previous_(Runtime::exchange_capture_mode(Runtime::relaxed_capture_mode)) {}
    ~RelaxedCaptureMode() { Runtime::exchange_capture_mode(previous_); }
    RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
    RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

private:
    typename Runtime::CaptureMode previous_;
};

}  // namespace gpu
}  // namespace mtsarray::detail
