#pragma once
// The main window: the timeline above, findings, tables and charts below. Loading runs off the UI
// thread with a cancellable progress dialog; bad files get one message and the window stays usable.
#include "trace_document.h"

#include <QMainWindow>

#include <atomic>
#include <functional>
#include <memory>

class QLineEdit;
class QSortFilterProxyModel;
class QTableView;
class QTextBrowser;
class QLabel;
class QComboBox;
class QSettings;

namespace sightline::gui {

class TimelineView;
class ChartsView;
class OpTableModel;
class KernelClassModel;
class FindingsModel;
class DiffModel;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    // Asynchronous open with progress and a message box on failure.
    void openFile(const QString& path);
    // Synchronous open for tests and command-line use; returns the error, empty on success.
    QString openFileSync(const QString& path);

    TimelineView* timeline() const { return m_timeline; }
    QTableView* findingsView() const { return m_findings_view; }
    QTableView* opsView() const { return m_ops_view; }
    QTableView* classesView() const { return m_classes_view; }
    FindingsModel* findingsModel() const { return m_findings; }
    OpTableModel* opsModel() const { return m_ops; }
    KernelClassModel* classesModel() const { return m_classes; }
    const TraceDocument* document() const { return m_doc.get(); }
    void setSearch(const QString& text);
    // Diff mode: the open trace (before) against another one (after); returns the error, empty on
    // success. The result shows in the Diff tab.
    QString compareWithSync(const QString& after_path);
    DiffModel* diffMetrics() const { return m_diff_metrics; }
    DiffModel* diffClasses() const { return m_diff_classes; }
    QString diffVerdict() const;
    // The two timelines of the Diff tab (before, after), each on its first steady step, at one scale.
    TimelineView* diffBefore() const { return m_diff_before; }
    TimelineView* diffAfter() const { return m_diff_after; }
    // What the tables cover: 0 whole trace, 1 steady state, 2 the selected range, 3.. step k-2.
    // The scope box's entries: three fixed ones, then one per step (kFirstStep + its index).
    enum TablesScope : int { kWholeTrace = 0,
                             kSteadyState = 1,
                             kSelectedRange = 2,
                             kFirstStep = 3 };
    void setTablesScope(int scope);
    QComboBox* scopeBox() const { return m_scope; }

protected:
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;
    void closeEvent(QCloseEvent* event) override;

private:
    // The window's parts, made once by the constructor.
    QWidget* makeFindingsPage();
    void makeTableViews();
    QWidget* makeDiffPage();
    void makeMenuAndToolBar();
    void connectSelections();
    void showDocument(std::unique_ptr<TraceDocument> doc);
    // Loads a trace off the UI thread with a cancellable progress dialog; `done` gets it on the UI
    // thread; a failure gets a message box.
    void loadAsync(const QString& path, std::function<void(std::unique_ptr<TraceDocument>)> done);
    void onFindingSelected();
    void chooseFile();
    void chooseCompare();
    void showDiff(std::unique_ptr<TraceDocument> after);
    QWidget* makeDiffTimeline(TimelineView*& view, QLabel*& title);
    void followDiffRange(TimelineView* from, TimelineView* to, int64_t begin_ns, int64_t end_ns);

    std::unique_ptr<TraceDocument> m_doc;
    TimelineView* m_timeline = nullptr;
    ChartsView* m_charts = nullptr;
    QTableView *m_findings_view = nullptr, *m_ops_view = nullptr, *m_classes_view = nullptr;
    FindingsModel* m_findings = nullptr;
    OpTableModel* m_ops = nullptr;
    KernelClassModel* m_classes = nullptr;
    QSortFilterProxyModel *m_ops_proxy = nullptr, *m_classes_proxy = nullptr;
    QTextBrowser* m_details = nullptr;
    QLineEdit* m_search = nullptr;
    QLabel* m_status = nullptr;
    QComboBox* m_scope = nullptr;
    std::unique_ptr<TraceDocument> m_after;
    DiffModel *m_diff_metrics = nullptr, *m_diff_classes = nullptr, *m_diff_ops = nullptr;
    QLabel* m_diff_verdict = nullptr;
    TimelineView *m_diff_before = nullptr, *m_diff_after = nullptr;
    QLabel *m_diff_before_title = nullptr, *m_diff_after_title = nullptr;
    int64_t m_diff_before_origin = 0, m_diff_after_origin = 0; // each side's step start
    bool m_diff_following = false;
    class QTabWidget* m_tabs = nullptr;
    QWidget* m_diff_page = nullptr;
    std::atomic<bool> m_cancel{false};
    QSettings* m_settings = nullptr; // the window's geometry and state, the last directory opened
};

} // namespace sightline::gui
