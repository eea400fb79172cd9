// A checkpoint folder belongs to one run (host/checkpoint/folder_owner.hpp):
// a fresh run into another run's folder is refused and changes nothing,
// resuming carries the run on, checkpoint.overwrite takes the folder, a
// locked folder is refused naming the cause, and a save removes only the
// run's own temporary names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "megahost_run.hpp"
#include "support/files.hpp"

namespace mh::ckpt::test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class FolderOwner : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    Outcome first = run_megahost({"train.steps=2", "checkpoint.dir=" + dir_});
    ASSERT_EQ(first.status, 0) << first.log;
    owner_ = mh::test::file_bytes(dir_ + "/megahost_run.json");
    ASSERT_THAT(owner_, HasSubstr("\"run\""));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_, owner_;
};

// It replaced the step folders and `latest`; "auto" later resumed whichever
// run's step was newest.
TEST_F(FolderOwner, AFreshRunIntoAnotherRunsFolderIsRefusedAndChangesNothing) {
  const auto before = mh::test::folder_bytes(dir_);
  Outcome fresh = run_megahost({"train.steps=1", "checkpoint.dir=" + dir_});
  EXPECT_EQ(fresh.status, 1) << fresh.log;
  EXPECT_THAT(fresh.log, HasSubstr("checkpoint.dir = \"" + dir_ + "\" holds the checkpoints of another run"));
  EXPECT_THAT(fresh.log, HasSubstr("newest step_000000002"));
  EXPECT_THAT(fresh.log, HasSubstr("checkpoint.overwrite = true"));
  EXPECT_TRUE(fresh.losses.empty());
  EXPECT_TRUE(mh::test::folder_bytes(dir_) == before);
}

TEST_F(FolderOwner, ARunStartingFromAnotherFoldersCheckpointIsRefusedToo) {
  const std::string other = scratch_dir("folder_owner_other");
  ASSERT_EQ(run_megahost({"train.steps=1", "checkpoint.dir=" + other}).status, 0);
  Outcome r = run_megahost({"train.steps=3", "checkpoint.dir=" + dir_, "checkpoint.load=" + other});
  fs::remove_all(other);
  EXPECT_EQ(r.status, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("holds the checkpoints of another run"));
}

TEST_F(FolderOwner, ResumingCarriesTheRunOnUnderItsIdentity) {
  Outcome automatic = run_megahost({"train.steps=3", "checkpoint.dir=" + dir_, "checkpoint.load=auto"});
  ASSERT_EQ(automatic.status, 0) << automatic.log;
  Outcome named = run_megahost({"train.steps=4", "checkpoint.dir=" + dir_, "checkpoint.load=" + dir_ + "/step_000000003"});
  ASSERT_EQ(named.status, 0) << named.log;
  EXPECT_TRUE(fs::exists(dir_ + "/step_000000004"));
  EXPECT_EQ(mh::test::file_bytes(dir_ + "/megahost_run.json"), owner_);
}

TEST_F(FolderOwner, OverwriteTakesTheFolderAndDeletesTheOtherRunsCheckpoints) {
  Outcome r = run_megahost({"train.steps=1", "checkpoint.dir=" + dir_, "checkpoint.overwrite=true"});
  ASSERT_EQ(r.status, 0) << r.log;
  EXPECT_FALSE(fs::exists(dir_ + "/step_000000002"));
  EXPECT_TRUE(fs::exists(dir_ + "/step_000000001"));
  EXPECT_EQ(mh::test::file_bytes(dir_ + "/latest"), "step_000000001\n");
  EXPECT_NE(mh::test::file_bytes(dir_ + "/megahost_run.json"), owner_);
}

// Two runs at once interleaved their saves; the loser named a missing
// temporary file.
TEST_F(FolderOwner, AFolderLockedByARunningRunIsRefusedNamingTheCause) {
  const int fd = ::open((dir_ + "/megahost.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  Outcome r = run_megahost({"train.steps=3", "checkpoint.dir=" + dir_, "checkpoint.load=auto"});
  ::close(fd);
  EXPECT_EQ(r.status, 1) << r.log;
  EXPECT_THAT(r.log, HasSubstr("checkpoint.dir = \"" + dir_ + "\" is in use by another run"));
  EXPECT_THAT(r.log, HasSubstr("two runs saving into one folder would interleave their checkpoints"));
  EXPECT_FALSE(fs::exists(dir_ + "/step_000000003"));
}

// checkpoint.dir = . deleted the user's .tmp_notes folder.
TEST_F(FolderOwner, ASaveRemovesOnlyItsOwnTemporaryNames) {
  fs::create_directories(dir_ + "/.tmp_notes");
  std::ofstream(dir_ + "/.tmp_notes/todo.txt") << "mine";
  std::ofstream(dir_ + "/.trash_keep") << "mine too";
  std::ofstream(dir_ + "/.tmp_step_000000009") << "an interrupted save of an earlier version";
  Outcome r = run_megahost({"train.steps=3", "checkpoint.dir=" + dir_, "checkpoint.load=auto"});
  ASSERT_EQ(r.status, 0) << r.log;
  EXPECT_EQ(mh::test::file_bytes(dir_ + "/.tmp_notes/todo.txt"), "mine");
  EXPECT_EQ(mh::test::file_bytes(dir_ + "/.trash_keep"), "mine too");
  EXPECT_FALSE(fs::exists(dir_ + "/.tmp_step_000000009"));
}

}  // namespace
}  // namespace mh::ckpt::test
