// Every reader of a file the user names refuses a FIFO (which would wait
// forever for a writer) and a device (/dev/zero reads forever) by its type,
// naming the path, instead of hanging.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <megahost/error.hpp>

#include <sys/stat.h>

#include <filesystem>

#include "data/gpt2_tokenizer.hpp"
#include "data/hf_tokenizer.hpp"
#include "data/regular_file.hpp"
#include "temp_dir.hpp"

namespace mh::data {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

class SpecialFiles : public ::testing::Test {
 protected:
  std::string fifo(const std::string& name) {
    const std::string path = dir_.file(name);
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0);
    return path;
  }
  std::string zero_link(const std::string& name) {
    const std::string path = dir_.file(name);
    std::filesystem::create_symlink("/dev/zero", path);
    return path;
  }
  testing::TempDir dir_;
};

TEST_F(SpecialFiles, ReadingAFifoIsRefusedByItsTypeInsteadOfWaiting) {
  const std::string path = fifo("f");
  EXPECT_THAT([&] { read_regular_file(path, "give a file"); },
              ThrowsMessage<Error>(HasSubstr(path + " is a FIFO, not a regular file; give a file")));
}

TEST_F(SpecialFiles, ALinkToDevZeroIsRefusedAsADevice) {
  const std::string path = zero_link("z");
  EXPECT_THAT([&] { read_regular_file(path, "give a file"); }, ThrowsMessage<Error>(HasSubstr(" is a device")));
}

TEST_F(SpecialFiles, TokenizerJsonThatIsAFifoOrDevZeroIsRefused) {
  const std::string f = fifo("tokenizer.json"), z = zero_link("zero.json");
  EXPECT_THAT([&] { HfTokenizer t(f); }, ThrowsMessage<Error>(HasSubstr("tokenizer.json is a FIFO")));
  EXPECT_THAT([&] { HfTokenizer t(z); }, ThrowsMessage<Error>(HasSubstr("zero.json is a device")));
}

TEST_F(SpecialFiles, VocabOrMergesThatIsAFifoIsRefusedNamingTheFlag) {
  const std::string f = fifo("vocab.json");
  const std::string merges = dir_.write("merges.txt", "#version: 0.2\n");
  EXPECT_THAT([&] { Gpt2Tokenizer t(f, merges); },
              ThrowsMessage<Error>(HasSubstr("vocab.json is a FIFO, not a regular file; gpt2 tokenizer: the vocab file "
                                             "cannot be read; pass its path with --vocab_file")));
  const std::string vocab = dir_.write("v.json", "{\"<|endoftext|>\": 0}");
  const std::string z = zero_link("merges_zero.txt");
  EXPECT_THAT([&] { Gpt2Tokenizer t(vocab, z); }, ThrowsMessage<Error>(HasSubstr("merges_zero.txt is a device")));
}

}  // namespace
}  // namespace mh::data
