#include "main_window.h"

#include "charts.h"
#include "diff_model.h"
#include "sightline/error.h"
#include "table_models.h"
#include "timeline_view.h"

#include <QAction>
#include <QComboBox>
#include <QCloseEvent>
#include <QDragEnterEvent>
#include <QFileDialog>
#include <QFileInfo>
#include <QFutureWatcher>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QProgressDialog>
#include <QScrollArea>
#include <QSettings>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableView>
#include <QTextBrowser>
#include <QToolBar>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrent>

namespace sightline::gui {

namespace {

QTableView* makeTable(QAbstractItemModel* model, QWidget* parent) {
    auto* v = new QTableView(parent);
    v->setModel(model);
    v->setSortingEnabled(true);
    v->setSelectionBehavior(QAbstractItemView::SelectRows);
    v->setSelectionMode(QAbstractItemView::SingleSelection);
    v->verticalHeader()->setVisible(false);
    v->horizontalHeader()->setStretchLastSection(true);
    v->setWordWrap(false);
    return v;
}

QSortFilterProxyModel* makeProxy(QAbstractItemModel* source, QObject* parent) {
    auto* p = new QSortFilterProxyModel(parent);
    p->setSourceModel(source);
    p->setSortRole(Qt::UserRole);
    p->setFilterKeyColumn(0);
    p->setFilterCaseSensitivity(Qt::CaseInsensitive);
    return p;
}

const char* const kDiffHint = "File > Compare with... shows what changed from this trace to another.";

struct LoadResult {
    std::unique_ptr<TraceDocument> doc;
    QString error;
};

} // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
    setWindowTitle("Sightline");
    setAcceptDrops(true);
    m_settings = new QSettings("Sightline", "sightline-gui", this);
    m_timeline = new TimelineView;
    auto* scroll = new QScrollArea;
    scroll->setWidget(m_timeline);
    scroll->setWidgetResizable(true);

    auto* tabs = new QTabWidget;
    m_tabs = tabs;
    tabs->addTab(makeFindingsPage(), "Findings");
    makeTableViews();
    tabs->addTab(m_ops_view, "Ops");
    tabs->addTab(m_classes_view, "Kernel classes");
    m_charts = new ChartsView;
    tabs->addTab(m_charts, "Charts");
    tabs->addTab(makeDiffPage(), "Diff");

    auto* split = new QSplitter(Qt::Vertical);
    split->addWidget(scroll);
    split->addWidget(tabs);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setSizes({540, 360});
    setCentralWidget(split);

    makeMenuAndToolBar();
    m_status = new QLabel("No trace");
    statusBar()->addWidget(m_status);
    connectSelections();
    restoreGeometry(m_settings->value("geometry").toByteArray());
    restoreState(m_settings->value("state").toByteArray());
}

QWidget* MainWindow::makeFindingsPage() {
    m_findings = new FindingsModel(this);
    m_findings_view = makeTable(m_findings, this);
    m_findings_view->setSortingEnabled(false); // already ordered by severity, then saving
    m_details = new QTextBrowser;
    auto* findings_split = new QSplitter(Qt::Horizontal);
    findings_split->addWidget(m_findings_view);
    findings_split->addWidget(m_details);
    findings_split->setStretchFactor(0, 1);
    findings_split->setStretchFactor(1, 1);
    return findings_split;
}

void MainWindow::makeTableViews() {
    m_ops = new OpTableModel(this);
    m_classes = new KernelClassModel(this);
    m_ops_proxy = makeProxy(m_ops, this);
    m_classes_proxy = makeProxy(m_classes, this);
    m_ops_view = makeTable(m_ops_proxy, this);
    m_classes_view = makeTable(m_classes_proxy, this);
    m_ops_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
    m_classes_view->setSelectionMode(QAbstractItemView::ExtendedSelection);
}

