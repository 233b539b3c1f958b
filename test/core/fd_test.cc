#include "core/fd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <type_traits>
#include <utility>

namespace rightsize {
namespace {

// Whether `fd` is an open descriptor of this process.
bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

int OpenDevNull() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

static_assert(!std::is_copy_constructible_v<UniqueFd>);
static_assert(!std::is_copy_assignable_v<UniqueFd>);
static_assert(std::is_nothrow_move_constructible_v<UniqueFd>);
static_assert(std::is_nothrow_move_assignable_v<UniqueFd>);
static_assert(std::is_nothrow_destructible_v<UniqueFd>);

TEST(UniqueFdTest, ClosesWhenDestroyed) {
  int raw = OpenDevNull();
  ASSERT_GE(raw, 0);
  {
    UniqueFd fd(raw);
    EXPECT_TRUE(fd.valid());
    EXPECT_TRUE(static_cast<bool>(fd));
    EXPECT_EQ(fd.get(), raw);
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, EmptyByDefaultAndForNegativeValues) {
  UniqueFd none;
  EXPECT_FALSE(none.valid());
  EXPECT_FALSE(static_cast<bool>(none));
  EXPECT_EQ(none.get(), -1);
  UniqueFd failed(-5);  // what open() returns is -1, but any negative value is "none"
  EXPECT_EQ(failed.get(), -1);
}

TEST(UniqueFdTest, MoveLeavesTheSourceEmptyAndKeepsTheFdOpen) {
  int raw = OpenDevNull();
  ASSERT_GE(raw, 0);
  UniqueFd a(raw);
  UniqueFd b(std::move(a));
  EXPECT_EQ(a.get(), -1);  // NOLINT(bugprone-use-after-move): the moved-from state is the test
  EXPECT_FALSE(a.valid());
  EXPECT_EQ(b.get(), raw);
  EXPECT_TRUE(IsOpen(raw));

  UniqueFd c;
  c = std::move(b);
  EXPECT_EQ(b.get(), -1);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.get(), raw);
  EXPECT_TRUE(IsOpen(raw));
  c = UniqueFd();
  EXPECT_FALSE(IsOpen(raw));
}

TEST(UniqueFdTest, MoveAssignmentClosesWhatTheTargetHeld) {
  int first = OpenDevNull();
  int second = OpenDevNull();
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  UniqueFd a(first);
  UniqueFd b(second);
  a = std::move(b);
  EXPECT_FALSE(IsOpen(first));
  EXPECT_TRUE(IsOpen(second));
  EXPECT_EQ(a.get(), second);
  auto& self = a;
  a = std::move(self);  // self-move keeps the descriptor
  EXPECT_TRUE(IsOpen(second));
  EXPECT_EQ(a.get(), second);
}

TEST(UniqueFdTest, ReleaseHandsOverWithoutClosing) {
  int raw = OpenDevNull();
  ASSERT_GE(raw, 0);
  {
    UniqueFd fd(raw);
    EXPECT_EQ(fd.release(), raw);
    EXPECT_FALSE(fd.valid());
  }
  EXPECT_TRUE(IsOpen(raw));
  close(raw);
}

TEST(UniqueFdTest, ResetClosesTheOldFd) {
  int first = OpenDevNull();
  int second = OpenDevNull();
  ASSERT_GE(first, 0);
  ASSERT_GE(second, 0);
  UniqueFd fd(first);
  fd.reset(second);
  EXPECT_FALSE(IsOpen(first));
  EXPECT_TRUE(IsOpen(second));
  fd.reset();
  EXPECT_FALSE(IsOpen(second));
  EXPECT_FALSE(fd.valid());
}

TEST(UniqueFdTest, PipeEndsAreOwned) {
  int read_end = -1, write_end = -1;
  {
    Pipe p = MakePipe(O_CLOEXEC);
    ASSERT_TRUE(p.read.valid());
    ASSERT_TRUE(p.write.valid());
    read_end = p.read.get();
    write_end = p.write.get();
    ASSERT_EQ(write(p.write.get(), "x", 1), 1);
    char c = 0;
    ASSERT_EQ(read(p.read.get(), &c, 1), 1);
    EXPECT_EQ(c, 'x');
    EXPECT_NE(fcntl(read_end, F_GETFD) & FD_CLOEXEC, 0);
  }
  EXPECT_FALSE(IsOpen(read_end));
  EXPECT_FALSE(IsOpen(write_end));
}

}  // namespace
}  // namespace rightsize
