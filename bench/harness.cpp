#include "harness.hpp"

#include <mtsarray.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

/// How long and how often to measure, per mode.
struct Policy {
    double batch_seconds;  // a batch of calls lasts at least this long
    size_t min_rounds;
    size_t max_rounds;
    double min_seconds;    // keep going until this much time was spent ...
    double max_seconds;    // ... but stop here once min_rounds (or 1 for slow calls) are done
};

Policy policy_for(Mode mode) {
    switch (mode) {
    case Mode::smoke:
        return {0.0, 1, 1, 0.0, 0.0};
    case Mode::quick:
        return {0.003, 7, 31, 0.3, 1.0};
    case Mode::full:
    default:
        return {0.01, 11, 101, 1.0, 20.0};
    }
}

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    const size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

std::string json_escape(const std::string& text) {
    std::string result;
    for (char c : text) {
        switch (c) {
        case '"': result += "\\\""; break;
        case '\\': result += "\\\\"; break;
        case '\n': result += "\\n"; break;
        default:
            if (static_cast<unsigned char>(c) < 0x20) {
                char buffer[8];
                std::snprintf(buffer, sizeof(buffer), "\\u%04x", c);
                result += buffer;
            } else {
                result += c;
            }
        }
    }
    return result;
}

std::string json_number(double value) {
    if (!std::isfinite(value)) {
        return "null";
    }
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.6g", value);
    return buffer;
}


std::string format_percent(double fraction) {
    if (!std::isfinite(fraction)) {
        return "-";
    }
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.0f%%", 100.0 * fraction);
    return buffer;
}

std::string format_bandwidth(double bytes_per_second) {
    if (!std::isfinite(bytes_per_second) || bytes_per_second <= 0) {
        return "-";
    }
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.2f", bytes_per_second / 1e9);
    return buffer;
}

std::string targets_text(const Row& row) {
    if (row.targets.empty()) {
        return "-";
    }
    std::string text;
    for (const auto& target : row.targets) {
        if (!text.empty()) {
            text += "  ";
        }
        text += (target.pass ? "PASS " : "MISS ") + target.name;
    }
    return text;
}

}  // namespace

std::string format_ratio(double value, const char* suffix) {
    if (!std::isfinite(value)) {
        return "-";
    }
    char buffer[32];
    if (value >= 100) {
        std::snprintf(buffer, sizeof(buffer), "%.0f%s", value, suffix);
    } else if (value >= 10) {
        std::snprintf(buffer, sizeof(buffer), "%.1f%s", value, suffix);
    } else {
        std::snprintf(buffer, sizeof(buffer), "%.2f%s", value, suffix);
    }
    return buffer;
}

TimedBatch wall_clock(std::function<void()> operation) {
    return [operation = std::move(operation)](size_t iterations) {
        const auto start = Clock::now();
        for (size_t i = 0; i < iterations; i++) {
            operation();
        }
        return seconds_since(start);
    };
}

std::vector<double> measure(const Options& options, const std::vector<TimedBatch>& operations) {
    const Policy policy = policy_for(options.mode);
    const auto start = Clock::now();

    if (options.calls != 0) {
        // profiling: a fixed number of calls each, the same in every run
        std::vector<double> result;
        for (const auto& operation : operations) {
            (void)operation(1);
            result.push_back(operation(options.calls) / static_cast<double>(options.calls));
        }
        return result;
    }

    // Warm-up (page faults, caches, lazy initialisation), then the batch size.
    std::vector<size_t> iterations(operations.size(), 1);
    bool slow = false;
    for (size_t i = 0; i < operations.size(); i++) {
        double single = operations[i](1);
        if (options.smoke()) {
            continue;
        }
        if (single < policy.batch_seconds) {
            single = std::max(operations[i](1), 1e-9);
            size_t count = static_cast<size_t>(policy.batch_seconds / single) + 1;
            count = std::min<size_t>(count, 10000000);
            // One refinement: the first calls are often slower than the rest.
            const double batch = operations[i](count);
            if (batch < 0.5 * policy.batch_seconds) {
                count = std::min<size_t>(
                    static_cast<size_t>(count * policy.batch_seconds / std::max(batch, 1e-9)) + 1,
                    10000000);
            }
            iterations[i] = count;
        }
        slow = slow || single > 0.25 * policy.max_seconds;
    }

    std::vector<std::vector<double>> samples(operations.size());
    for (size_t round = 0; round < policy.max_rounds; round++) {
        for (size_t i = 0; i < operations.size(); i++) {
            samples[i].push_back(operations[i](iterations[i]) / static_cast<double>(iterations[i]));
        }
        const size_t done = round + 1;
        const double elapsed = seconds_since(start);
        if (done >= policy.min_rounds && elapsed >= policy.min_seconds) {
            break;
        }
        if (elapsed >= policy.max_seconds && (done >= 3 || slow)) {
            break;
        }
    }

    std::vector<double> result;
    for (const auto& values : samples) {
        result.push_back(median(values));
    }
    return result;
}

