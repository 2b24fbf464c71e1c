// GUI tests, headless (QT_QPA_PLATFORM=offscreen): item models under QAbstractItemModelTester,
// opening a real trace, selecting a finding, zooming and panning, searching, a bad file, and a
// screenshot that must show the timeline, tables and findings drawn.
#include "diff_model.h"
#include "main_window.h"
#include "table_models.h"
#include "timeline_view.h"
#include "sightline/import.h"
#include "sightline/ranks.h"
#include "sightline/trace_db.h"

#include <QAbstractItemModelTester>
#include <QComboBox>
#include <QFile>
#include <QSignalSpy>
#include <QLabel>
#include <QApplication>
#include <QMouseEvent>
#include <QImage>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QTest>

using namespace sightline::gui;

namespace {
QString fixture(const char* name) { return QString(SIGHTLINE_TEST_DIR) + "/fixtures/kineto/" + name; }

// Share of pixels in `r` that differ from the most common colour there.
double drawnShare(const QImage& img, QRect r) {
    QHash<QRgb, int> counts;
    for (int y = r.top(); y <= r.bottom(); y += 2)
        for (int x = r.left(); x <= r.right(); x += 2) ++counts[img.pixel(x, y)];
    int total = 0, top = 0;
    for (int c : counts) {
        total += c;
        top = std::max(top, c);
    }
    return total ? 1.0 - double(top) / total : 0.0;
}
} // namespace