QWidget* MainWindow::makeDiffPage() {
    m_diff_metrics = new DiffModel(this);
    m_diff_classes = new DiffModel(this);
    m_diff_ops = new DiffModel(this);
    m_diff_page = new QWidget;
    auto* diff_layout = new QVBoxLayout(m_diff_page);
    m_diff_verdict = new QLabel(kDiffHint);
    diff_layout->addWidget(m_diff_verdict);
    auto* diff_timelines = new QSplitter(Qt::Horizontal);
    diff_timelines->addWidget(makeDiffTimeline(m_diff_before, m_diff_before_title));
    diff_timelines->addWidget(makeDiffTimeline(m_diff_after, m_diff_after_title));
    // Zooming or panning one side moves the other to the same offset from its step's start.
    connect(m_diff_before, &TimelineView::rangeChanged, this,
            [this](int64_t a, int64_t b) { followDiffRange(m_diff_before, m_diff_after, a, b); });
    connect(m_diff_after, &TimelineView::rangeChanged, this,
            [this](int64_t a, int64_t b) { followDiffRange(m_diff_after, m_diff_before, a, b); });
    auto* diff_split = new QSplitter(Qt::Horizontal);
    for (DiffModel* m : {m_diff_metrics, m_diff_classes, m_diff_ops}) diff_split->addWidget(makeTable(m, this));
    auto* diff_vertical = new QSplitter(Qt::Vertical);
    diff_vertical->addWidget(diff_timelines);
    diff_vertical->addWidget(diff_split);
    diff_vertical->setStretchFactor(0, 3);
    diff_vertical->setStretchFactor(1, 2);
    diff_layout->addWidget(diff_vertical);
    return m_diff_page;
}

void MainWindow::makeMenuAndToolBar() {
    QMenu* file = menuBar()->addMenu("&File");
    QAction* open = file->addAction("&Open...", this, &MainWindow::chooseFile);
    open->setShortcut(QKeySequence::Open);
    file->addAction("&Compare with...", this, &MainWindow::chooseCompare);
    file->addAction("&Quit", this, &QWidget::close)->setShortcut(QKeySequence::Quit);
    QToolBar* bar = addToolBar("Search");
    bar->setObjectName("search");
    m_search = new QLineEdit;
    m_search->setPlaceholderText("Search ops and kernel classes");
    m_search->setClearButtonEnabled(true);
    bar->addWidget(m_search);
    connect(m_search, &QLineEdit::textChanged, this, &MainWindow::setSearch);
    m_scope = new QComboBox;
    m_scope->setToolTip("What the op and kernel tables cover");
    bar->addWidget(m_scope);
    connect(m_scope, &QComboBox::currentIndexChanged, this, &MainWindow::setTablesScope);
    connect(m_timeline, &TimelineView::selectionChanged, this, [this](int64_t a, int64_t b) {
        if (!m_doc) return;
        const RangeSummary r = summarizeRange(m_doc->trace(), a, b);
        m_status->setText(QString("Selection %1: GPU busy %2 (%3%) · %4 kernels · %5 memory operations · %6 ops")
                              .arg(QString::fromStdString(formatDuration(r.duration_ns)),
                                   QString::fromStdString(formatDuration(r.gpu_busy_ns)))
                              .arg(r.duration_ns ? 100.0 * double(r.gpu_busy_ns) / double(r.duration_ns) : 0.0, 0, 'f', 1)
                              .arg(r.kernels)
                              .arg(r.memops)
                              .arg(r.cpu_ops));
        if (m_scope->currentIndex() == kSelectedRange) setTablesScope(kSelectedRange);
    });
}

// A finding's evidence, and the ops and kernel classes selected in the tables, light up on the timeline.
void MainWindow::connectSelections() {
    connect(m_findings_view->selectionModel(), &QItemSelectionModel::selectionChanged, this, &MainWindow::onFindingSelected);
    connect(m_ops_view->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        std::set<std::string> names;
        for (const QModelIndex& i : m_ops_view->selectionModel()->selectedRows())
            names.insert(m_ops->row(m_ops_proxy->mapToSource(i).row()).name);
        m_timeline->setHighlightedOps(names);
    });
    connect(m_classes_view->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        const QModelIndexList rows = m_classes_view->selectionModel()->selectedRows();
        std::set<std::string> classes;
        for (const QModelIndex& i : rows)
            classes.insert(m_classes->row(m_classes_proxy->mapToSource(i).row()).name);
        m_timeline->setHighlightedClasses(classes);
    });
}

MainWindow::~MainWindow() = default;

void MainWindow::setSearch(const QString& text) {
    m_ops_proxy->setFilterFixedString(text);
    m_classes_proxy->setFilterFixedString(text);
}

