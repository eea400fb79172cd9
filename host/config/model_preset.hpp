// model.arch as a preset: the variant keys a config leaves out of [model]
// take the named architecture's values; keys it sets win (docs/models.md).
#pragma once

#include <toml++/toml.h>

namespace mh {

// Fills [model]'s absent keys from its arch's preset. An absent or unknown
// arch changes nothing (validation reports an unknown one).
void apply_arch_preset(toml::table& root);

}  // namespace mh
