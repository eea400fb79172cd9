// The checks a plugin's descriptor passes before the host reads any more of
// it, written once for the loader's 2.0 rules and the 1.x adapter's.
#pragma once

#include <megahost/abi.h>

#include <algorithm>
#include <cstddef>
#include <string>

#include "plugins/descriptor_arrays.hpp"

namespace mh {

// The index of the first NULL among the function pointers from byte `first`
// to byte `bytes` of `table` (the entries a kind requires), or -1. An
// optional entry may be NULL: the host reads NULL as absent and never calls
// it.
int first_null_entry(const void* table, size_t first, size_t bytes);

// What is wrong with an option spec, as the rest of "option #i ...": it needs
// every field up to `choices` (`doc` may lie past its struct_size) and a
// default that is a value of its type within its range and choices.
std::string option_problem(const MH_OptionSpec& o);

// What is wrong with a component's `count` options lying `stride` bytes
// apart, as the rest of "component #i ('x')...".
std::string options_problem(const MH_OptionSpec* options, size_t count, size_t stride);

// What is wrong with an array's stride, for elements that claim up to
// `largest` bytes; "" when it is sound.
std::string stride_problem(const char* field, size_t stride, size_t largest);

// The largest struct_size among `count` elements `stride` apart, stopping
// once one claims more than the stride (stride_problem then refuses it).
template <class T>
size_t largest_struct_size(const T* array, size_t stride, size_t count) {
  size_t largest = 0;
  for (size_t i = 0; i < count && largest <= stride; ++i)
    largest = std::max(largest, element(array, stride, i).struct_size);
  return largest;
}

}  // namespace mh