void MainWindow::setTablesScope(int scope) {
    if (!m_doc || scope < 0) return;
    const Report& r = m_doc->report();
    Tables t;
    if (scope == kWholeTrace) {
        t = r.tables;
    } else if (scope == kSteadyState) {
        t = r.metrics.steady_tables;
    } else if (scope == kSelectedRange) {
        const auto sel = m_timeline->selection();
        const int64_t a = sel ? sel->first : m_timeline->rangeBegin(), b = sel ? sel->second : m_timeline->rangeEnd();
        t = computeTables(m_doc->trace(), m_doc->tree(), Taxonomy::builtin(), rangeFilter(m_doc->trace(), a, b));
    } else {
        t = computeTables(m_doc->trace(), m_doc->tree(), Taxonomy::builtin(), r.metrics.filterFor({size_t(scope - kFirstStep)}));
    }
    m_ops->setRows(std::move(t.ops));
    m_classes->setRows(std::move(t.kernel_classes));
}

void MainWindow::chooseCompare() {
    if (!m_doc) return;
    const QString path = QFileDialog::getOpenFileName(this, "Compare with a trace (after)", m_settings->value("lastDir").toString(),
                                                      "Traces (*.json *.json.gz *.gz *.db *.slcap);;All files (*)");
    if (path.isEmpty()) return;
    // Loaded off the UI thread like any trace; the comparison shows when it is there.
    loadAsync(path, [this](std::unique_ptr<TraceDocument> after) {
        if (m_doc) showDiff(std::move(after));
    });
}

