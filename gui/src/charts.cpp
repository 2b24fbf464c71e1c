#include "charts.h"

#include <QPainter>

#include <algorithm>
#include <map>

namespace sightline::gui {

ChartsView::ChartsView(QWidget* parent) : QWidget(parent) { setMinimumHeight(160); }

void ChartsView::setDocument(const TraceDocument* doc) {
    m_doc = doc;
    m_families.clear();
    m_family_total = 0;
    m_histogram.clear();
    if (doc) {
        std::map<std::string, int64_t> fam;
        for (const GpuRow& c : doc->report().tables.kernel_classes) {
            fam[c.family] += c.total_ns;
            m_family_total += c.total_ns;
        }
        for (const auto& [f, ns] : fam) m_families.emplace_back(ns, f);
        std::sort(m_families.rbegin(), m_families.rend());
        m_histogram = kernelDurationHistogram(doc->trace());
    }
    update();
}

void ChartsView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), Qt::white);
    if (!m_doc) return;
    const int half = width() / 3;
    // Time per step: total bar, GPU-busy part darker.
    const auto& steps = m_doc->report().metrics.steps;
    p.setPen(QColor("#1b2631"));
    p.drawText(10, 16, "Time per step (dark: GPU busy)");
    int64_t longest = 1;
    for (const StepMetrics& s : steps) longest = std::max(longest, s.time_ns);
    const int n = int(steps.size());
    const int area_h = height() - 40;
    for (int i = 0; i < n; ++i) {
        const double bw = double(half - 30) / std::max(1, n);
        const int x = 10 + int(i * bw);
        const int h = int(double(steps[size_t(i)].time_ns) / double(longest) * area_h);
        const int hb = int(double(steps[size_t(i)].gpu_busy_ns) / double(longest) * area_h);
        p.fillRect(x, height() - 10 - h, std::max(1, int(bw) - 2), h, QColor("#aed6f1"));
        p.fillRect(x, height() - 10 - hb, std::max(1, int(bw) - 2), hb, QColor("#2874a6"));
    }
    // GPU time by family.
    const int64_t total = m_family_total;
    p.drawText(half + 10, 16, "GPU time by kernel family");
    int y = 26;
    for (const auto& [ns, f] : m_families) {
        if (y > height() - 14) break;
        const double share = total ? double(ns) / double(total) : 0;
        p.fillRect(half + 110, y, int(share * (half - 170)), 12, QColor("#e59866"));
        p.drawText(QRect(half + 10, y - 2, 96, 16), Qt::AlignRight | Qt::AlignVCenter, QString::fromStdString(f));
        p.drawText(half + 116 + int(share * (half - 170)), y + 11, QString::number(share * 100, 'f', 1) + "%");
        y += 16;
    }
    // Kernel duration histogram (log2 buckets of microseconds).
    const std::vector<uint64_t>& hist = m_histogram;
    size_t last = 0;
    uint64_t most = 1;
    for (size_t k = 0; k < hist.size(); ++k)
        if (hist[k]) {
            last = k;
            most = std::max(most, hist[k]);
        }
    const int x0 = 2 * half + 10;
    p.drawText(x0, 16, "Kernels by duration (us, log2 buckets)");
    const double bw = double(half - 30) / double(last + 1);
    for (size_t k = 0; k <= last; ++k) {
        const int h = int(double(hist[k]) / double(most) * (height() - 56));
        p.fillRect(x0 + int(k * bw), height() - 26 - h, std::max(1, int(bw) - 2), h, QColor("#a569bd"));
        if (k % 2 == 0)
            p.drawText(QRect(x0 + int(k * bw) - 10, height() - 24, int(bw) + 20, 14), Qt::AlignCenter,
                       k == 0 ? QString("<2") : QString::number(1u << k));
    }
}

} // namespace sightline::gui
