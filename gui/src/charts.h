#pragma once
// Small charts drawn with QPainter: time per step, and GPU time by kernel family.
#include "trace_document.h"

#include <QWidget>

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
};

} // namespace sightline::gui
