// The environment that libraries plugins link read once, as they load: set
// before the host loads the first plugin, since a library's own start-up
// runs before any plugin code could set it. A user's own setting is kept.
#pragma once

namespace mh {

void prepare_library_environment();

}  // namespace mh
