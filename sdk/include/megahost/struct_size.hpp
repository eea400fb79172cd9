// The one test of "does this versioned struct or table have member X":
// members are only ever appended (abi.h), so a struct built against an
// older minor holds X exactly when its struct_size reaches X's last byte.
#pragma once

#include <cstddef>

namespace mh {

// Bytes from the start of `s` to the end of `member`: the struct_size a
// struct must have to hold it.
template <class T, class M>
size_t member_end(const T& s, M T::*member) {
  return size_t(reinterpret_cast<const char*>(&(s.*member)) - reinterpret_cast<const char*>(&s)) + sizeof(M);
}

// Whether `s`, as its producer sized it, holds `member`.
template <class T, class M>
bool reaches(const T& s, M T::*member) {
  return size_t(s.struct_size) >= member_end(s, member);
}

}  // namespace mh