class GuiTest : public QObject {
    Q_OBJECT
private slots:
    void modelsPassTheModelTester() {
        MainWindow w;
        QVERIFY(w.openFileSync(fixture("qwen3next_fallback_small.json.gz")).isEmpty());
        QAbstractItemModelTester ops(w.opsModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester classes(w.classesModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester findings(w.findingsModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QAbstractItemModelTester proxy(w.opsView()->model(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(w.opsModel()->rowCount() > 100);
        QVERIFY(w.classesModel()->rowCount() > 20);
        QVERIFY(w.findingsModel()->rowCount() >= 3);
        // Re-loading resets the models under the testers.
        QVERIFY(w.openFileSync(fixture("dense_healthy.json.gz")).isEmpty());
        QVERIFY(w.opsModel()->rowCount() > 100);
        // Sorting goes by the raw numbers.
        w.opsView()->sortByColumn(2, Qt::DescendingOrder);
        const auto* m = w.opsView()->model();
        QVERIFY(m->index(0, 2).data(Qt::UserRole).toULongLong() >= m->index(1, 2).data(Qt::UserRole).toULongLong());
    }

    void selectingAFindingHighlightsItsKernels() {
        MainWindow w;
        QVERIFY(w.openFileSync(fixture("qwen3next_fallback_small.json.gz")).isEmpty());
        int gdn = -1;
        for (int r = 0; r < w.findingsModel()->rowCount(); ++r)
            if (w.findingsModel()->finding(r).rule == "gdn-torch-fallback") gdn = r;
        QVERIFY(gdn >= 0);
        w.findingsView()->selectRow(gdn);
        QImage before = w.timeline()->grab().toImage();
        QVERIFY(!before.isNull());
        // Its evidence is selected in the tables: the fp32 GEMM class and the bmm op.
        QStringList selected;
        for (const QModelIndex& i : w.classesView()->selectionModel()->selectedRows()) selected << i.data().toString();
        QVERIFY(selected.contains("xmma GEMM fp32 (FFMA, no tensor cores)"));
        selected.clear();
        for (const QModelIndex& i : w.opsView()->selectionModel()->selectedRows()) selected << i.data().toString();
        QVERIFY(selected.contains("aten::bmm"));
    }

    void zoomPanAndKeys() {
        MainWindow w;
        w.resize(1200, 800);
        QVERIFY(w.openFileSync(fixture("dense_healthy.json.gz")).isEmpty());
        TimelineView* t = w.timeline();
        const int64_t span = t->rangeEnd() - t->rangeBegin();
        t->zoom(0.5);
        QVERIFY(t->rangeEnd() - t->rangeBegin() < span * 0.6);
        const int64_t b0 = t->rangeBegin();
        t->pan(0.1);
        QVERIFY(t->rangeBegin() > b0);
        QTest::keyClick(t, Qt::Key_W);
        QVERIFY(t->rangeEnd() - t->rangeBegin() < span * 0.5);
        QTest::keyClick(t, Qt::Key_0);
        QCOMPARE(t->rangeEnd() - t->rangeBegin(), span);
        // Deep zoom and frames at every level draw without trouble.
        for (int i = 0; i < 30; ++i) t->zoom(0.7);
        QVERIFY(t->rangeEnd() - t->rangeBegin() >= 1000);
        QVERIFY(!t->grab().toImage().isNull());
    }

    void shiftDragSelectsARangeOnce() {
        MainWindow w;
        w.resize(1200, 800);
        QVERIFY(w.openFileSync(fixture("dense_healthy.json.gz")).isEmpty());
        w.show();
        TimelineView* t = w.timeline();
        QSignalSpy spy(t, &TimelineView::selectionChanged);
        const int y = 60;
        QTest::mousePress(t, Qt::LeftButton, Qt::ShiftModifier, QPoint(300, y));
        for (int x = 320; x <= 700; x += 20) { // the range grows under the mouse; nothing is computed yet
            QMouseEvent move(QEvent::MouseMove, QPointF(x, y), t->mapToGlobal(QPointF(x, y)), Qt::NoButton, Qt::LeftButton,
                             Qt::ShiftModifier);
            QApplication::sendEvent(t, &move);
        }
        QCOMPARE(spy.count(), 0);
        QVERIFY(t->selection().has_value());
        QTest::mouseRelease(t, Qt::LeftButton, Qt::ShiftModifier, QPoint(700, y));
        QCOMPARE(spy.count(), 1);
        QVERIFY(spy.at(0).at(0).toLongLong() < spy.at(0).at(1).toLongLong());
    }

    void searchFiltersTheTables() {
        MainWindow w;
        QVERIFY(w.openFileSync(fixture("qwen3next_fallback_small.json.gz")).isEmpty());
        const int all = w.opsView()->model()->rowCount();
        w.setSearch("bmm");
        const int some = w.opsView()->model()->rowCount();
        QVERIFY(some > 0 && some < all);
        for (int r = 0; r < some; ++r)
            QVERIFY(w.opsView()->model()->index(r, 0).data().toString().contains("bmm", Qt::CaseInsensitive));
    }

    void aBadFileGivesOneMessageAndTheWindowStaysUsable() {
        MainWindow w;
        QVERIFY(w.openFileSync(fixture("qwen3next_fallback_small.json.gz")).isEmpty());
        const QString error = w.openFileSync(QString(SIGHTLINE_TEST_DIR) + "/inputs/not_a_trace.json");
        QVERIFY(error.contains("traceEvents"));
        QVERIFY(!error.contains('\n'));
        QVERIFY(w.document() != nullptr); // the trace shown before is still there
        QVERIFY(w.openFileSync(fixture("dense_healthy.json.gz")).isEmpty());
    }

    void tablesForAStepAndForASelectedRange() {
        MainWindow w;
        w.resize(1200, 800);
        QVERIFY(w.openFileSync(fixture("dense_healthy.json.gz")).isEmpty());
        auto mmCalls = [&] {
            for (int r = 0; r < w.opsModel()->rowCount(); ++r)
                if (w.opsModel()->row(r).name == "aten::mm") return w.opsModel()->row(r).calls;
            return uint64_t(0);
        };
        QCOMPARE(mmCalls(), uint64_t(513));
        QCOMPARE(w.scopeBox()->count(), 3 + 3); // whole, steady, selection, three steps
        w.scopeBox()->setCurrentIndex(3);       // the first step
        QCOMPARE(mmCalls(), uint64_t(171));
        w.scopeBox()->setCurrentIndex(1); // steady state: steps 2 and 3
        QCOMPARE(mmCalls(), uint64_t(342));
        // A selected range covering the second step only.
        const auto& step = w.document()->report().metrics.steps[1].step;
        w.timeline()->setSelection(std::make_pair(step.start_ns, step.end_ns));
        w.scopeBox()->setCurrentIndex(2);
        QCOMPARE(mmCalls(), uint64_t(171));
    }

    void diffModeShowsWhatChanged() {
        MainWindow w;
        QCOMPARE(w.compareWithSync(fixture("dense_healthy.json.gz")), QString("open a trace first"));
        QVERIFY(w.openFileSync(fixture("dense_healthy.json.gz")).isEmpty());
        QVERIFY(w.compareWithSync(fixture("dense_healthy.json.gz")).isEmpty());
        QCOMPARE(w.diffMetrics()->rowCount(), 0); // a trace against itself: no change
        QVERIFY(w.diffVerdict().contains("No regression"));
        QVERIFY(w.compareWithSync(fixture("qwen3next_fallback_small.json.gz")).isEmpty());
        QAbstractItemModelTester t(w.diffClasses(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(w.diffMetrics()->rowCount() > 10);
        QVERIFY(w.diffClasses()->rowCount() > 10);
        QVERIFY(w.diffVerdict().contains("Regression"));
        QVERIFY(w.diffVerdict().contains("gdn-torch-fallback")); // a new finding
        // Side by side: each timeline on its trace's first steady step, both at one scale.
        TimelineView *before = w.diffBefore(), *after = w.diffAfter();
        const sightline::Metrics& mb = w.document()->report().metrics;
        QCOMPARE(before->rangeBegin(), mb.steps[mb.steady.front()].step.start_ns);
        QCOMPARE(before->rangeEnd() - before->rangeBegin(), after->rangeEnd() - after->rangeBegin());
        const int64_t after_start = after->rangeBegin();
        before->resize(800, 300);
        after->resize(800, 300);
        QVERIFY(drawnShare(before->grab().toImage(), QRect(0, 0, 800, 300)) > 0.02);
        QVERIFY(drawnShare(after->grab().toImage(), QRect(0, 0, 800, 300)) > 0.02);
        // Panning one side moves the other by as much.
        const int64_t width = before->rangeEnd() - before->rangeBegin();
        before->pan(0.25);
        QCOMPARE(after->rangeBegin() - after_start, before->rangeBegin() - mb.steps[mb.steady.front()].step.start_ns);
        QVERIFY(after->rangeBegin() != after_start);
        QCOMPARE(after->rangeEnd() - after->rangeBegin(), width);
        w.resize(1400, 900);
        w.show();
        w.grab().toImage().save(QString(SIGHTLINE_BINARY_DIR) + "/gui-diff-screenshot.png");
        QVERIFY(!w.compareWithSync(QString(SIGHTLINE_TEST_DIR) + "/inputs/empty_trace.json").isEmpty());
        // Opening another trace ends the comparison.
        QVERIFY(w.openFileSync(fixture("dense_healthy.json.gz")).isEmpty());
        QCOMPARE(w.diffMetrics()->rowCount(), 0);
        QVERIFY(w.diffVerdict().startsWith("File > Compare with"));
    }

    void aDatabaseOpensWithTheSameTablesAsItsTrace() {
        // A trace database holds its op tree and the window takes it instead of rebuilding it: the
        // tables and findings must be the ones the trace itself gives.
        const QString db = QString(SIGHTLINE_BINARY_DIR) + "/gdn_fixture.db";
        QFile::remove(db);
        sightline::writeTraceDb(sightline::importTrace(fixture("qwen3next_fallback_small.json.gz").toStdString()), db.toStdString());
        MainWindow a, b;
        QVERIFY(a.openFileSync(fixture("qwen3next_fallback_small.json.gz")).isEmpty());
        QVERIFY(b.openFileSync(db).isEmpty());
        using Pair = std::pair<const QAbstractItemModel*, const QAbstractItemModel*>;
        for (auto [ma, mb] : {Pair{a.opsModel(), b.opsModel()}, Pair{a.classesModel(), b.classesModel()},
                              Pair{a.findingsModel(), b.findingsModel()}}) {
            QCOMPARE(mb->rowCount(), ma->rowCount());
            QCOMPARE(mb->columnCount(), ma->columnCount());
            for (int r = 0; r < ma->rowCount(); ++r)
                for (int c = 0; c < ma->columnCount(); ++c) {
                    QCOMPARE(mb->index(r, c).data(Qt::DisplayRole), ma->index(r, c).data(Qt::DisplayRole));
                    QCOMPARE(mb->index(r, c).data(Qt::UserRole), ma->index(r, c).data(Qt::UserRole));
                }
        }
    }

    void ranksAreGroupsOfTracks() {
        // Two ranks (the fixture twice), merged by `sightline ranks --merged`, opened as one trace.
        std::vector<sightline::Trace> traces;
        for (int r = 0; r < 2; ++r) {
            traces.push_back(sightline::importTrace(fixture("dense_healthy.json.gz").toStdString()));
            traces.back().metadata["rank"] = std::to_string(r);
        }
        std::vector<sightline::RankInput> in;
        for (int r = 0; r < 2; ++r) in.push_back(sightline::rankInputOf(traces[r], r));
        const auto analysis = sightline::analyzeRanks(in, sightline::Taxonomy::builtin());
        const QString db = QString(SIGHTLINE_BINARY_DIR) + "/two_ranks.db";
        QFile::remove(db);
        sightline::writeTraceDb(sightline::mergeRanks(in, analysis), db.toStdString());
        MainWindow w;
        QVERIFY(w.openFileSync(db).isEmpty());
        QStringList labels;
        for (const auto& t : w.document()->tracks())
            if (!t.label.empty()) labels << QString::fromStdString(t.label);
        // Rank 0's tracks come first, then rank 1's, each with its threads and its GPU.
        int cpu0 = -1, cpu1 = -1;
        for (int i = 0; i < labels.size(); ++i) {
            if (cpu0 < 0 && labels[i].startsWith("rank 0 · ")) cpu0 = i;
            if (cpu1 < 0 && labels[i].startsWith("rank 1 · ")) cpu1 = i;
        }
        QVERIFY2(cpu0 >= 0 && cpu1 > cpu0, qPrintable(labels.join(" | ")));
        QVERIFY2(labels.contains("rank 0 · GPU 0 stream 7") && labels.contains("rank 1 · GPU 0 stream 7"), qPrintable(labels.join(" | ")));
        QCOMPARE(w.document()->trace().cpu.size(), 2 * traces[0].cpu.size());
        w.resize(1400, 900);
        w.show();
        w.grab().toImage().save(QString(SIGHTLINE_BINARY_DIR) + "/gui-ranks-screenshot.png");
    }

    void aTraceOfGpuActivityAloneOpens() {
        // No CPU ops or annotations (fixtures/kineto/make_gpu_only.py): the GPU side is shown.
        MainWindow w;
        w.resize(1200, 800);
        QVERIFY(w.openFileSync(fixture("dense_healthy_gpu_only.json.gz")).isEmpty());
        QAbstractItemModelTester findings(w.findingsModel(), QAbstractItemModelTester::FailureReportingMode::QtTest);
        QVERIFY(w.classesModel()->rowCount() > 20);
        QVERIFY(w.findingsModel()->rowCount() >= 1);
        QCOMPARE(w.document()->report().metrics.steps.size(), size_t(3));
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const QImage img = w.grab().toImage();
        const QRect timeline(w.timeline()->mapTo(&w, QPoint(TimelineView::kLabelWidth, 20)),
                             QSize(w.timeline()->width() - TimelineView::kLabelWidth, 200));
        QVERIFY2(drawnShare(img, timeline.intersected(img.rect())) > 0.01, "the timeline area is blank");
    }

    // Hardware samples become counter tracks under the GPU streams, with the samples' values.
    void hardwareSamplesAreCounterTracks() {
        sightline::Trace t = sightline::importTrace(fixture("dense_healthy.json.gz").toStdString());
        int64_t lo = INT64_MAX, hi = INT64_MIN;
        for (const auto& g : t.gpu) lo = std::min(lo, g.start_ns), hi = std::max(hi, g.end_ns);
        const int64_t step = (hi - lo) / 1000;
        for (int64_t s = lo; s < hi; s += step)
            for (auto [name, v] : {std::pair{"sm__cycles_active.avg.pct_of_peak_sustained_elapsed", 80.0},
                                   {"sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_elapsed", 30.0}}) {
                sightline::CounterSample c;
                c.start_ns = s;
                c.end_ns = s + step;
                c.value = v;
                c.name = t.strings.intern(name);
                c.device = 0;
                t.counters.push_back(c);
            }
        const QString db = QString(SIGHTLINE_BINARY_DIR) + "/hw_samples.db";
        QFile::remove(db);
        sightline::writeTraceDb(t, db.toStdString());
        MainWindow w;
        QVERIFY(w.openFileSync(db).isEmpty());
        const auto& tracks = w.document()->tracks();
        int last_stream = -1, sm = -1, tensor = -1;
        for (int i = 0; i < int(tracks.size()); ++i) {
            if (tracks[i].gpu && !tracks[i].counter) last_stream = i;
            if (tracks[i].label == "GPU 0 SMs active %") sm = i;
            if (tracks[i].label == "GPU 0 tensor pipes %") tensor = i;
        }
        QVERIFY(sm > last_stream && tensor > sm);
        QCOMPARE(w.document()->counterValue(tracks[size_t(sm)], lo, lo + 10 * step), 80.0);
        QCOMPARE(w.document()->counterValue(tracks[size_t(tensor)], lo, lo + 10 * step), 30.0);
        w.resize(1400, 900);
        w.show();
        QVERIFY(!w.grab().toImage().isNull()); // the counter tracks draw
    }

    void screenshotShowsTimelineTablesAndFindings() {
        MainWindow w;
        w.resize(1400, 900);
        QVERIFY(w.openFileSync(fixture("qwen3next_fallback_small.json.gz")).isEmpty());
        w.show();
        QVERIFY(QTest::qWaitForWindowExposed(&w));
        const QImage img = w.grab().toImage();
        const QRect timeline(w.timeline()->mapTo(&w, QPoint(TimelineView::kLabelWidth, 20)),
                             QSize(w.timeline()->width() - TimelineView::kLabelWidth, 200));
        QVERIFY2(drawnShare(img, timeline.intersected(img.rect())) > 0.05, "the timeline area is blank");
        const QRect findings(w.findingsView()->mapTo(&w, QPoint(0, 0)), w.findingsView()->size());
        QVERIFY2(drawnShare(img, findings.intersected(img.rect())) > 0.01, "the findings table is blank");
        img.save(QString(SIGHTLINE_BINARY_DIR) + "/gui-screenshot.png");
        if (qEnvironmentVariableIntValue("UPDATE_SCREENSHOT") == 1)
            img.save(QString(SIGHTLINE_SOURCE_DIR) + "/docs/images/gui.png");
    }
};

QTEST_MAIN(GuiTest)
#include "test_gui.moc"
