#include "sqlite_util.h"

#include "sightline/error.h"

#include <fmt/format.h>

namespace sightline::detail {

Db::Db(const std::filesystem::path& path, int flags) : m_path(path.string()) {
    if (sqlite3_open_v2(m_path.c_str(), &m_db, flags, nullptr) != SQLITE_OK) {
        std::string why = m_db ? sqlite3_errmsg(m_db) : "out of memory";
        sqlite3_close(m_db);
        m_db = nullptr;
        throw InputError(fmt::format("{}: cannot open database: {}", m_path, why));
    }
}

Db::~Db() { sqlite3_close(m_db); }

void Db::fail(std::string_view what) const {
    throw InputError(fmt::format("{}: {}: {}", m_path, what, sqlite3_errmsg(m_db)));
}

void Db::exec(const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(m_db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
        std::string why = err ? err : "error";
        sqlite3_free(err);
        throw InputError(fmt::format("{}: {}", m_path, why));
    }
}

int64_t Db::scalar(const char* sql) {
    Stmt s(*this, sql);
    return s.next() ? s.i64(0) : 0;
}

Stmt::Stmt(Db& db, const char* sql) : m_db(db) {
    if (sqlite3_prepare_v2(db.handle(), sql, -1, &m_stmt, nullptr) != SQLITE_OK)
        db.fail("not a Sightline trace database, or a damaged one");
}

Stmt::~Stmt() { sqlite3_finalize(m_stmt); }

void Stmt::run() {
    if (sqlite3_step(m_stmt) != SQLITE_DONE)
        m_db.fail("write failed");
    sqlite3_reset(m_stmt);
}

bool Stmt::next() {
    const int rc = sqlite3_step(m_stmt);
    if (rc == SQLITE_ROW)
        return true;
    if (rc != SQLITE_DONE)
        m_db.fail("read failed");
    return false;
}

} // namespace sightline::detail
