// A real PostgreSQL 15 server for tests: started once per test process on first use (a copy of a
// cluster initdb made once per machine, pg_ctl on a free port of 127.0.0.1, no fsync) in a
// temporary folder, stopped and deleted when the process ends; each test gets a database of its
// own (FreshPostgresDatabase).
//
// Run as root, initdb and the server run as the postgres user (initdb refuses root). Where
// Debian's postgresql-15 is not installed (scripts/install-deps.sh installs it),
// PostgresUnavailable() says why, and tests skip with that message.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace rightsize::testing {

class PostgresServer {
 public:
  // The running server (started on the first call), or nullptr with *why set.
  static PostgresServer* Get(std::string* why) {
    static PostgresServer* server = Start(why);
    static std::string failure = server == nullptr ? *why : "";
    if (server == nullptr) *why = failure;
    return server;
  }

  // A postgresql:// URL of a new, empty database on the server.
  std::string FreshDatabase() {
    static std::atomic<int> n{0};
    std::string name = fmt::format("rs_{}_{}", ::getpid(), n++);
    std::string admin = Url("postgres");
    PGconn* c = PQconnectdb(admin.c_str());
    std::string sql = "CREATE DATABASE " + name;
    PGresult* r = PQexec(c, sql.c_str());
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    std::string err = PQerrorMessage(c);
    PQclear(r);
    PQfinish(c);
    if (!ok) ADD_FAILURE() << "CREATE DATABASE " << name << ": " << err;
    return Url(name);
  }

  std::string Url(const std::string& db) const {
    return fmt::format("postgresql://postgres@127.0.0.1:{}/{}", port_, db);
  }

  static void StopIfStarted() {
    if (auto* s = started_) {
      (void)std::system(fmt::format("{} {}/pg_ctl -D {}/data -m immediate -w stop >/dev/null 2>&1",
                                    s->as_postgres_, s->bin_, s->root_)
                            .c_str());
      std::filesystem::remove_all(s->root_);
      started_ = nullptr;
    }
  }

 private:
  static std::string BinDir() {
    for (const char* dir : {"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin"}) {
      if (std::filesystem::exists(std::string(dir) + "/initdb")) return dir;
    }
    return "";
  }

  static int FreePort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      port = ntohs(addr.sin_port);
    }
    ::close(fd);
    return port;
  }

  static PostgresServer* Start(std::string* why) {
    auto* s = new PostgresServer();
    s->bin_ = BinDir();
    if (s->bin_.empty()) {
      *why =
          "PostgreSQL is not installed here (no /usr/lib/postgresql/15/bin/initdb; "
          "scripts/install-deps.sh installs postgresql-15)";
      return nullptr;
    }
    char tmpl[] = "/tmp/rightsize-pg-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      *why = "cannot make a temporary folder for PostgreSQL";
      return nullptr;
    }
    s->root_ = tmpl;
    if (::geteuid() == 0) {
      passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr) {
        *why = "running as root and there is no postgres user to run PostgreSQL as";
        return nullptr;
      }
      (void)::chown(s->root_.c_str(), pw->pw_uid, pw->pw_gid);
      s->as_postgres_ = "runuser -u postgres --";
    }
    // initdb once per machine (a second or several on a loaded one): later test processes
    // copy the cluster it made (/tmp/rightsize-pg-template-UID-VERSION, complete or absent:
    // it appears by rename).
    std::string log = s->root_ + "/initdb.log";
    std::string templ =
        fmt::format("/tmp/rightsize-pg-template-{}-{}", ::geteuid(),
                    std::filesystem::path(s->bin_).parent_path().filename().string());
    if (!std::filesystem::exists(templ + "/PG_VERSION")) {
      std::string initdb = fmt::format(
          "cd / && {} {}/initdb -D {}/template -U postgres -A trust -N --locale=C -E UTF8 >{} 2>&1",
          s->as_postgres_, s->bin_, s->root_, log);
      if (std::system(initdb.c_str()) != 0) {
        *why = "initdb failed: " + ReadFile(log);
        return nullptr;
      }
      std::error_code ec;
      std::filesystem::rename(s->root_ + "/template", templ, ec);  // another process's is as good
    }
    std::string copy = fmt::format("cd / && {} cp -a {} {}/data", s->as_postgres_, templ, s->root_);
    if (std::system(copy.c_str()) != 0) {
      *why = "cannot copy the PostgreSQL template " + templ;
      return nullptr;
    }
    for (int attempt = 0; attempt < 5; ++attempt) {
      s->port_ = FreePort();
      std::string start = fmt::format(
          "cd / && {0} {1}/pg_ctl -D {2}/data -l {2}/server.log -w -t 60 -o \"-k {2} -h "
          "127.0.0.1 -p {3} -c fsync=off -c synchronous_commit=off -c full_page_writes=off\" "
          "start >{2}/pg_ctl.log 2>&1",
          s->as_postgres_, s->bin_, s->root_, s->port_);
      if (std::system(start.c_str()) == 0) {
        started_ = s;
        return s;
      }
    }
    *why = "pg_ctl start failed: " + ReadFile(s->root_ + "/server.log");
    return nullptr;
  }

  static std::string ReadFile(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  std::string bin_, root_, as_postgres_;
  int port_ = 0;
  static inline PostgresServer* started_ = nullptr;
};

// A URL of a new database, or nullopt (with *why) where PostgreSQL cannot run here.
inline std::optional<std::string> FreshPostgresDatabase(std::string* why) {
  static bool registered = std::atexit(PostgresServer::StopIfStarted) == 0;  // after the tests
  (void)registered;
  PostgresServer* server = PostgresServer::Get(why);
  if (server == nullptr) return std::nullopt;
  return server->FreshDatabase();
}

}  // namespace rightsize::testing
