// Plugins are opened RTLD_LOCAL: two plugins exporting the same symbol each
// call their own. The isolation fixtures both define isolation_decision(),
// one answering KEEP and one RECOMPUTE, and their policies decide whatever
// it answers; had the first been loaded RTLD_GLOBAL, the second policy
// would call the first's and decide KEEP too.
#include <gtest/gtest.h>

#include "plugins/assembly.hpp"
#include "megahost_process.hpp"
#include "plugins/plugin_loader.hpp"
#include "plugins/registry.hpp"

namespace mh::host::testing {
namespace {

// The decision of recompute component `name`, created and asked the way the
// engine does.
int32_t decision_of(const Registry& registry, const std::string& name) {
  const Component* component = registry.find(MH_KIND_RECOMPUTE, name);
  if (component == nullptr) throw std::runtime_error("no recompute component " + name);
  Slot slot{"recompute", MH_KIND_RECOMPUTE, component, OptionValues()};
  Instance policy(slot, 1, 0);
  MH_RecomputeQuery query{sizeof(MH_RecomputeQuery), 0, 0, 1, "qkv", 0};
  int32_t decision = -1;
  check(policy.api<MH_RecomputeApi>()->decide(policy.get(), &query, &decision), name);
  return decision;
}

TEST(SymbolIsolation, EachPluginCallsItsOwnCopyOfASymbolBothExport) {
  Diagnostics diag;
  std::vector<LoadedPlugin> plugins = load_plugins({fixture("isolation_keep"), fixture("isolation_recompute")}, diag);
  Registry registry(plugins, diag);
  ASSERT_FALSE(diag.has_errors()) << diag.report();
  EXPECT_EQ(decision_of(registry, "isolation_keep"), MH_KEEP);
  EXPECT_EQ(decision_of(registry, "isolation_recompute"), MH_RECOMPUTE);
}

}  // namespace
}  // namespace mh::host::testing
