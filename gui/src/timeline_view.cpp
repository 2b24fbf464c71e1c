#include "timeline_view.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QWheelEvent>

#include <algorithm>
#include <cmath>
#include <map>

namespace sightline::gui {

namespace {

QColor familyColor(const std::string& family) {
    static const std::map<std::string, QColor> colors = {
        {"gemm", QColor("#2e86c1")}, {"attention", QColor("#8e44ad")}, {"elementwise", QColor("#e67e22")}, {"reduction", QColor("#16a085")}, {"norm", QColor("#27ae60")}, {"softmax", QColor("#c0392b")}, {"memcpy", QColor("#7f8c8d")}, {"memset", QColor("#95a5a6")}, {"optimizer", QColor("#d4ac0d")}, {"triton", QColor("#1abc9c")}, {"conv", QColor("#a04000")}, {"nccl", QColor("#34495e")}, {"solve", QColor("#6c3483")}, {"indexing", QColor("#117864")}, {"copy", QColor("#b9770e")}};
    auto it = colors.find(family);
    return it == colors.end() ? QColor("#5d6d7e") : it->second;
}

QColor cpuColor(std::string_view name) {
    const size_t h = std::hash<std::string_view>{}(name);
    return QColor::fromHsl(int(h % 360), 90, 170);
}

} // namespace

TimelineView::TimelineView(QWidget* parent) : QWidget(parent) {
    setMouseTracking(true);
    setFocusPolicy(Qt::StrongFocus);
    setMinimumHeight(200);
}

void TimelineView::setDocument(const TraceDocument* doc) {
    m_doc = doc;
    m_selected.reset();
    m_selection.reset();
    m_highlight_names.clear(); // name ids of another trace
    m_highlight_ops.clear();
    if (doc) setRange(doc->begin(), doc->end());
    setMinimumHeight(doc ? std::min(2000, int(doc->tracks().size()) * kRowHeight + 24) : 200);
    update();
}

void TimelineView::setRange(int64_t begin_ns, int64_t end_ns) {
    end_ns = std::max(end_ns, begin_ns + 1000); // no closer than 1 us across
    if (m_doc && m_clamp) {
        const int64_t span = m_doc->end() - m_doc->begin();
        if (end_ns - begin_ns > span) {
            begin_ns = m_doc->begin();
            end_ns = m_doc->end();
        }
        if (begin_ns < m_doc->begin()) {
            end_ns += m_doc->begin() - begin_ns;
            begin_ns = m_doc->begin();
        }
        if (end_ns > m_doc->end()) {
            begin_ns -= end_ns - m_doc->end();
            end_ns = m_doc->end();
        }
    }
    m_t0 = begin_ns;
    m_t1 = std::max(end_ns, begin_ns + 1);
    emit rangeChanged(m_t0, m_t1);
    update();
}

void TimelineView::zoom(double factor, double anchor) {
    const double span = double(m_t1 - m_t0);
    const double at = double(m_t0) + anchor * span;
    const double next = span * factor;
    setRange(int64_t(at - anchor * next), int64_t(at + (1 - anchor) * next));
}

void TimelineView::pan(double fraction) {
    const int64_t d = int64_t(double(m_t1 - m_t0) * fraction);
    setRange(m_t0 + d, m_t1 + d);
}

void TimelineView::setHighlightedClasses(const std::set<std::string>& classes) {
    m_highlight_names.clear();
    if (m_doc) {
        const Taxonomy& tax = Taxonomy::builtin();
        std::set<uint32_t> seen;
        for (const GpuEvent& g : m_doc->trace().gpu) {
            if (!seen.insert(g.name.value).second) continue;
            if (classes.count(tax.classify(m_doc->trace().str(g.name)).name)) m_highlight_names.insert(g.name.value);
        }
    }
    update();
}

void TimelineView::setHighlightedOps(const std::set<std::string>& names) {
    m_highlight_ops.clear();
    if (m_doc) {
        const Trace& t = m_doc->trace();
        for (uint32_t i = 0; i < t.strings.size(); ++i)
            if (names.count(std::string(t.strings.view(StringId{i})))) m_highlight_ops.insert(i);
    }
    update();
}

void TimelineView::selectCpuEvent(std::optional<uint32_t> index) {
    m_selected = index;
    update();
}

double TimelineView::xOf(int64_t ns) const {
    const double w = std::max(1, width() - kLabelWidth);
    return kLabelWidth + double(ns - m_t0) / double(m_t1 - m_t0) * w;
}

int64_t TimelineView::nsAt(double x) const {
    const double w = std::max(1, width() - kLabelWidth);
    return m_t0 + int64_t((x - kLabelWidth) / w * double(m_t1 - m_t0));
}

// Row 0 under the axis shows the steps; tracks follow.
int TimelineView::trackTop(size_t track) const { return kStepsRowTop + kRowHeight + int(track) * kRowHeight; }

void TimelineView::setSelection(std::optional<std::pair<int64_t, int64_t>> range) {
    m_selection = range;
    if (range) emit selectionChanged(range->first, range->second);
    update();
}

// A counter track: per pixel column, the metric's average there as a bar from the row's bottom
// (0 to 100%), its value in the label.
void TimelineView::paintCounter(QPainter& p, const Track& tr, int y, double ns_per_px) const {
    const QColor c = tr.metric == HwMetric::TensorActive ? QColor("#ca6f1e") : tr.metric == HwMetric::SmActive ? QColor("#148f77")
                                                                                                               : QColor("#7d3c98");
    const int w = width() - kLabelWidth, h = kRowHeight - 4;
    for (int px = 0; px < w; ++px) {
        const int64_t a = m_t0 + int64_t(px * ns_per_px), b = m_t0 + int64_t((px + 1) * ns_per_px);
        const double v = m_doc->counterValue(tr, a, std::max(b, a + 1));
        if (std::isnan(v) || v <= 0) continue;
        const int bar = std::max(1, int(std::min(100.0, v) / 100.0 * h + 0.5));
        p.fillRect(kLabelWidth + px, y + 2 + h - bar, 1, bar, c);
    }
}

void TimelineView::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.fillRect(rect(), QColor("#fbfcfc"));
    if (!m_doc) {
        p.drawText(rect(), Qt::AlignCenter, "Open a trace (File > Open, or drop a file here)");
        return;
    }
    const int w = width() - kLabelWidth;
    // Time axis.
    p.setPen(QColor("#566573"));
    const double span_us = double(m_t1 - m_t0) / 1000.0;
    p.drawText(kLabelWidth + 4, 14, QString("%1 ms visible").arg(span_us / 1000.0, 0, 'f', 3));
    const auto& tracks = m_doc->tracks();
    const double ns_per_px = double(m_t1 - m_t0) / std::max(1, w);
    paintSteps(p);
    const double bucket_ns = double(m_doc->end() - m_doc->begin()) / double(TraceDocument::kBuckets);
    for (size_t ti = 0; ti < tracks.size(); ++ti) {
        const Track& tr = tracks[ti];
        const int y = trackTop(ti);
        if (y > height()) break;
        if (ti % 2) p.fillRect(0, y, width(), kRowHeight, QColor("#f2f4f4"));
        p.setPen(QColor("#1b2631"));
        p.drawText(QRect(4, y, kLabelWidth - 8, kRowHeight), Qt::AlignVCenter | Qt::AlignLeft, QString::fromStdString(tr.label));
        if (tr.counter) {
            paintCounter(p, tr, y, ns_per_px);
            continue;
        }
        if (tr.events.empty()) continue;
        // Level of detail 1: the whole trace (or most of it) in view: the coverage buckets;
        // level 2: the events.
        if (ns_per_px >= bucket_ns) paintCoverage(p, tr, y, ns_per_px, bucket_ns);
        else paintEvents(p, tr, y);
    }
    paintSelection(p);
    paintLinks(p);
}

