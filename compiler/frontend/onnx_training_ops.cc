// The optimizers of domain ai.onnx.preview.training as the ONNX nodes of
// their definitions (one update step, elementwise per tensor):
// - Adagrad (decay_factor, epsilon, norm_coefficient): R, T, then X1..Xn,
//   G1..Gn, H1..Hn; outputs X1_new..Xn_new, H1_new..Hn_new.
//     r = R / (1 + T decay_factor), g = norm_coefficient X + G,
//     H_new = H + g^2, X_new = X - r g / (sqrt(H_new) + epsilon)
// - Momentum (alpha, beta, mode "standard" or "nesterov", norm_coefficient):
//   R, T, X.., G.., V..; outputs X_new.., V_new...
//     g = norm_coefficient X + G, b = T > 0 ? beta : 1, V_new = alpha V + b g,
//     X_new = X - R V_new (standard), X - R (g + alpha V_new) (nesterov)
// - Adam (alpha, beta, epsilon, norm_coefficient, norm_coefficient_post):
//   R, T, X.., G.., V.., H..; outputs X_new.., V_new.., H_new...
//     g = norm_coefficient X + G, V_new = alpha V + (1 - alpha) g,
//     H_new = beta H + (1 - beta) g^2,
//     r = T > 0 ? R sqrt(1 - beta^T) / (1 - alpha^T) : R,
//     X_new = (1 - norm_coefficient_post) (X - r V_new / (sqrt(H_new) + epsilon))
// R and T are scalars (T an int64 count, read at run time); the scalars are
// cast to X's type. epsilon defaults to 1e-6; Momentum's alpha, beta and
// mode are required.
#include "compiler/frontend/importer.h"

