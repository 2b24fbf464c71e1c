#pragma once
// Small charts drawn with QPainter: time per step, and GPU time by kernel family.
#include "trace_document.h"

#include <QWidget>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sightline::gui {

class ChartsView : public QWidget {
    Q_OBJECT
public:
    explicit ChartsView(QWidget* parent = nullptr);
    void setDocument(const TraceDocument* doc);

protected:
    void paintEvent(QPaintEvent* event) override;

private:
    const TraceDocument* m_doc = nullptr;
    // Computed once per document, drawn on every paint.
    std::vector<std::pair<int64_t, std::string>> m_families; // GPU time by family, largest first
    int64_t m_family_total = 0;
    std::vector<uint64_t> m_histogram; // kernelDurationHistogram of the trace
};

} // namespace sightline::gui
