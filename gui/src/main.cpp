// sightline-gui: the trace explorer.
#include "main_window.h"

#include <QApplication>

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setApplicationName("sightline-gui");
    sightline::gui::MainWindow window;
    window.resize(1400, 900);
    window.show();
    const QStringList args = QApplication::arguments();
    if (args.size() > 1) window.openFile(args.at(1));
    return QApplication::exec();
}
