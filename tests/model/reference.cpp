// Double-precision reference layers and model for the model tests (see reference.hpp): plain
// loops written from the definitions, sharing no code with model/ops (only the init RNG).
#include "reference.hpp"

#include <algorithm>

#include "model/init.hpp"

namespace paci::model::reference {

Vec encoder(const std::vector<std::int32_t>& tokens, const Vec& wte, const Vec& wpe, std::size_t B,
            std::size_t T, std::size_t C) {
  Vec out(B * T * C);
  for (std::size_t r = 0; r < B * T; ++r) {
    for (std::size_t c = 0; c < C; ++c) {
      out[r * C + c] = wte[static_cast<std::size_t>(tokens[r]) * C + c] + wpe[(r % T) * C + c];
    }
  }
  return out;
}

Vec layernorm(const Vec& x, const Vec& weight, const Vec& bias, std::size_t R, std::size_t C) {
  Vec out(R * C);
  for (std::size_t r = 0; r < R; ++r) {
    double mean = 0, var = 0;
    for (std::size_t c = 0; c < C; ++c) mean += x[r * C + c];
    mean /= static_cast<double>(C);
    for (std::size_t c = 0; c < C; ++c) var += (x[r * C + c] - mean) * (x[r * C + c] - mean);
    var /= static_cast<double>(C);
    const double rstd = 1.0 / std::sqrt(var + 1e-5);
    for (std::size_t c = 0; c < C; ++c) {
      out[r * C + c] = (x[r * C + c] - mean) * rstd * weight[c] + bias[c];
    }
  }
  return out;
}

Vec matmul(const Vec& x, const Vec& weight, const Vec& bias, std::size_t R, std::size_t C,
           std::size_t OC) {
  Vec out(R * OC);
  for (std::size_t r = 0; r < R; ++r) {
    for (std::size_t o = 0; o < OC; ++o) {
      double s = bias.empty() ? 0.0 : bias[o];
      for (std::size_t c = 0; c < C; ++c) s += x[r * C + c] * weight[o * C + c];
      out[r * OC + o] = s;
    }
  }
  return out;
}

Vec attention(const Vec& qkv, std::size_t B, std::size_t T, std::size_t C, std::size_t NH) {
  const std::size_t HS = C / NH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(HS));
  Vec out(B * T * C, 0.0), p(T);
  for (std::size_t b = 0; b < B; ++b) {
    for (std::size_t h = 0; h < NH; ++h) {
      for (std::size_t t = 0; t < T; ++t) {
        const double* q = &qkv[(b * T + t) * 3 * C + h * HS];
        double pmax = -1e300;
        for (std::size_t j = 0; j <= t; ++j) {
          const double* k = &qkv[(b * T + j) * 3 * C + C + h * HS];
          double s = 0;
          for (std::size_t i = 0; i < HS; ++i) s += q[i] * k[i];
          p[j] = s * scale;
          pmax = std::max(pmax, p[j]);
        }
        double sum = 0;
        for (std::size_t j = 0; j <= t; ++j) sum += (p[j] = std::exp(p[j] - pmax));
        for (std::size_t j = 0; j <= t; ++j) {
          const double* v = &qkv[(b * T + j) * 3 * C + 2 * C + h * HS];
          for (std::size_t i = 0; i < HS; ++i)
            out[(b * T + t) * C + h * HS + i] += p[j] / sum * v[i];
        }
      }
    }
  }
  return out;
}

Vec gelu(const Vec& x) {
  Vec out(x.size());
  const double s = std::sqrt(2.0 / M_PI);
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = 0.5 * x[i] * (1 + std::tanh(s * (x[i] + 0.044715 * x[i] * x[i] * x[i])));
  }
  return out;
}

double crossentropy(const Vec& logits, const std::vector<std::int32_t>& targets, std::size_t R,
                    std::size_t V) {
  double total = 0;
  for (std::size_t r = 0; r < R; ++r) {
    const double* z = &logits[r * V];
    double zmax = z[0], sum = 0;
    for (std::size_t v = 1; v < V; ++v) zmax = std::max(zmax, z[v]);
    for (std::size_t v = 0; v < V; ++v) sum += std::exp(z[v] - zmax);
    total += std::log(sum) - (z[targets[r]] - zmax);
  }
  return total / static_cast<double>(R);
}

namespace {
Vec slice(const Vec& params, std::size_t offset, std::size_t n) {
  return Vec(params.begin() + static_cast<std::ptrdiff_t>(offset),
             params.begin() + static_cast<std::ptrdiff_t>(offset + n));
}
void add(Vec& a, const Vec& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
}
}  // namespace

