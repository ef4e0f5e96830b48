#pragma once
// The value of an environment variable, as the variables of mtsarray read it:
// blanks around it do not count.

#include <cctype>
#include <string>

namespace mtsarray::detail::cpu {

/// `text` without the blanks (std::isspace) at either end.
inline std::string without_surrounding_blanks(const std::string& text) {
    size_t begin = 0;
    size_t end = text.size();
    while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])) != 0) {
        begin++;
    }
    while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])) != 0) {
        end--;
    }
    return text.substr(begin, end - begin);
}

}  // namespace mtsarray::detail::cpu
