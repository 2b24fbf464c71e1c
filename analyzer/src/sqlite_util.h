#pragma once
// Thin RAII wrappers over the SQLite C API, throwing InputError with the database's message.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <sqlite3.h>

namespace sightline::detail {

class Db {
public:
    Db(const std::filesystem::path& path, int flags);
    ~Db();
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;
    Db(Db&& other) noexcept : m_db(other.m_db), m_path(std::move(other.m_path)) { other.m_db = nullptr; }
    sqlite3* handle() const { return m_db; }
    void exec(const char* sql);
    int64_t scalar(const char* sql);
    [[noreturn]] void fail(std::string_view what) const;

private:
    sqlite3* m_db = nullptr;
    std::string m_path;
};

class Stmt {
public:
    Stmt(Db& db, const char* sql);
    ~Stmt();
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    Stmt& bind(int col, int64_t v) {
        sqlite3_bind_int64(m_stmt, col, v);
        return *this;
    }
    Stmt& bind(int col, std::string_view v) {
        sqlite3_bind_text(m_stmt, col, v.empty() ? "" : v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
        return *this;
    }
    Stmt& bindReal(int col, double v) {
        sqlite3_bind_double(m_stmt, col, v);
        return *this;
    }
    Stmt& bindNull(int col) {
        sqlite3_bind_null(m_stmt, col);
        return *this;
    }
    // An empty blob stays a blob: SQLite binds a null pointer (an empty vector's data()) as NULL.
    Stmt& bindBlob(int col, const void* data, size_t bytes) {
        if (data) sqlite3_bind_blob64(m_stmt, col, data, bytes, SQLITE_STATIC);
        else sqlite3_bind_zeroblob(m_stmt, col, 0);
        return *this;
    }
    // Runs an INSERT/UPDATE to completion and resets for the next row.
    void run();
    // Steps a SELECT: true while there is a row.
    bool next();
    int64_t i64(int col) const { return sqlite3_column_int64(m_stmt, col); }
    double f64(int col) const { return sqlite3_column_double(m_stmt, col); }
    std::string_view text(int col) const {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(m_stmt, col));
        return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(m_stmt, col))) : std::string_view{};
    }

private:
    Db& m_db;
    sqlite3_stmt* m_stmt = nullptr;
};

} // namespace sightline::detail
