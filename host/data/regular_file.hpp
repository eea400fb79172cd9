// Opening a file the user names for reading: only a regular file is read.
// A FIFO would wait forever for a writer, /dev/zero would read forever, a
// directory reads as nothing; each is refused by its type, naming the path.
#pragma once

#include <string>
#include <string_view>

namespace mh::data {

// A read-only descriptor of `path`, opened without waiting on a FIFO;
// throws mh::Error naming the path, what it is instead of a regular file,
// or the system's reason, then `fix`. The caller closes it.
int open_regular_file(const std::string& path, std::string_view fix);

// The whole text of `path`, opened as above.
std::string read_regular_file(const std::string& path, std::string_view fix);

}  // namespace mh::data
