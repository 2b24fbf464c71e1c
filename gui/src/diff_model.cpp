#include "diff_model.h"

#include <QColor>

#include <cmath>

namespace sightline::gui {

void DiffModel::setRows(std::vector<DiffRow> rows) {
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
}

int DiffModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }
int DiffModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 6; }

QVariant DiffModel::headerData(int section, Qt::Orientation o, int role) const {
    static const char* names[] = {"Name", "Kind", "Before", "After", "Change", "Change %"};
    if (o == Qt::Horizontal && role == Qt::DisplayRole && section >= 0 && section < 6) return QString(names[section]);
    return {};
}

QVariant DiffModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(m_rows.size()) || index.column() >= 6) return {};
    const DiffRow& r = m_rows[size_t(index.row())];
    auto num = [](double v) { return std::isnan(v) ? QVariant(QString("-")) : QVariant(QString::number(v, 'g', 4)); };
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case 0: return QString::fromStdString(r.name);
        case 1: return QString::fromStdString(r.detail);
        case 2: return num(r.before);
        case 3: return num(r.after);
        case 4: return QString::number(r.delta(), 'g', 4);
        case 5: return num(r.deltaPct());
        }
    }
    if (role == Qt::ForegroundRole && index.column() >= 4 && r.delta() != 0)
        return QColor(r.delta() > 0 ? "#c0392b" : "#1e8449");
    if (role == Qt::TextAlignmentRole && index.column() >= 2) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

} // namespace sightline::gui
