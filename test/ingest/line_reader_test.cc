#include "ingest/line_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

namespace rightsize {
namespace {

class LineReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rightsize-lr-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    auto p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string WriteGz(const std::string& name, const std::string& text) {
    auto p = (dir_ / name).string();
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return p;
  }
  static std::vector<std::string> ReadAll(LineReader& r, Status* error) {
    std::vector<std::string> lines;
    std::string_view line;
    while (true) {
      auto more = r.Next(&line);
      if (!more.ok()) {
        *error = more.status();
        break;
      }
      if (!*more) break;
      lines.emplace_back(line);
    }
    return lines;
  }
  std::filesystem::path dir_;
};

TEST_F(LineReaderTest, ReadsPlainAndGzipAlike) {
  std::string text = "a\r\nbb\n\nccc";  // CRLF, an empty line, no final newline
  for (const auto& path : {Write("p.txt", text), WriteGz("p.txt.gz", text)}) {
    auto r = LineReader::Open(path);
    ASSERT_TRUE(r.ok());
    Status err;
    auto lines = ReadAll(**r, &err);
    EXPECT_TRUE(err.ok()) << err.ToString();
    EXPECT_EQ(lines, (std::vector<std::string>{"a", "bb", "", "ccc"})) << path;
  }
}

TEST_F(LineReaderTest, LinesAcrossBufferBoundariesArriveWhole) {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "line number " + std::to_string(i) + "\n";
  auto r = LineReader::Open(WriteGz("big.gz", text));
  ASSERT_TRUE(r.ok());
  Status err;
  auto lines = ReadAll(**r, &err);
  ASSERT_EQ(lines.size(), 100000u);
  EXPECT_EQ(lines[77777], "line number 77777");
}

TEST_F(LineReaderTest, TruncatedGzipIsAClearError) {
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "1 2 3 4 5 6 7 8 9 " + std::to_string(i) + "\n";
  auto whole = WriteGz("whole.gz", text);
  std::ifstream in(whole, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto cut = Write("cut.gz", bytes.substr(0, bytes.size() / 2));
  auto r = LineReader::Open(cut);
  ASSERT_TRUE(r.ok());
  Status err;
  auto lines = ReadAll(**r, &err);
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.message().find("truncated"), std::string::npos) << err.message();
  EXPECT_GT(lines.size(), 0u);  // what came before is still delivered
}

TEST_F(LineReaderTest, BinaryDataIsRejected) {
  auto r = LineReader::Open(Write("bin", std::string("ok\n\x7f"
                                                     "ELF\0\0\x01\x02\n",
                                                     12)));
  ASSERT_TRUE(r.ok());
  Status err;
  ReadAll(**r, &err);
  EXPECT_NE(err.message().find(":2: binary data"), std::string::npos) << err.message();
}

TEST_F(LineReaderTest, OverlongLineIsSkippedNotBuffered) {
  std::string text = "first\n" + std::string(3 << 20, 'x') + "\nlast\n";
  auto r = LineReader::Open(Write("long.txt", text));
  ASSERT_TRUE(r.ok());
  std::string_view line;
  ASSERT_TRUE(*(*r)->Next(&line));
  EXPECT_EQ(line, "first");
  auto bad = (*r)->Next(&line);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":2: line longer than"), std::string::npos);
  auto next = (*r)->Next(&line);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_TRUE(*next);
  EXPECT_EQ(line, "last");
}

TEST_F(LineReaderTest, MissingFileAndFolderAreErrors) {
  auto missing = LineReader::Open((dir_ / "nope").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("No such file"), std::string::npos);
  auto folder = LineReader::Open(dir_.string());
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.status().message().find("is a folder"), std::string::npos);
}

}  // namespace
}  // namespace rightsize
