// The process's start: its standard streams and its command-line flags, both
// settled before anything opens a file or runs.
#pragma once

#include <optional>

namespace mh {

// Reopens any of stdin, stdout and stderr that the caller closed on
// /dev/null, so that no file the run opens later takes its number and
// receives log lines meant for the terminal.
void keep_standard_streams_open();

// Parses gflags from argv (leaving section.key=value overrides in it) after
// checking that every flag is one megahost or its logging library defines.
// Returns the exit status when the process should stop here: 0 after --help,
// 2 after unknown flags (each named, with the closest known one).
std::optional<int> parse_command_line(int& argc, char**& argv);

}  // namespace mh
