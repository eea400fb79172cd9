// A registry of one component per slot default (and a few more) whose option
// specs use every feature of MH_OptionSpec: each value type, ranges, choices
// and a required option. Config fuzzing runs against it instead of the built
// plugins, so that it needs no plugin build and its inputs mean the same on
// every checkout.
#pragma once

#include "plugins/registry.hpp"

namespace mh::fuzz {

const Registry& fixed_registry();

}  // namespace mh::fuzz