namespace kiln::compiler::onnx_internal {

absl::Status Importer::ImportTraining(const onnx::NodeProto& node) {
  const std::string& op = node.op_type();
  const std::string base = Name(node);
  // Tensors updated together: Adagrad and Momentum carry two per tensor
  // (X, G, then H or V), Adam three (X, G, V, H); each gives back all but G.
  const int groups = op == "Adam" ? 4 : 3;
  if (op != "Adagrad" && op != "Momentum" && op != "Adam") {
    return absl::UnimplementedError(
        StrCat("unsupported operator 'ai.onnx.preview.training.", op, "' (node '", base, "')"));
  }
  const int tensors = node.input_size() - 2;
  if (node.input_size() < 2 + groups || tensors % groups != 0 ||
      node.output_size() != tensors / groups * (groups - 1)) {
    return absl::InvalidArgumentError(StrCat("node '", base, "' (", op, "): R, T and ", groups,
                                             " inputs per updated tensor, and ", groups - 1,
                                             " outputs per tensor, are needed"));
  }
  const int n = tensors / groups;
  if (op == "Momentum") {
    for (const char* required : {"alpha", "beta", "mode"}) {
      if (Attr(node, required) == nullptr) {
        return absl::InvalidArgumentError(
            StrCat("node '", base, "' (Momentum): attribute '", required, "' is required"));
      }
    }
  }
  const std::string mode = AttrString(node, "mode", "standard");
  if (op == "Momentum" && mode != "standard" && mode != "nesterov") {
    return absl::InvalidArgumentError(StrCat(
        "node '", base, "' (Momentum): mode must be standard or nesterov, got '", mode, "'"));
  }
  const std::string x0 = node.input(2);
  auto like_x = [&](const std::string& v) { return Emit(base, "CastLike", {v, x0}); };
  auto r = like_x(node.input(0));
  if (!r.ok()) return r.status();
  auto t = like_x(node.input(1));
  if (!t.ok()) return t.status();
  auto binary = [&](const char* o, const std::string& a, const std::string& b,
                    const std::string& out = "") {
    return Emit(base, o, {a, b}, nullptr, out);
  };
  auto constant = [&](float v) { return like_x(NamedScalar(base, v)); };
  // T > 0, for Momentum's and Adam's first step.
  KILN_EMIT_OR_RETURN(zero, constant(0.0f));
  KILN_EMIT_OR_RETURN(one, constant(1.0f));
  KILN_EMIT_OR_RETURN(started, binary("Greater", *t, zero));
  const bool adam = op == "Adam";
  KILN_EMIT_OR_RETURN(eps, constant(AttrFloat(node, "epsilon", 1e-6f)));
  KILN_EMIT_OR_RETURN(alpha, constant(AttrFloat(node, "alpha", adam ? 0.9f : 0.0f)));
  KILN_EMIT_OR_RETURN(beta, constant(AttrFloat(node, "beta", adam ? 0.999f : 0.0f)));
  // The step's learning rate.
  std::string rate = *r;
  if (op == "Adagrad") {
    KILN_EMIT_OR_RETURN(decay, constant(AttrFloat(node, "decay_factor", 0.0f)));
    KILN_EMIT_OR_RETURN(td, binary("Mul", *t, decay));
    KILN_EMIT_OR_RETURN(denom, binary("Add", one, td));
    KILN_EMIT_OR_RETURN(adjusted, binary("Div", *r, denom));
    rate = adjusted;
  } else if (op == "Adam") {
    KILN_EMIT_OR_RETURN(at, binary("Pow", alpha, *t));
    KILN_EMIT_OR_RETURN(bt, binary("Pow", beta, *t));
    KILN_EMIT_OR_RETURN(one_at, binary("Sub", one, at));
    KILN_EMIT_OR_RETURN(one_bt, binary("Sub", one, bt));
    KILN_EMIT_OR_RETURN(root, Emit(base, "Sqrt", {one_bt}));
    KILN_EMIT_OR_RETURN(scaled, binary("Mul", *r, root));
    KILN_EMIT_OR_RETURN(adjusted, binary("Div", scaled, one_at));
    KILN_EMIT_OR_RETURN(chosen, Emit(base, "Where", {started, adjusted, *r}));
    rate = chosen;
  }
  KILN_EMIT_OR_RETURN(norm, constant(AttrFloat(node, "norm_coefficient", 0.0f)));
  for (int i = 0; i < n; ++i) {
    const std::string x = node.input(2 + i);
    const std::string g = node.input(2 + n + i);
    const std::string s1 = node.input(2 + 2 * n + i);  // H (Adagrad) or V
    const std::string x_out = node.output(i);
    const std::string s1_out = node.output(n + i);
    KILN_EMIT_OR_RETURN(nx, binary("Mul", norm, x));
    KILN_EMIT_OR_RETURN(greg, binary("Add", nx, g));
    if (op == "Adagrad") {
      KILN_EMIT_OR_RETURN(g2, binary("Mul", greg, greg));
      KILN_EMIT_OR_RETURN(h_new, binary("Add", s1, g2, s1_out));
      KILN_EMIT_OR_RETURN(root, Emit(base, "Sqrt", {h_new}));
      KILN_EMIT_OR_RETURN(adaptive, binary("Add", root, eps));
      KILN_EMIT_OR_RETURN(step, binary("Mul", rate, greg));
      KILN_EMIT_OR_RETURN(ratio, binary("Div", step, adaptive));
      KILN_EMIT_OR_RETURN(x_new, binary("Sub", x, ratio, x_out));
    } else if (op == "Momentum") {
      KILN_EMIT_OR_RETURN(b, Emit(base, "Where", {started, beta, one}));
      KILN_EMIT_OR_RETURN(av, binary("Mul", alpha, s1));
      KILN_EMIT_OR_RETURN(bg, binary("Mul", b, greg));
      KILN_EMIT_OR_RETURN(v_new, binary("Add", av, bg, s1_out));
      std::string dir = v_new;
      if (mode == "nesterov") {
        KILN_EMIT_OR_RETURN(av_new, binary("Mul", alpha, v_new));
        KILN_EMIT_OR_RETURN(ahead, binary("Add", greg, av_new));
        dir = ahead;
      }
      KILN_EMIT_OR_RETURN(step, binary("Mul", rate, dir));
      KILN_EMIT_OR_RETURN(x_new, binary("Sub", x, step, x_out));
    } else {  // Adam
      const std::string h = node.input(2 + 3 * n + i);
      const std::string h_out = node.output(2 * n + i);
      KILN_EMIT_OR_RETURN(post, constant(1.0f - AttrFloat(node, "norm_coefficient_post", 0.0f)));
      KILN_EMIT_OR_RETURN(one_a, binary("Sub", one, alpha));
      KILN_EMIT_OR_RETURN(one_b, binary("Sub", one, beta));
      KILN_EMIT_OR_RETURN(av, binary("Mul", alpha, s1));
      KILN_EMIT_OR_RETURN(ag, binary("Mul", one_a, greg));
      KILN_EMIT_OR_RETURN(v_new, binary("Add", av, ag, s1_out));
      KILN_EMIT_OR_RETURN(g2, binary("Mul", greg, greg));
      KILN_EMIT_OR_RETURN(bh, binary("Mul", beta, h));
      KILN_EMIT_OR_RETURN(bg2, binary("Mul", one_b, g2));
      KILN_EMIT_OR_RETURN(h_new, binary("Add", bh, bg2, h_out));
      KILN_EMIT_OR_RETURN(root, Emit(base, "Sqrt", {h_new}));
      KILN_EMIT_OR_RETURN(denom, binary("Add", root, eps));
      KILN_EMIT_OR_RETURN(ratio, binary("Div", v_new, denom));
      KILN_EMIT_OR_RETURN(step, binary("Mul", rate, ratio));
      KILN_EMIT_OR_RETURN(moved, binary("Sub", x, step));
      KILN_EMIT_OR_RETURN(x_new, binary("Mul", post, moved, x_out));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler::onnx_internal