QString MainWindow::compareWithSync(const QString& after_path) {
    if (!m_doc) return "open a trace first";
    std::atomic<bool> never{false};
    try {
        showDiff(TraceDocument::load(after_path.toStdString(), never));
        return {};
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
}

void MainWindow::showDiff(std::unique_ptr<TraceDocument> after) {
    m_diff_after->setDocument(nullptr); // before the document it draws goes
    m_after = std::move(after);
    const Diff d = computeDiff(m_doc->report(), m_after->report(), 5.0);
    m_diff_metrics->setRows(d.metrics);
    m_diff_classes->setRows(d.kernel_classes);
    m_diff_ops->setRows(d.ops);
    auto list = [](const std::vector<std::string>& v) {
        QStringList l;
        for (const auto& x : v) l << QString::fromStdString(x);
        return l.isEmpty() ? QString("none") : l.join(", ");
    };
    m_diff_verdict->setText(QString("<b>%1</b> → <b>%2</b>: step time %3 ms → %4 ms (%5%). %6<br>Findings resolved: %7; new: %8")
                                .arg(QFileInfo(QString::fromStdString(d.before_source)).fileName(),
                                     QFileInfo(QString::fromStdString(d.after_source)).fileName())
                                .arg(d.step_before_ms, 0, 'f', 2)
                                .arg(d.step_after_ms, 0, 'f', 2)
                                .arg(d.stepChangePct(), 0, 'f', 1)
                                .arg(d.regression() ? "<span style='color:#c0392b'>Regression.</span>" : "No regression.")
                                .arg(list(d.findings_resolved), list(d.findings_new)));
    // The timelines: each trace's first steady step (its whole span without steps), at one scale.
    auto stepOf = [](const TraceDocument& doc) {
        const Metrics& m = doc.report().metrics;
        if (!m.steady.empty() && m.steady.front() < m.steps.size()) {
            const StepMetrics& s = m.steps[m.steady.front()];
            return std::pair<int64_t, int64_t>(s.step.start_ns, s.begin_ns + std::max<int64_t>(s.time_ns, 1)); // host start to GPU end
        }
        return std::pair<int64_t, int64_t>(doc.begin(), doc.end());
    };
    const auto [b0, b1] = stepOf(*m_doc);
    const auto [a0, a1] = stepOf(*m_after);
    const int64_t width = std::max(b1 - b0, a1 - a0);
    m_diff_before_origin = b0;
    m_diff_after_origin = a0;
    m_diff_following = true; // set both sides before they follow each other
    m_diff_before->setDocument(m_doc.get());
    m_diff_after->setDocument(m_after.get());
    m_diff_before->setRange(b0, b0 + width);
    m_diff_after->setRange(a0, a0 + width);
    m_diff_following = false;
    m_diff_before_title->setText(QString("Before: %1, step %2 ms")
                                     .arg(QFileInfo(QString::fromStdString(d.before_source)).fileName())
                                     .arg(double(b1 - b0) / 1e6, 0, 'f', 2));
    m_diff_after_title->setText(QString("After: %1, step %2 ms")
                                    .arg(QFileInfo(QString::fromStdString(d.after_source)).fileName())
                                    .arg(double(a1 - a0) / 1e6, 0, 'f', 2));
    m_tabs->setCurrentWidget(m_diff_page);
}

QString MainWindow::diffVerdict() const { return m_diff_verdict->text(); }

QWidget* MainWindow::makeDiffTimeline(TimelineView*& view, QLabel*& title) {
    auto* box = new QWidget;
    auto* layout = new QVBoxLayout(box);
    layout->setContentsMargins(0, 0, 0, 0);
    title = new QLabel;
    view = new TimelineView;
    view->setClampToTrace(false);
    auto* scroll = new QScrollArea;
    scroll->setWidget(view);
    scroll->setWidgetResizable(true);
    layout->addWidget(title);
    layout->addWidget(scroll);
    return box;
}

void MainWindow::followDiffRange(TimelineView* from, TimelineView* to, int64_t begin_ns, int64_t end_ns) {
    if (m_diff_following || !m_after) return;
    m_diff_following = true;
    const bool forward = from == m_diff_before;
    const int64_t shift = forward ? m_diff_after_origin - m_diff_before_origin : m_diff_before_origin - m_diff_after_origin;
    to->setRange(begin_ns + shift, end_ns + shift);
    m_diff_following = false;
}

void MainWindow::chooseFile() {
    const QString path = QFileDialog::getOpenFileName(this, "Open a trace", m_settings->value("lastDir").toString(),
                                                      "Traces (*.json *.json.gz *.gz *.db *.slcap);;All files (*)");
    if (path.isEmpty()) return;
    m_settings->setValue("lastDir", QFileInfo(path).absolutePath());
    openFile(path);
}

void MainWindow::openFile(const QString& path) {
    loadAsync(path, [this](std::unique_ptr<TraceDocument> doc) { showDocument(std::move(doc)); });
}

void MainWindow::loadAsync(const QString& path, std::function<void(std::unique_ptr<TraceDocument>)> done) {
    m_cancel = false;
    auto* progress = new QProgressDialog("Loading " + QFileInfo(path).fileName(), "Cancel", 0, 1000, this);
    progress->setWindowModality(Qt::WindowModal);
    progress->setMinimumDuration(300);
    connect(progress, &QProgressDialog::canceled, this, [this] { m_cancel = true; });
    auto* watcher = new QFutureWatcher<std::shared_ptr<LoadResult>>(this);
    connect(watcher, &QFutureWatcher<std::shared_ptr<LoadResult>>::finished, this, [this, watcher, progress, done] {
        auto result = watcher->result();
        progress->close();
        progress->deleteLater();
        watcher->deleteLater();
        if (result->doc) {
            done(std::move(result->doc));
        } else if (!result->error.isEmpty()) {
            QMessageBox::warning(this, "Cannot open the trace", result->error);
        }
    });
    const std::string file = path.toStdString();
    watcher->setFuture(QtConcurrent::run([this, file, progress] {
        auto r = std::make_shared<LoadResult>();
        try {
            r->doc = TraceDocument::load(file, m_cancel, [progress](double f) {
                QMetaObject::invokeMethod(progress, "setValue", Qt::QueuedConnection, Q_ARG(int, int(f * 1000)));
            });
        } catch (const Cancelled&) {
        } catch (const std::exception& e) {
            r->error = QString::fromStdString(e.what());
        }
        return r;
    }));
}

QString MainWindow::openFileSync(const QString& path) {
    std::atomic<bool> never{false};
    try {
        showDocument(TraceDocument::load(path.toStdString(), never));
        return {};
    } catch (const std::exception& e) {
        return QString::fromStdString(e.what());
    }
}

void MainWindow::showDocument(std::unique_ptr<TraceDocument> doc) {
    m_timeline->setDocument(nullptr);
    m_charts->setDocument(nullptr);
    // A comparison belongs to the trace it was made from.
    m_diff_before->setDocument(nullptr);
    m_diff_after->setDocument(nullptr);
    m_diff_before_title->clear();
    m_diff_after_title->clear();
    for (DiffModel* m : {m_diff_metrics, m_diff_classes, m_diff_ops}) m->setRows({});
    m_diff_verdict->setText(kDiffHint);
    m_after.reset();
    m_doc = std::move(doc);
    const Report& r = m_doc->report();
    m_findings->setFindings(r.findings);
    {
        const QSignalBlocker block(m_scope);
        m_scope->clear();
        m_scope->addItems({"Whole trace", "Steady state", "Selected range"}); // kWholeTrace, kSteadyState, kSelectedRange
        for (const StepMetrics& s : r.metrics.steps)
            m_scope->addItem(QString::fromStdString(s.step.name + " (" + formatDuration(s.time_ns) + ")"));
        m_scope->setCurrentIndex(kWholeTrace);
    }
    m_ops->setRows(r.tables.ops);
    m_classes->setRows(r.tables.kernel_classes);
    m_timeline->setDocument(m_doc.get());
    m_charts->setDocument(m_doc.get());
    m_ops_view->sortByColumn(3, Qt::DescendingOrder);
    m_classes_view->sortByColumn(3, Qt::DescendingOrder);
    m_findings_view->resizeColumnsToContents();
    m_status->setText(QString("%1 · %2 CPU events · %3 GPU activities · %4 findings")
                          .arg(QFileInfo(QString::fromStdString(r.source)).fileName())
                          .arg(m_doc->trace().cpu.size())
                          .arg(m_doc->trace().gpu.size())
                          .arg(r.findings.size()));
    setWindowTitle("Sightline — " + QFileInfo(QString::fromStdString(r.source)).fileName());
    if (m_findings->rowCount() > 0) m_findings_view->selectRow(0);
}

void MainWindow::onFindingSelected() {
    const QModelIndexList rows = m_findings_view->selectionModel()->selectedRows();
    if (rows.isEmpty() || !m_doc) return;
    const Finding& f = m_findings->finding(rows.first().row());
    QString html = QString("<h3>%1</h3><p>%2</p><p><b>Saves</b> about %3 ms a step (%4%).</p><p><b>Fix:</b> %5</p><p><b>Evidence</b></p><ul>")
                       .arg(QString::fromStdString(f.title).toHtmlEscaped(), QString::fromStdString(f.message).toHtmlEscaped())
                       .arg(f.saving_ms, 0, 'f', 2)
                       .arg(f.saving_pct, 0, 'f', 1)
                       .arg(QString::fromStdString(f.fix).toHtmlEscaped());
    std::set<std::string> classes, ops;
    for (const EvidenceRow& e : f.evidence) {
        if (e.kind == EvidenceKind::KernelClass) classes.insert(e.name);
        if (e.kind == EvidenceKind::Op) ops.insert(e.name);
        html += e.kind == EvidenceKind::Metric ? QString("<li>%1 = %2</li>").arg(QString::fromStdString(e.name)).arg(e.value)
                                               : QString("<li>%1 <i>%2</i>: %3 calls, %4 ms a step</li>")
                                                     .arg(toString(e.kind), QString::fromStdString(e.name).toHtmlEscaped())
                                                     .arg(e.calls, 0, 'f', 0)
                                                     .arg(e.ms, 0, 'f', 2);
    }
    html += "</ul><p><i>" + QString::fromStdString(f.saving_explained).toHtmlEscaped() + "</i></p>";
    if (!std::isnan(f.saving_low_ms))
        html += QString("<p><b>Range:</b> %1 to %2 ms a step.</p>").arg(f.saving_low_ms, 0, 'f', 2).arg(f.saving_high_ms, 0, 'f', 2);
    for (const auto& [label, text] : {std::pair{"Critical path", &f.critical_path}, {"Uncertain", &f.uncertainty}, {"Unreliable", &f.unreliable}})
        if (!text->empty()) html += QString("<p><b>%1:</b> %2</p>").arg(label, QString::fromStdString(*text).toHtmlEscaped());
    m_details->setHtml(html);
    m_timeline->setHighlightedClasses(classes);
    m_timeline->setHighlightedOps(ops);
    // The evidence is selected in the tables too.
    auto selectIn = [](QTableView* view, QSortFilterProxyModel* proxy, const std::set<std::string>& names) {
        QItemSelection sel;
        for (int r = 0; r < proxy->rowCount(); ++r)
            if (names.count(proxy->index(r, 0).data().toString().toStdString()))
                sel.select(proxy->index(r, 0), proxy->index(r, proxy->columnCount() - 1));
        const QSignalBlocker block(view->selectionModel());
        view->selectionModel()->select(sel, QItemSelectionModel::ClearAndSelect);
        view->viewport()->update();
    };
    selectIn(m_ops_view, m_ops_proxy, ops);
    selectIn(m_classes_view, m_classes_proxy, classes);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (e->mimeData()->hasUrls()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    const QList<QUrl> urls = e->mimeData()->urls();
    if (!urls.isEmpty()) openFile(urls.first().toLocalFile());
}

void MainWindow::closeEvent(QCloseEvent* e) {
    m_settings->setValue("geometry", saveGeometry());
    m_settings->setValue("state", saveState());
    QMainWindow::closeEvent(e);
}

} // namespace sightline::gui
