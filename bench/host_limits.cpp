#include "host_limits.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <utility>

#include "host_team.hpp"

namespace bench {

HostTeam& team_of(size_t threads) {
    static std::map<size_t, std::unique_ptr<HostTeam>> teams;
    auto& team = teams[threads];
    if (!team) {
        team = std::make_unique<HostTeam>(threads);
    }
    return *team;
}

namespace {

/// Member `index` of `count`'s share of `bytes`: page-sized pieces.
std::pair<size_t, size_t> share_of(size_t bytes, size_t index, size_t count) {
    const size_t pages = (bytes + 4095) / 4096;
    const size_t begin = std::min(bytes, pages * index / count * 4096);
    const size_t end = std::min(bytes, pages * (index + 1) / count * 4096);
    return {begin, end};
}

}  // namespace

size_t host_threads() {
    int32_t count = 1;
    check(mtsarray_get_num_threads(&count));
    return static_cast<size_t>(count);
}

size_t threads_for(size_t bytes) {
    const size_t count = host_threads();
    if (bytes < (size_t(1) << 20) || count == 1) {
        return 1;
    }
    return std::min<size_t>(count, bytes / (size_t(256) << 10));
}

TimedBatch parallel_memcpy(void* destination, const void* source, size_t bytes, size_t threads) {
    auto* to = static_cast<char*>(destination);
    const auto* from = static_cast<const char*>(source);
    if (threads == 1) {
        return wall_clock([=] {
            std::memcpy(to, from, bytes);
            clobber(to);
        });
    }
    HostTeam& team = team_of(threads);
    return [&team, to, from, bytes](size_t iterations) {
        return team.run(iterations, [=](size_t index, size_t count) {
            const auto share = share_of(bytes, index, count);
            std::memcpy(to + share.first, from + share.first, share.second - share.first);
            clobber(to);
        });
    };
}

TimedBatch parallel_allocate_and_write(size_t bytes, const void* source, size_t threads) {
    const auto* from = static_cast<const char*>(source);
    auto write = [from, bytes](char* memory, size_t index, size_t count) {
        const auto share = share_of(bytes, index, count);
        if (from != nullptr) {
            std::memcpy(memory + share.first, from + share.first, share.second - share.first);
        } else {
            std::memset(memory + share.first, 0x3c, share.second - share.first);
        }
        clobber(memory);
    };
    if (threads == 1) {
        return wall_clock([=] {
            auto* memory = static_cast<char*>(std::malloc(bytes));
            write(memory, 0, 1);
            std::free(memory);
        });
    }
    HostTeam& team = team_of(threads);
    return [&team, write, bytes](size_t iterations) {
        auto memory = std::make_shared<char*>(nullptr);
        return team.run(
            iterations, [=](size_t index, size_t count) { write(*memory, index, count); },
            [=] { *memory = static_cast<char*>(std::malloc(bytes)); },
            [=] {
                std::free(*memory);
                *memory = nullptr;
            });
    };
}

TimedBatch warm(TimedBatch batch) {
    return [batch = std::move(batch)](size_t iterations) {
        (void)batch(2);
        return batch(iterations);
    };
}

std::string threads_suffix(size_t threads) {
    return threads == 0 ? "" : threads == 1 ? " [1 thread]" : " [" + std::to_string(threads) + " threads]";
}
}  // namespace bench
