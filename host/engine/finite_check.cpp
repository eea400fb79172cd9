#include "engine/finite_check.hpp"

#include <megahost/error.hpp>

#include <glog/logging.h>

#include <cmath>
#include <sstream>
#include <vector>

namespace mh {
namespace {

// The parameter whose local gradient first holds a NaN or infinity, in the
// order parameters were laid out; "" when every one is finite here.
std::string first_nonfinite_gradient(const ParamSet& params, Device& device) {
  std::vector<float> grad;
  for (size_t id = 0; id < params.infos().size(); ++id) {
    if (!params.trainable(int(id))) continue;
    grad.resize(size_t(params.info(int(id)).numel()));
    device.to_host(grad.data(), params.grad(int(id)), grad.size() * sizeof(float));
    for (float g : grad)
      if (!std::isfinite(g)) return params.info(int(id)).name;
  }
  return "";
}

}  // namespace

bool finite_step(int64_t step, double loss, double grad_norm, NonFinitePolicy policy, const ParamSet& params,
                 Device& device) {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) return true;
  std::ostringstream what;
  what << "step " << step << ": the loss is " << loss << " and the gradient norm " << grad_norm;
  if (std::string name = first_nonfinite_gradient(params, device); !name.empty())
    what << "; the first parameter with a non-finite gradient on this rank is '" << name << "'";
  if (policy.skip) {
    LOG_IF(WARNING, policy.log) << what.str() << "; the step's update is skipped (train.skip_nonfinite)";
    return false;
  }
  throw Error(MH_INTERNAL, what.str() + "; lower train.lr, set train.clip_grad, or set train.skip_nonfinite = true "
                                        "to skip such steps");
}

}  // namespace mh
