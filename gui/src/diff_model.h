#pragma once
// Rows of a `sightline diff` (metrics, kernel classes or ops) as an item model.
#include "sightline/report/diff.h"

#include <QAbstractTableModel>

namespace sightline::gui {

class DiffModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using QAbstractTableModel::QAbstractTableModel;
    void setRows(std::vector<DiffRow> rows);
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::vector<DiffRow> m_rows;
};

} // namespace sightline::gui
