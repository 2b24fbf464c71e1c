// GUI benchmark: opening a trace in the GUI's document (a trace database: import excluded) and
// rendering timeline frames offscreen at full-trace, mid and deep zoom. Prints each figure next to
// its targets (open under 5 s for 10 million events, a frame under 16 ms).
//
// usage: QT_QPA_PLATFORM=offscreen sightline_gui_bench TRACE [frames]
#include "timeline_view.h"
#include "trace_document.h"

#include <QApplication>
#include <QImage>
#include <QPainter>

#include <chrono>
#include <cstdio>
#include <vector>

using namespace sightline::gui;
using Clock = std::chrono::steady_clock;

static double ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    if (argc < 2) {
        std::fprintf(stderr, "usage: sightline_gui_bench TRACE [frames]\n");
        return 2;
    }
    const int frames = argc > 2 ? std::atoi(argv[2]) : 20;
    std::atomic<bool> never{false};
    const auto t0 = Clock::now();
    // The document reports 0.8 when read, 0.85 with its op tree, 0.95 with its report (the tracks
    // are built beside the report), 1.0 when done: the phases' times.
    std::vector<std::pair<double, Clock::time_point>> marks;
    auto doc = TraceDocument::load(argv[1], never, [&](double f) {
        if (f >= 0.8 && (marks.empty() || marks.back().first < f)) marks.emplace_back(f, Clock::now());
    });
    const auto t1 = Clock::now();
    const size_t events = doc->trace().cpu.size() + doc->trace().gpu.size();
    std::printf("trace: %s, %zu events, %zu tracks\n", argv[1], events, doc->tracks().size());
    std::printf("open (load, analyse, build tracks): %.0f ms; target < 5000 ms for 10M events\n", ms(t0, t1));
    const char* phase[] = {"read", "op tree", "report (tracks beside it)", "tracks' rest"};
    auto last = t0;
    int k = 0;
    for (const auto& [f, at] : marks) {
        std::printf("  %-26s %6.0f ms\n", phase[std::min(k++, 3)], ms(last, at));
        last = at;
    }

    TimelineView view;
    view.resize(1920, 1080);
    view.setDocument(doc.get());
    QImage img(view.size(), QImage::Format_ARGB32_Premultiplied);
    {
        // The first paint also sets up Qt's fonts and glyph caches: timed apart from the frames.
        const auto a = Clock::now();
        QPainter p(&img);
        view.render(&p);
        p.end();
        std::printf("first paint after opening (Qt's font set-up included): %.2f ms\n", ms(a, Clock::now()));
    }
    const int64_t span = doc->end() - doc->begin();
    struct Level {
        const char* name;
        double fraction;
    } levels[] = {{"full trace", 1.0}, {"mid (1/100)", 0.01}, {"deep (1/100000)", 1e-5}};
    for (const Level& l : levels) {
        const int64_t width = std::max<int64_t>(1000, int64_t(double(span) * l.fraction));
        double worst = 0, total = 0;
        for (int f = 0; f < frames; ++f) {
            // Pan across the trace so each frame draws a different window.
            const int64_t start = doc->begin() + int64_t(double(span - width) * (double(f) / std::max(1, frames - 1)));
            view.setRange(start, start + width);
            const auto a = Clock::now();
            QPainter p(&img);
            view.render(&p);
            p.end();
            const double d = ms(a, Clock::now());
            worst = std::max(worst, d);
            total += d;
        }
        std::printf("frame at %-16s mean %6.2f ms, worst %6.2f ms over %d frames; target < 16 ms\n", l.name, total / frames, worst, frames);
    }
    return 0;
}
