#pragma once
// Item models over a report: ops, kernel classes and findings. Models only; views are separate.
// Display text is formatted; Qt::UserRole holds the raw number for sorting.
#include "sightline/report/report.h"

#include <QAbstractTableModel>

namespace sightline::gui {

class OpTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using QAbstractTableModel::QAbstractTableModel;
    void setRows(std::vector<OpRow> rows);
    const OpRow& row(int r) const { return m_rows[size_t(r)]; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::vector<OpRow> m_rows;
};

class KernelClassModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using QAbstractTableModel::QAbstractTableModel;
    void setRows(std::vector<GpuRow> rows);
    const GpuRow& row(int r) const { return m_rows[size_t(r)]; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::vector<GpuRow> m_rows;
};

class FindingsModel : public QAbstractTableModel {
    Q_OBJECT
public:
    using QAbstractTableModel::QAbstractTableModel;
    void setFindings(std::vector<Finding> findings);
    const Finding& finding(int r) const { return m_findings[size_t(r)]; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

private:
    std::vector<Finding> m_findings;
};

} // namespace sightline::gui