bool Row::unreliable() const {
    const double fraction = fraction_of_limit();
    return bytes > 0 && std::isfinite(fraction) && fraction > UNRELIABLE_FRACTION;
}

namespace {

// case | bytes | mtsarray | GB/s | lim GB/s | %lim | baseline | speedup: 112 columns
constexpr int CASE_WIDTH = 52;
constexpr const char* ROW_FORMAT = "%-52s %9s %9s %7s %7s %5s %9s %7s\n";

}  // namespace

void print_wrapped(const std::string& text, size_t indent) {
    const size_t width = TABLE_COLUMNS - indent;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = std::min(text.size(), start + width);
        if (end < text.size()) {
            const size_t space = text.rfind(' ', end);
            if (space != std::string::npos && space > start) {
                end = space;
            }
        }
        std::printf("%*s%s\n", static_cast<int>(indent), "", text.substr(start, end - start).c_str());
        start = end;
        while (start < text.size() && text[start] == ' ') {
            start++;
        }
    }
}

void Table::header(const std::string& group, const std::string& device, const std::string& limit,
                   const std::string& baseline) {
    std::printf("\n");
    print_wrapped("== " + group + " on " + device + " | limit: " + limit + " | baseline: " + baseline, 0);
    std::printf(ROW_FORMAT, "case", "bytes", "mtsarray", "GB/s", "lim GB/s", "%lim", "baseline", "speedup");
    std::fflush(stdout);
}

void Table::print(const Row& row) {
    // a name longer than its column gets a line of its own
    std::string name = row.name;
    if (name.size() > static_cast<size_t>(CASE_WIDTH)) {
        std::printf("%s\n", name.c_str());
        name = "";
    }
    const std::string percent = format_percent(row.fraction_of_limit()) + (row.unreliable() ? "?" : "");
    std::printf(ROW_FORMAT, name.c_str(), row.bytes > 0 ? format_bytes(row.bytes).c_str() : "-",
                format_seconds(row.seconds).c_str(),
                row.bytes > 0 ? format_bandwidth(row.bandwidth()).c_str() : "-",
                row.bytes > 0 ? format_bandwidth(row.limit_bandwidth()).c_str() : "-", percent.c_str(),
                format_seconds(row.baseline_seconds).c_str(),
                row.baseline_does_no_work ? "no work" : format_ratio(row.speedup(), "x").c_str());
    if (!row.targets.empty()) {
        print_wrapped(targets_text(row), 4);
    }
    if (row.unreliable()) {
        print_wrapped("UNRELIABLE: " + format_percent(row.fraction_of_limit()) + " of " + row.limit_name +
                          " on the same bytes is above what the hardware allows: other work disturbed the "
                          "row or its limit (rerun on a quiet machine)",
                      4);
    }
    if (!row.note.empty()) {
        print_wrapped(row.note, 4);
    }
    std::fflush(stdout);
}

size_t Table::summary(const std::vector<Row>& rows) const {
    size_t pass = 0;
    size_t miss = 0;
    std::vector<std::string> missed;
    for (const auto& row : rows) {
        for (const auto& target : row.targets) {
            if (target.pass) {
                pass++;
            } else {
                miss++;
                missed.push_back(row.group + " " + row.device + " " + row.name + ": " + target.name);
            }
        }
    }
    size_t unreliable = 0;
    for (const auto& row : rows) {
        unreliable += row.unreliable() ? 1 : 0;
    }
    std::printf("\n== targets: %zu PASS, %zu MISS (%zu rows, %zu unreliable)\n", pass, miss, rows.size(),
                unreliable);
    for (const auto& line : missed) {
        print_wrapped("MISS " + line, 3);
    }
    return miss;
}

