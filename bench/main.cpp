// mtsarray-bench: mtsarray's array operations measured side by side with the
// limit of the hardware (memcpy / memset / device-to-device copies) and with
// the implementation a user would otherwise use (metatensor::SimpleDataArray
// on the CPU, one cudaMemcpyAsync per segment on CUDA), in the same process.
//
// Usage: mtsarray-bench [--quick | --smoke] [--json FILE] [--filter TEXT] [--calls N]

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "mtsarray/config.h"

#include "cases.hpp"

namespace {

void usage(const char* program) {
    std::printf(
        "usage: %s [--quick | --smoke] [--json FILE] [--filter TEXT] [--calls N]\n"
        "  (default)      full sweeps, with progress; several minutes\n"
        "  --quick        smaller sweeps, under a minute on 2 CPU cores\n"
        "  --smoke        one tiny case per operation, one round: checks values only\n"
        "  --json FILE    also write every row to FILE\n"
        "  --filter TEXT  only the cases whose 'group device name' contains TEXT\n"
        "  --calls N      no timing rounds: every operation runs N times, for profilers\n"
        "                 (valgrind --tool=callgrind, perf stat); the times are indicative\n",
        program);
}

std::string backend_line(DLDeviceType type, const char* name) {
    bool available = false;
    if (mtsarray_backend_available(type, &available) != MTS_SUCCESS) {
        return std::string(name) + ": ?";
    }
    return std::string(name) + ": " +
           (available ? std::string("available")
                      : std::string("unavailable (") + mtsarray_backend_unavailable_reason(type) + ")");
}

}  // namespace

int main(int argc, char** argv) {
    bench::Options options;
    for (int i = 1; i < argc; i++) {
        const std::string argument = argv[i];
        if (argument == "--quick") {
            options.mode = bench::Mode::quick;
        } else if (argument == "--smoke") {
            options.mode = bench::Mode::smoke;
        } else if (argument == "--full") {
            options.mode = bench::Mode::full;
        } else if (argument == "--json" && i + 1 < argc) {
            options.json_path = argv[++i];
        } else if (argument == "--filter" && i + 1 < argc) {
            options.filter = argv[++i];
        } else if (argument == "--calls" && i + 1 < argc) {
            options.calls = std::strtoull(argv[++i], nullptr, 10);
            if (options.calls == 0) {
                usage(argv[0]);
                return 2;
            }
        } else if (argument == "--help" || argument == "-h") {
            usage(argv[0]);
            return 0;
        } else {
            usage(argv[0]);
            return 2;
        }
    }

    const char* mode = options.mode == bench::Mode::full ? "full" : options.smoke() ? "smoke" : "quick";
    std::printf("mtsarray-bench: mtsarray %s, metatensor %s, %s mode\n", mtsarray_version(),
                mts_version(), mode);
    std::printf("machine: %s\n", bench::describe_machine().c_str());
    bench::print_wrapped("backends: cpu: available", 0);
    bench::print_wrapped(backend_line(kDLCUDA, "cuda"), 2);
    bench::print_wrapped(backend_line(kDLROCM, "rocm"), 2);
    int32_t host_threads = 0;
    if (mtsarray_get_num_threads(&host_threads) != MTS_SUCCESS) {
        const char* message = nullptr;
        mts_last_error(&message, nullptr, nullptr);
        std::fprintf(stderr, "mtsarray-bench: error: %s\n", message == nullptr ? "unknown error" : message);
        return 1;
    }
    std::printf("host threads: %d (mtsarray_get_num_threads; mtsarray splits host work from 1 MiB, and the CPU\n"
                "  limits run on as many threads as it uses: [1 thread] rows set the count to 1)\n",
                static_cast<int>(host_threads));
    std::printf("times are medians of interleaved batches; %%lim = achieved bandwidth / the "
                "limit's on the same bytes;\nspeedup = baseline time / mtsarray time "
                "(SDA = metatensor::SimpleDataArray, through the same mts_array_t vtable)\n");

    std::vector<bench::Row> rows;
    try {
        auto cases = bench::cpu_cases(options);
        auto split = bench::thread_split_cases(options);
        cases.insert(cases.end(), split.begin(), split.end());
        auto planning = bench::gpu_planning_cases(options);
        cases.insert(cases.end(), planning.begin(), planning.end());
#if MTSARRAY_HAS_CUDA
        auto gpu = bench::cuda_cases(options);
        cases.insert(cases.end(), gpu.begin(), gpu.end());
#else
        std::printf("cuda rows: skipped: this mtsarray was built without the CUDA backend\n");
#endif
        auto operations = bench::operation_cases(options);
        cases.insert(cases.end(), operations.begin(), operations.end());
        std::vector<bench::Case> selected;
        for (auto& c : cases) {
            const std::string text = c.group + " " + c.device + " " + c.name;
            if (options.filter.empty() || text.find(options.filter) != std::string::npos) {
                selected.push_back(std::move(c));
            }
        }

        bench::Table table;
        std::string current;
        const auto start = std::chrono::steady_clock::now();
        for (size_t i = 0; i < selected.size(); i++) {
            const auto& c = selected[i];
            if (options.mode == bench::Mode::full) {
                const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
                std::fprintf(stderr, "[%zu/%zu, %.0f s] %s %s %s\n", i + 1, selected.size(), elapsed,
                             c.group.c_str(), c.device.c_str(), c.name.c_str());
            }
            bench::Row row = c.run();
            if (row.group + row.device != current) {
                current = row.group + row.device;
                table.header(row.group, row.device,
                             row.limit_name.empty() ? "-" : row.limit_name + " of the same bytes",
                             row.baseline_name.empty() ? "-" : row.baseline_name + " on the same data");
            }
            table.print(row);
            rows.push_back(std::move(row));
        }
        table.summary(rows);
        if (!options.json_path.empty()) {
            bench::write_json(options.json_path, options, rows);
            std::printf("wrote %s\n", options.json_path.c_str());
        }
    } catch (const std::exception& error) {
        // A wrong value or a failing call: the numbers would mean nothing.
        std::fprintf(stderr, "mtsarray-bench: error: %s\n", error.what());
        return 1;
    }
    return 0;
}
