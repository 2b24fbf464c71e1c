#include "progress.h"

#include <algorithm>
#include <cstdio>

#include <unistd.h>

namespace sightline {

ProgressBar::ProgressBar(std::string label)
    : m_label(std::move(label)), m_enabled(isatty(STDERR_FILENO) == 1),
      m_start(std::chrono::steady_clock::now()), m_last_draw(m_start) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(double fraction) {
    if (!m_enabled)
        return;
    const auto now = std::chrono::steady_clock::now();
    const int permille = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 1000);
    // Stay quiet for short jobs; redraw at most ten times a second.
    if (now - m_start < std::chrono::milliseconds(300) || permille == m_last_permille ||
        now - m_last_draw < std::chrono::milliseconds(100))
        return;
    m_last_permille = permille;
    m_last_draw = now;
    constexpr int kWidth = 30;
    const int filled = permille * kWidth / 1000;
    const double secs = std::chrono::duration<double>(now - m_start).count();
    std::fprintf(stderr, "\r%s [%.*s%*s] %3d%% %5.1fs", m_label.c_str(), filled,
                 "##############################", kWidth - filled, "", permille / 10, secs);
    std::fflush(stderr);
    m_drawn = true;
}

void ProgressBar::finish() {
    if (m_enabled && m_drawn) {
        std::fprintf(stderr, "\r\033[K");
        std::fflush(stderr);
        m_drawn = false;
    }
}

} // namespace sightline
