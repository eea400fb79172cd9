#include "engine/parts/position.hpp"

#include "engine/ops.hpp"

namespace mh {

void RotaryPositionPart::encode(const MH_Tensor& heads, int64_t first_position, const MH_Tensor& positions,
                                bool inverse) const {
  ops::rope(c_.dev, heads, first_position, positions, c_.d.spec.rope_theta, inverse);
}

}  // namespace mh