void TimelineView::paintSteps(QPainter& p) {
    p.setPen(QColor("#1b2631"));
    p.drawText(QRect(4, kStepsRowTop, kLabelWidth - 8, kRowHeight), Qt::AlignVCenter | Qt::AlignLeft, "Steps");
    const auto& steps = m_doc->report().metrics.steps;
    for (size_t si = 0; si < steps.size(); ++si) {
        const StepMetrics& sm = steps[si];
        // On the GPU's clock (docs/metrics.md): where the step's GPU work begins and ends.
        const double x0 = std::max<double>(kLabelWidth, xOf(sm.begin_ns));
        const double x1 = std::min<double>(width(), xOf(sm.begin_ns + sm.time_ns));
        if (x1 <= x0) continue;
        const QRectF r(x0, kStepsRowTop + 2, x1 - x0, kRowHeight - 4);
        p.fillRect(r, si % 2 ? QColor("#abebc6") : QColor("#82e0aa"));
        if (r.width() > 30)
            p.drawText(r.adjusted(3, 0, 0, 0), Qt::AlignVCenter | Qt::AlignLeft,
                       p.fontMetrics().elidedText(QString::fromStdString(sm.step.name + " " + formatDuration(sm.time_ns)),
                                                  Qt::ElideRight, int(r.width()) - 4));
    }
}