void write_json(const std::string& path, const Options& options, const std::vector<Row>& rows) {
    std::ofstream file(path);
    if (!file) {
        throw std::runtime_error("can not open '" + path + "' for writing");
    }
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    const char* mode = options.mode == Mode::full ? "full" : options.smoke() ? "smoke" : "quick";

    int32_t host_threads = 0;
    if (mtsarray_get_num_threads(&host_threads) != MTS_SUCCESS) {
        host_threads = -1;
    }
    // what the figures were measured on and with: enough to compare two files
    file << "{\n  \"machine\": \"" << json_escape(describe_machine()) << "\",\n";
    file << "  \"cpu_model\": \"" << json_escape(cpu_model()) << "\", \"cpus\": "
         << std::thread::hardware_concurrency() << ", \"host_threads\": " << host_threads << ",\n";
    file << "  \"mtsarray_version\": \"" << json_escape(mtsarray_version()) << "\", \"commit\": \""
         << json_escape(build_info::commit) << "\", \"metatensor_version\": \"" << json_escape(mts_version())
         << "\",\n";
    file << "  \"compiler\": \"" << json_escape(build_info::compiler) << "\", \"cuda_compiler\": \""
         << json_escape(build_info::cuda_compiler) << "\", \"build_type\": \""
         << json_escape(build_info::build_type) << "\",\n";
    file << "  \"date\": \"" << date << "\",\n  \"mode\": \"" << mode << "\",\n";
    file << "  \"rows\": [\n";
    for (size_t i = 0; i < rows.size(); i++) {
        const Row& row = rows[i];
        file << "    {\"group\": \"" << json_escape(row.group) << "\", \"device\": \""
             << json_escape(row.device) << "\", \"case\": \"" << json_escape(row.name) << "\",\n";
        file << "     \"parameters\": {";
        for (size_t p = 0; p < row.parameters.size(); p++) {
            file << (p == 0 ? "" : ", ") << "\"" << json_escape(row.parameters[p].first)
                 << "\": \"" << json_escape(row.parameters[p].second) << "\"";
        }
        file << "},\n";
        file << "     \"bytes\": " << json_number(row.bytes)
             << ", \"run_bytes\": " << json_number(row.run_bytes)
             << ", \"seconds\": " << json_number(row.seconds)
             << ", \"device_seconds\": " << json_number(row.device_seconds) << ",\n";
        file << "     \"limit\": \"" << json_escape(row.limit_name)
             << "\", \"limit_seconds\": " << json_number(row.limit_seconds)
             << ", \"fraction_of_limit\": " << json_number(row.fraction_of_limit()) << ",\n";
        file << "     \"baseline\": \"" << json_escape(row.baseline_name)
             << "\", \"baseline_seconds\": " << json_number(row.baseline_seconds)
             << ", \"speedup_over_baseline\": " << json_number(row.speedup())
             << ", \"baseline_does_no_work\": " << (row.baseline_does_no_work ? "true" : "false")
             << ", \"unreliable\": " << (row.unreliable() ? "true" : "false") << ",\n";
        file << "     \"measurements\": {";
        for (size_t m = 0; m < row.measurements.size(); m++) {
            file << (m == 0 ? "" : ", ") << "\"" << json_escape(row.measurements[m].first)
                 << "\": " << json_number(row.measurements[m].second);
        }
        file << "},\n";
        file << "     \"targets\": [";
        for (size_t t = 0; t < row.targets.size(); t++) {
            file << (t == 0 ? "" : ", ") << "{\"name\": \"" << json_escape(row.targets[t].name)
                 << "\", \"pass\": " << (row.targets[t].pass ? "true" : "false") << "}";
        }
        file << "], \"note\": \"" << json_escape(row.note) << "\"}"
             << (i + 1 == rows.size() ? "\n" : ",\n");
    }
    file << "  ]\n}\n";
}

std::string cpu_model() {
    std::string model = "unknown CPU";
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("model name", 0) == 0) {
            const auto colon = line.find(':');
            if (colon != std::string::npos) {
                model = line.substr(colon + 2);
            }
            break;
        }
    }
    return model;
}

std::string describe_machine() {
    std::ostringstream text;
    text << cpu_model() << ", " << std::thread::hardware_concurrency() << " CPUs";
    return text.str();
}

std::string format_seconds(double seconds) {
    if (!std::isfinite(seconds)) {
        return "-";
    }
    char buffer[32];
    if (seconds < 1e-6) {
        std::snprintf(buffer, sizeof(buffer), "%.0f ns", seconds * 1e9);
    } else if (seconds < 1e-3) {
        std::snprintf(buffer, sizeof(buffer), "%.1f us", seconds * 1e6);
    } else if (seconds < 1) {
        std::snprintf(buffer, sizeof(buffer), "%.2f ms", seconds * 1e3);
    } else {
        std::snprintf(buffer, sizeof(buffer), "%.2f s", seconds);
    }
    return buffer;
}

std::string format_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t unit = 0;
    while (bytes >= 1024 && unit < 4) {
        bytes /= 1024;
        unit++;
    }
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
    return buffer;
}

std::string format_count(double count) {
    char buffer[32];
    const double exponent = std::floor(std::log10(std::max(count, 1.0)));
    const double mantissa = count / std::pow(10.0, exponent);
    if (count >= 1000 && std::fabs(mantissa - std::round(mantissa)) < 1e-9) {
        std::snprintf(buffer, sizeof(buffer), "%.0fe%.0f", mantissa, exponent);  // 1e4, 2e3
    } else {
        std::snprintf(buffer, sizeof(buffer), "%.0f", count);
    }
    return buffer;
}

}  // namespace bench
