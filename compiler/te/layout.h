#pragma once
// Layout transforms named the way TVM and oneDNN name blocked layouts: one
// letter per dimension of the source ("NCHW", "OIHW"); the destination lists
// every source letter once, in its new order, and may block a dimension with
// a factor and the lower-case letter, which becomes an inner dimension
// ("NCHW16c": C split into C/16 outer blocks and 16 inner lanes;
// "OIHW4i16o"). A layout transform is a pure index map:
//
//   dst index of X   = src[X] / f   (or src[X] when X is not blocked)
//   dst index of fx  = src[X] % f
//   src[X]           = dst[X] * f + dst[x]
//
// A blocked dimension that is not a multiple of its factor is padded with
// zeros to the next multiple (oneDNN's blocked formats do the same); a
// source dimension of extent 1 may be left out of the destination
// ("OIHW" -> "OI16o" for a 1x1 kernel's weights).

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/te/tensor.h"

namespace kiln::te {

class LayoutMap {
 public:
  // INVALID_ARGUMENT naming the problem for a malformed source or
  // destination, a rank that is not the shape's, a letter missing (of
  // extent above 1), repeated or unknown, or a factor of 0.
  static absl::StatusOr<LayoutMap> Make(const std::string& src, const std::string& dst,
                                        const std::vector<int64_t>& src_shape);

  const std::vector<int64_t>& dst_shape() const { return dst_shape_; }
  const std::string& src() const { return src_; }
  const std::string& dst() const { return dst_; }
  // Whether some blocked dimension is padded.
  bool padded() const;
  // Indices into the destination for source indices, and back (ToSrc may
  // point past a padded dimension's end).
  std::vector<ir::Expr> ToDst(const std::vector<ir::Expr>& src_idx) const;
  std::vector<ir::Expr> ToSrc(const std::vector<ir::Expr>& dst_idx) const;
  // The value of `t` (in the source layout) at destination indices `dst_idx`:
  // zero in the padding, whose loads are clamped in bounds.
  ir::Expr ValueAt(const Tensor& t, const std::vector<ir::Expr>& dst_idx) const;

 private:
  struct DstDim {
    int src_dim = 0;
    int64_t factor = 1;  // of the blocked source dimension (1: not blocked)
    bool inner = false;  // the lower-case block lanes
  };
  std::string src_, dst_;
  std::vector<int64_t> src_shape_, dst_shape_;
  std::vector<DstDim> dims_;
  std::vector<int> outer_of_;  // per source dim: its upper-case dst position, or -1 (extent 1)
  std::vector<int> inner_of_;  // per source dim: its lower-case dst position, or -1
};

// The compute "NAME" holding `t` in layout `dst`: packing as a compute
// definition. Schedule::TransformLayout adds it as a stage; templates use it
// for the weights they pack once, at compile time (Built::packs).
absl::StatusOr<Tensor> TransformLayoutOf(const Tensor& t, const std::string& src,
                                         const std::string& dst, const std::string& name);
// The same through a map already made for t's shape.
Tensor TransformLayoutOf(const Tensor& t, const LayoutMap& map, const std::string& name);

}  // namespace kiln::te
