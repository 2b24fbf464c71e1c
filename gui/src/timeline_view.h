#pragma once
// The timeline: CPU threads (one row per nesting depth) and GPU streams, zoomed with the wheel or
// W/S, panned by dragging or A/D (Perfetto's keys), drawn with level of detail: events narrower
// than a pixel are merged per pixel column, and whole-trace views come from each track's
// precomputed coverage.
#include "trace_document.h"

#include <QWidget>

class QPainter;

#include <optional>
#include <set>

class QPainter;

namespace sightline::gui {

class TimelineView : public QWidget {
    Q_OBJECT
public:
    explicit TimelineView(QWidget* parent = nullptr);

    void setDocument(const TraceDocument* doc);
    void setRange(int64_t begin_ns, int64_t end_ns);
    // Off: ranges may reach past the trace's ends (the Diff tab lines two traces up at one scale).
    void setClampToTrace(bool on) { m_clamp = on; }
    int64_t rangeBegin() const { return m_t0; }
    int64_t rangeEnd() const { return m_t1; }
    void zoom(double factor, double anchor_fraction = 0.5);
    void pan(double fraction);
    // GPU events drawn highlighted (a finding's evidence, a table selection).
    void setHighlightedClasses(const std::set<std::string>& classes);
    // CPU events drawn highlighted: the ops of these names (a table selection, a finding).
    void setHighlightedOps(const std::set<std::string>& names);
    void selectCpuEvent(std::optional<uint32_t> index);

    static constexpr int kRowHeight = 18;
    static constexpr int kLabelWidth = 170;

    // The range selected with shift-drag (empty when none).
    std::optional<std::pair<int64_t, int64_t>> selection() const { return m_selection; }
    void setSelection(std::optional<std::pair<int64_t, int64_t>> range);
    static constexpr int kStepsRowTop = 20;

signals:
    void rangeChanged(int64_t begin_ns, int64_t end_ns);
    void cpuEventSelected(int index);
    void selectionChanged(int64_t begin_ns, int64_t end_ns);

protected:
    void paintEvent(QPaintEvent* event) override;
    void wheelEvent(QWheelEvent* event) override;
    void mousePressEvent(QMouseEvent* event) override;
    void mouseMoveEvent(QMouseEvent* event) override;
    void mouseReleaseEvent(QMouseEvent* event) override;
    void keyPressEvent(QKeyEvent* event) override;
    bool event(QEvent* event) override;

private:
    // The parts of a frame, in the order painted.
    void paintSteps(QPainter& p);
    void paintCoverage(QPainter& p, const Track& track, int y, double ns_per_px, double bucket_ns);
    void paintEvents(QPainter& p, const Track& track, int y);
    void paintCounter(QPainter& p, const Track& track, int y, double ns_per_px) const;
    void paintSelection(QPainter& p);
    void paintLinks(QPainter& p);
    struct Hit {
        const Track* track = nullptr;
        uint32_t index = 0;
    };
    std::optional<Hit> hitAt(QPoint pos) const;
    double xOf(int64_t ns) const;
    int64_t nsAt(double x) const;
    int trackTop(size_t track) const;

    const TraceDocument* m_doc = nullptr;
    int64_t m_t0 = 0, m_t1 = 1;
    bool m_clamp = true;
    std::set<uint32_t> m_highlight_names; // name ids of highlighted classes
    std::set<uint32_t> m_highlight_ops;   // name ids of highlighted ops
    std::optional<uint32_t> m_selected;
    std::optional<QPoint> m_drag_from;
    int64_t m_drag_t0 = 0;
    bool m_selecting = false;
    std::optional<std::pair<int64_t, int64_t>> m_selection;
};

} // namespace sightline::gui