Vec moe_mlp(const GptConfig& config, const ParamLayout& layout, const Vec& params,
            const std::string& prefix, const Vec& ln2, std::size_t R, double* aux) {
  const MoeConfig& m = config.moe;
  const std::size_t C = config.d_model, E = m.experts, K = m.top_k, H = m.hidden;
  auto tensor = [&](const std::string& name) {
    const ParamTensor& t = layout.tensor(prefix + name);
    return slice(params, t.offset, t.numel);
  };
  auto swiglu = [&](const std::string& name, const Vec& x, std::size_t rows) {
    const Vec a = matmul(x, tensor(name + ".w1.weight"), {}, rows, C, H);
    const Vec b = matmul(x, tensor(name + ".w3.weight"), {}, rows, C, H);
    Vec h(rows * H);
    for (std::size_t i = 0; i < h.size(); ++i) h[i] = a[i] / (1 + std::exp(-a[i])) * b[i];
    return matmul(h, tensor(name + ".w2.weight"), {}, rows, H, C);
  };
  Vec probs = matmul(ln2, tensor("moe.router.weight"), {}, R, C, E);
  for (std::size_t t = 0; t < R; ++t) {
    double* z = &probs[t * E];
    const double zmax = *std::max_element(z, z + E);
    double sum = 0;
    for (std::size_t e = 0; e < E; ++e) sum += (z[e] = std::exp(z[e] - zmax));
    for (std::size_t e = 0; e < E; ++e) z[e] /= sum;
  }
  // Top-K by probability (a stable sort: the lower index first on a tie), then capacity in
  // GShard's priority: every token's j-th choice before any (j+1)-th.
  std::vector<std::size_t> choice(R * K);
  std::vector<double> chosen(E, 0.0);
  for (std::size_t t = 0; t < R; ++t) {
    std::vector<std::size_t> order(E);
    for (std::size_t e = 0; e < E; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return probs[t * E + a] > probs[t * E + b];
    });
    for (std::size_t j = 0; j < K; ++j) {
      choice[t * K + j] = order[j];
      chosen[order[j]] += 1;
    }
  }
  const std::size_t capacity = m.capacity(R);
  std::vector<std::size_t> taken(E, 0);
  std::vector<bool> kept(R * K);
  for (std::size_t j = 0; j < K; ++j)
    for (std::size_t t = 0; t < R; ++t) kept[t * K + j] = taken[choice[t * K + j]]++ < capacity;
  Vec out = m.shared_expert ? swiglu("moe.shared", ln2, R) : Vec(R * C, 0.0);
  for (std::size_t t = 0; t < R; ++t) {
    double sum = 0;
    for (std::size_t j = 0; j < K; ++j) sum += probs[t * E + choice[t * K + j]];
    const Vec x(ln2.begin() + static_cast<std::ptrdiff_t>(t * C),
                ln2.begin() + static_cast<std::ptrdiff_t>((t + 1) * C));
    for (std::size_t j = 0; j < K; ++j) {
      if (!kept[t * K + j]) continue;
      const std::size_t e = choice[t * K + j];
      const Vec y = swiglu("moe.experts." + std::to_string(e), x, 1);
      for (std::size_t c = 0; c < C; ++c) out[t * C + c] += probs[t * E + e] / sum * y[c];
    }
  }
  double loss = 0;
  for (std::size_t e = 0; e < E; ++e) {
    double P = 0;
    for (std::size_t t = 0; t < R; ++t) P += probs[t * E + e];
    loss += chosen[e] / static_cast<double>(R * K) * P / static_cast<double>(R);
  }
  *aux += m.aux_loss_coef * static_cast<double>(E) * loss;
  return out;
}

double gpt_loss(const GptConfig& config, const ParamLayout& layout, const Vec& params,
                const std::vector<std::int32_t>& tokens, const std::vector<std::int32_t>& targets,
                std::size_t B, std::size_t T, Vec* logits, double* aux_loss) {
  const std::size_t C = config.d_model, V = config.vocab, R = B * T;
  auto tensor = [&](const std::string& name) {
    const ParamTensor& t = layout.tensor(name);
    return slice(params, t.offset, t.numel);
  };
  double aux = 0;
  Vec x = encoder(tokens, tensor("wte"), tensor("wpe"), B, T, C);
  for (std::size_t l = 0; l < config.layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    Vec ln1 = layernorm(x, tensor(h + "ln_1.weight"), tensor(h + "ln_1.bias"), R, C);
    Vec qkv =
        matmul(ln1, tensor(h + "attn.c_attn.weight"), tensor(h + "attn.c_attn.bias"), R, C, 3 * C);
    Vec att = attention(qkv, B, T, C, config.heads);
    add(x, matmul(att, tensor(h + "attn.c_proj.weight"), tensor(h + "attn.c_proj.bias"), R, C, C));
    Vec ln2 = layernorm(x, tensor(h + "ln_2.weight"), tensor(h + "ln_2.bias"), R, C);
    if (config.moe.enabled()) {
      add(x, moe_mlp(config, layout, params, h, ln2, R, &aux));
      continue;
    }
    Vec fc =
        gelu(matmul(ln2, tensor(h + "mlp.c_fc.weight"), tensor(h + "mlp.c_fc.bias"), R, C, 4 * C));
    add(x, matmul(fc, tensor(h + "mlp.c_proj.weight"), tensor(h + "mlp.c_proj.bias"), R, 4 * C, C));
  }
  Vec lnf = layernorm(x, tensor("ln_f.weight"), tensor("ln_f.bias"), R, C);
  Vec z = matmul(lnf, tensor("lm_head.weight"), {}, R, C, V);
  if (logits != nullptr) *logits = z;
  if (aux_loss != nullptr) *aux_loss = aux;
  return crossentropy(z, targets, R, V) + aux;
}

Vec random_vec(std::size_t n, std::uint64_t seed, double scale) {
  InitRng rng(seed);
  Vec v(n);
  for (double& x : v) x = scale * rng.normal();
  return v;
}

std::vector<float> to_float(const Vec& v) {
  return std::vector<float>(v.begin(), v.end());
}

Vec to_double(std::span<const float> v) {
  return Vec(v.begin(), v.end());
}

std::vector<std::int32_t> random_ids(std::size_t n, std::size_t vocab, std::uint64_t seed) {
  InitRng rng(seed);
  std::vector<std::int32_t> ids(n);
  for (auto& id : ids) id = static_cast<std::int32_t>(rng.next() % vocab);
  return ids;
}

}  // namespace paci::model::reference