void TimelineView::paintCoverage(QPainter& p, const Track& tr, int y, double ns_per_px, double bucket_ns) {
    const int w = width() - kLabelWidth;
    const QColor c = tr.gpu ? QColor("#2e86c1") : QColor("#af7ac5");
    for (int px = 0; px < w; ++px) {
        const int64_t a = m_t0 + int64_t(px * ns_per_px), b = m_t0 + int64_t((px + 1) * ns_per_px);
        const size_t ba = size_t(std::max<int64_t>(0, a - m_doc->begin()) / bucket_ns);
        const size_t bb = std::min(TraceDocument::kBuckets, size_t(std::max<int64_t>(0, b - m_doc->begin()) / bucket_ns) + 1);
        float cover = 0;
        for (size_t k = ba; k < bb; ++k) cover = std::max(cover, tr.coverage[k]);
        if (cover > 0) {
            QColor cc = c;
            cc.setAlphaF(0.25 + 0.75 * cover);
            p.fillRect(kLabelWidth + px, y + 2, 1, kRowHeight - 4, cc);
        }
    }
}

// A track's events in view; those narrower than a pixel are merged per pixel column.
void TimelineView::paintEvents(QPainter& p, const Track& tr, int y) {
    const Trace& t = m_doc->trace();
    auto startOf = [&](uint32_t e) { return tr.gpu ? t.gpu[e].start_ns : t.cpu[e].start_ns; };
    auto endOf = [&](uint32_t e) { return tr.gpu ? t.gpu[e].end_ns : t.cpu[e].end_ns; };
    auto first = std::lower_bound(tr.max_end.begin(), tr.max_end.end(), m_t0);
    size_t k = size_t(first - tr.max_end.begin());
    int last_px = -1;
    const bool highlighting = tr.gpu ? !m_highlight_names.empty() : !m_highlight_ops.empty();
    for (; k < tr.events.size(); ++k) {
        const uint32_t e = tr.events[k];
        const int64_t s = startOf(e);
        if (s > m_t1) break;
        const int64_t en = endOf(e);
        if (en < m_t0) continue;
        const double x0 = std::max<double>(kLabelWidth, xOf(s)), x1 = std::min<double>(width(), xOf(en));
        // A narrow event in a pixel column already drawn is skipped before any lookup (at mid
        // zoom most events are), unless highlights may need it drawn on top.
        if (x1 - x0 < 1.0 && int(x0) == last_px && !highlighting) continue;
        QColor c = tr.gpu ? familyColor(m_doc->gpuFamily()[e]) : cpuColor(t.str(t.cpu[e].name));
        const bool highlighted = tr.gpu ? m_highlight_names.count(t.gpu[e].name.value) > 0
                                        : m_highlight_ops.count(t.cpu[e].name.value) > 0;
        const bool selected = !tr.gpu && m_selected && *m_selected == e;
        if (!highlighted && highlighting) c = c.lighter(170);
        if (x1 - x0 < 1.0) {
            const int px = int(x0);
            if (px == last_px && !highlighted) continue;
            last_px = px;
            p.fillRect(px, y + 2, 1, kRowHeight - 4, c);
            continue;
        }
        const QRectF r(x0, y + 2, x1 - x0, kRowHeight - 4);
        p.fillRect(r, c);
        if (highlighted || selected) {
            p.setPen(QPen(QColor("#000000"), selected ? 2 : 1));
            p.drawRect(r);
        }
        if (r.width() > 40) {
            p.setPen(QColor("#17202a"));
            const std::string_view name = tr.gpu ? t.str(t.gpu[e].name) : t.str(t.cpu[e].name);
            p.drawText(r.adjusted(3, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                       p.fontMetrics().elidedText(QString::fromUtf8(name.data(), int(name.size())), Qt::ElideRight, int(r.width()) - 5));
        }
    }
}

// The selected range.
void TimelineView::paintSelection(QPainter& p) {
    if (!m_selection) return;
    const double x0 = xOf(m_selection->first), x1 = xOf(m_selection->second);
    p.fillRect(QRectF(x0, kStepsRowTop, x1 - x0, height()), QColor(52, 152, 219, 40));
    p.setPen(QColor("#2471a3"));
    p.drawLine(QPointF(x0, kStepsRowTop), QPointF(x0, height()));
    p.drawLine(QPointF(x1, kStepsRowTop), QPointF(x1, height()));
}

// Op -> kernel links of the selected op.
void TimelineView::paintLinks(QPainter& p) {
    if (!m_selected) return;
    const Trace& t = m_doc->trace();
    const CpuEvent& op = t.cpu[*m_selected];
    const int op_track = std::max(0, m_doc->trackOfCpu(*m_selected));
    p.setPen(QPen(QColor("#c0392b"), 1.5));
    for (uint32_t g : m_doc->kernelsOf(*m_selected)) {
        const int ti = m_doc->trackOfStream(t.gpu[g].device, t.gpu[g].stream);
        if (ti < 0) continue;
        p.drawLine(QPointF(xOf(op.start_ns), trackTop(size_t(op_track)) + kRowHeight / 2.0),
                   QPointF(xOf(t.gpu[g].start_ns), trackTop(size_t(ti)) + kRowHeight / 2.0));
    }
}

std::optional<TimelineView::Hit> TimelineView::hitAt(QPoint pos) const {
    if (!m_doc || pos.x() < kLabelWidth || pos.y() < trackTop(0)) return std::nullopt;
    const size_t ti = size_t((pos.y() - trackTop(0)) / kRowHeight);
    if (ti >= m_doc->tracks().size()) return std::nullopt;
    const Track& tr = m_doc->tracks()[ti];
    const Trace& t = m_doc->trace();
    const int64_t at = nsAt(pos.x());
    const int64_t slop = int64_t(double(m_t1 - m_t0) / std::max(1, width() - kLabelWidth) * 2);
    auto first = std::lower_bound(tr.max_end.begin(), tr.max_end.end(), at - slop);
    for (size_t k = size_t(first - tr.max_end.begin()); k < tr.events.size(); ++k) {
        const uint32_t e = tr.events[k];
        const int64_t s = tr.gpu ? t.gpu[e].start_ns : t.cpu[e].start_ns;
        const int64_t en = tr.gpu ? t.gpu[e].end_ns : t.cpu[e].end_ns;
        if (s > at + slop) break;
        if (en >= at - slop) return Hit{&tr, e};
    }
    return std::nullopt;
}

bool TimelineView::event(QEvent* e) {
    if (e->type() == QEvent::ToolTip && m_doc) {
        auto* help = static_cast<QHelpEvent*>(e);
        if (auto hit = hitAt(help->pos())) {
            const Trace& t = m_doc->trace();
            QString text;
            if (hit->track->gpu) {
                const GpuEvent& g = t.gpu[hit->index];
                const KernelClass k = Taxonomy::builtin().classify(t.str(g.name));
                text = QString("%1\n%2 (%3)\n%4").arg(QString::fromUtf8(t.str(g.name).data(), int(t.str(g.name).size())).left(300), QString::fromStdString(k.name), QString::fromStdString(k.family), QString::fromStdString(formatDuration(g.duration())));
            } else {
                const CpuEvent& c = t.cpu[hit->index];
                text = QString("%1 (%2)\n%3").arg(QString::fromUtf8(t.str(c.name).data(), int(t.str(c.name).size())), toString(c.kind), QString::fromStdString(formatDuration(c.duration())));
            }
            QToolTip::showText(help->globalPos(), text, this);
        } else {
            QToolTip::hideText();
        }
        return true;
    }
    return QWidget::event(e);
}

void TimelineView::wheelEvent(QWheelEvent* e) {
    const double anchor = std::clamp((e->position().x() - kLabelWidth) / std::max(1, width() - kLabelWidth), 0.0, 1.0);
    zoom(e->angleDelta().y() > 0 ? 0.8 : 1.25, anchor);
}

void TimelineView::mousePressEvent(QMouseEvent* e) {
    m_drag_from = e->pos();
    m_drag_t0 = m_t0;
    m_selecting = e->modifiers() & Qt::ShiftModifier;
}

void TimelineView::mouseMoveEvent(QMouseEvent* e) {
    if (!m_drag_from || !(e->buttons() & Qt::LeftButton)) return;
    if (m_selecting) { // shift-drag selects a range: drawn as it grows, announced on release
        const int64_t a = nsAt(m_drag_from->x()), b = nsAt(e->pos().x());
        m_selection = std::make_pair(std::min(a, b), std::max(a, b));
        update();
        return;
    }
    const double dx = e->pos().x() - m_drag_from->x();
    const int64_t d = int64_t(-dx / std::max(1, width() - kLabelWidth) * double(m_t1 - m_t0));
    const int64_t span = m_t1 - m_t0;
    setRange(m_drag_t0 + d, m_drag_t0 + d + span);
}

void TimelineView::mouseReleaseEvent(QMouseEvent* e) {
    // The range summary and the range's tables are computed once, when the drag ends.
    if (m_drag_from && m_selecting && m_selection) setSelection(m_selection);
    if (m_drag_from && !m_selecting && (e->pos() - *m_drag_from).manhattanLength() < 3) {
        auto hit = hitAt(e->pos());
        if (hit && !hit->track->gpu) {
            selectCpuEvent(hit->index);
            emit cpuEventSelected(int(hit->index));
        } else {
            selectCpuEvent(std::nullopt);
        }
    }
    m_drag_from.reset();
}

void TimelineView::keyPressEvent(QKeyEvent* e) {
    switch (e->key()) {
    case Qt::Key_W: zoom(0.8); break;
    case Qt::Key_S: zoom(1.25); break;
    case Qt::Key_A: pan(-0.2); break;
    case Qt::Key_D: pan(0.2); break;
    case Qt::Key_0:
        if (m_doc) setRange(m_doc->begin(), m_doc->end());
        break;
    case Qt::Key_Escape: setSelection(std::nullopt); break;
    default: QWidget::keyPressEvent(e);
    }
}

} // namespace sightline::gui
