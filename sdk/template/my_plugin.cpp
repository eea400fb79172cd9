// One component of kind recompute, "my_policy", with one option. Change the
// kind and the methods (megahost/plugin.hpp lists each kind's), keep the
// shape: a class per component, MH_PLUGIN listing them.
#include <megahost/plugin.hpp>

#include <string_view>

namespace {

class MyPolicy {
 public:
  static constexpr MH_Kind kind = MH_KIND_RECOMPUTE;
  static constexpr MH_OptionSpec options[] = {
      mh::opt_bool("keep_all", "true", "keep every activation (false: recompute all but the layer input)"),
  };

  explicit MyPolicy(const mh::CreateContext& ctx) : keep_all_(ctx.options.get_bool("keep_all")) {}

  MH_Decision decide(const MH_RecomputeQuery& query) const {
    return keep_all_ || std::string_view(query.activation) == "layer_input" ? MH_KEEP : MH_RECOMPUTE;
  }

 private:
  bool keep_all_;
};

}  // namespace

MH_PLUGIN("my_plugin", "0.1.0",
          mh::component<MyPolicy>("my_policy", "0.1.0", "a recompute policy to start from", MyPolicy::options))
