#include "table_models.h"

#include <QColor>

namespace sightline::gui {

namespace {
QString dur(int64_t ns) { return QString::fromStdString(formatDuration(ns)); }
QString str(const std::string& s) { return QString::fromStdString(s); }
} // namespace

// ---- ops
void OpTableModel::setRows(std::vector<OpRow> rows) {
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
}
int OpTableModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }
int OpTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 7; }
QVariant OpTableModel::headerData(int section, Qt::Orientation o, int role) const {
    static const char* names[] = {"Name", "Kind", "Calls", "Self CPU", "CPU total", "Self GPU", "GPU total"};
    if (o == Qt::Horizontal && role == Qt::DisplayRole && section >= 0 && section < 7) return QString(names[section]);
    return {};
}
QVariant OpTableModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(m_rows.size()) || index.column() >= 7) return {};
    const OpRow& r = m_rows[size_t(index.row())];
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case 0: return str(r.name);
        case 1: return QString(toString(r.kind));
        case 2: return QVariant::fromValue<qulonglong>(r.calls);
        case 3: return dur(r.self_cpu_ns);
        case 4: return dur(r.cpu_total_ns);
        case 5: return dur(r.self_device_ns);
        case 6: return dur(r.device_total_ns);
        }
    }
    if (role == Qt::UserRole) {
        switch (index.column()) {
        case 0: return str(r.name);
        case 1: return QString(toString(r.kind));
        case 2: return QVariant::fromValue<qulonglong>(r.calls);
        case 3: return QVariant::fromValue<qlonglong>(r.self_cpu_ns);
        case 4: return QVariant::fromValue<qlonglong>(r.cpu_total_ns);
        case 5: return QVariant::fromValue<qlonglong>(r.self_device_ns);
        case 6: return QVariant::fromValue<qlonglong>(r.device_total_ns);
        }
    }
    if (role == Qt::TextAlignmentRole && index.column() >= 2) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

// ---- kernel classes
void KernelClassModel::setRows(std::vector<GpuRow> rows) {
    beginResetModel();
    m_rows = std::move(rows);
    endResetModel();
}
int KernelClassModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_rows.size()); }
int KernelClassModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 7; }
QVariant KernelClassModel::headerData(int section, Qt::Orientation o, int role) const {
    static const char* names[] = {"Class", "Family", "Calls", "Total", "Avg", "Max", "Share"};
    if (o == Qt::Horizontal && role == Qt::DisplayRole && section >= 0 && section < 7) return QString(names[section]);
    return {};
}
QVariant KernelClassModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(m_rows.size()) || index.column() >= 7) return {};
    const GpuRow& r = m_rows[size_t(index.row())];
    const int64_t avg = r.calls ? int64_t(double(r.total_ns) / double(r.calls)) : 0;
    if (role == Qt::DisplayRole) {
        switch (index.column()) {
        case 0: return str(r.name);
        case 1: return str(r.family);
        case 2: return QVariant::fromValue<qulonglong>(r.calls);
        case 3: return dur(r.total_ns);
        case 4: return dur(avg);
        case 5: return dur(r.max_ns);
        case 6: return QString::number(r.share * 100, 'f', 2) + "%";
        }
    }
    if (role == Qt::UserRole) {
        switch (index.column()) {
        case 0: return str(r.name);
        case 1: return str(r.family);
        case 2: return QVariant::fromValue<qulonglong>(r.calls);
        case 3: return QVariant::fromValue<qlonglong>(r.total_ns);
        case 4: return QVariant::fromValue<qlonglong>(avg);
        case 5: return QVariant::fromValue<qlonglong>(r.max_ns);
        case 6: return r.share;
        }
    }
    if (role == Qt::TextAlignmentRole && index.column() >= 2) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
}

// ---- findings
void FindingsModel::setFindings(std::vector<Finding> findings) {
    beginResetModel();
    m_findings = std::move(findings);
    endResetModel();
}
int FindingsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(m_findings.size()); }
int FindingsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : 4; }
QVariant FindingsModel::headerData(int section, Qt::Orientation o, int role) const {
    static const char* names[] = {"Severity", "Finding", "Saving / step", "Saving %"};
    if (o == Qt::Horizontal && role == Qt::DisplayRole && section >= 0 && section < 4) return QString(names[section]);
    return {};
}
QVariant FindingsModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= int(m_findings.size()) || index.column() >= 4) return {};
    const Finding& f = m_findings[size_t(index.row())];
    switch (role) {
    case Qt::DisplayRole:
        switch (index.column()) {
        case 0: return QString(toString(f.severity)) + (f.minor ? " (minor)" : "");
        case 1: return str(f.title);
        case 2: return QString::number(f.saving_ms, 'f', 2) + " ms";
        case 3: return QString::number(f.saving_pct, 'f', 1) + "%";
        }
        break;
    case Qt::UserRole:
        switch (index.column()) {
        case 0: return int(f.severity);
        case 1: return str(f.title);
        case 2: return f.saving_ms;
        case 3: return f.saving_pct;
        }
        break;
    case Qt::ToolTipRole:
        return str(f.message + "\nFix: " + f.fix);
    case Qt::ForegroundRole:
        if (index.column() == 0)
            return QColor(f.severity == Severity::Error ? "#c0392b" : f.severity == Severity::Warning ? "#d68910"
                                                                                                      : "#2e86c1");
        break;
    default:
        break;
    }
    return {};
}

} // namespace sightline::gui
