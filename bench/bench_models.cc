// SPDX-License-Identifier: MIT
//
// bench_models - whole models against PyTorch's C++ library on the same weights, in this run:
//
//   gpt2 block    one transformer block of the GPT-2 of models/gen_models.py (width 256, 4 heads,
//                 MLP 1024) on [B, 128, 256] activations, B = 1 and 32: libtensor's operators
//                 (layer_norm, linear, scaled_dot_product_attention with is_causal, gelu tanh)
//                 against torch 1.13's (which has no scaled_dot_product_attention: matmul,
//                 masked_fill of the upper triangle, softmax, matmul, as a 1.13 user writes it);
//   gpt2 prompt   the whole 4-layer model on a 128-token prompt (models/gpt2.c), logits included;
//   gpt2 decode   tokens/s of greedy decoding with the key/value cache, 64 tokens after a
//                 16-token prompt (libtensor only: a torch decoder with a cache is a model of its
//                 own, so this line has no peer);
//   resnet18      the forward of models/resnet.c against torch's functional ResNet-18 (conv2d,
//                 batch_norm in eval, relu_, max_pool2d, adaptive_avg_pool2d, linear) on
//                 224 x 224 images, batches of 1 and 32, NCHW.
//
// Usage: bench_models [DATA_DIR [gpt2|resnet18]] (the second argument runs one model only).
//
// GFLOP/s count the multiply-adds of the matrix products and convolutions (2 per MAC), and the
// FMA peak is measured here; each line also prints the largest difference of the two results.
// Weights come from models/data (built by `make`): each safetensors file is read once and
// shared by both libraries (torch::from_blob over libtensor's buffers). Threads: TN_NUM_THREADS
// for libtensor and BLIS, at::set_num_threads for torch, default 2.
//
// Debian's torch reaches its BLAS through libblas.so.3, here OpenBLAS's pthreads build, whose
// own threads spin after each product beside torch's OpenMP pool: on this 2-core machine every
// operator after a product then waits for them (torch's GPT-2 block took 96 ms instead of 4,
// and libtensor's, in the same process, 208 ms). The benchmark therefore runs itself again with
// OPENBLAS_NUM_THREADS=1 unless it is set (torch then parallelises around the BLAS), which is
// torch's best configuration here; set it to compare others.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unistd.h>
#include <string>
#include <vector>

#ifdef TN_HAVE_LIBTORCH
#include <torch/torch.h>
#endif

#include "bench_machine.h"

extern "C" {
#include <tensor.h>

#include "models/gpt2.h"
#include "models/resnet.h"
}

namespace {

using bench::blocks;

[[noreturn]] void die(const char *what)
{
	std::fprintf(stderr, "bench_models: %s: %s\n", what, tn_last_error());
	std::exit(1);
}

void check(int rc, const char *what)
{
	if (rc < 0)
		die(what);
}

// ---- safetensors: enough of the format for gen_models.py's float32 files -------------------

struct weights {
	std::vector<char> bytes;
	std::map<std::string, tn_tensor *> tensors;
	~weights()
	{
		for (auto &kv : tensors)
			tn_tensor_unref(kv.second);
	}
};

// The value text after "key": in @obj, or "" when absent.
std::string field(const std::string &obj, const char *key)
{
	std::string k = std::string("\"") + key + "\"";
	size_t p = obj.find(k);
	if (p == std::string::npos)
		return "";
	p = obj.find(':', p) + 1;
	while (obj[p] == ' ')
		p++;
	size_t e = obj[p] == '[' ? obj.find(']', p) + 1 : obj.find_first_of(",}", p);
	return obj.substr(p, e - p);
}

std::vector<int64_t> ints(const std::string &list)
{
	std::vector<int64_t> v;
	const char *p = list.c_str();
	while (*p && *p != ']') {
		while (*p == '[' || *p == ',' || *p == ' ')
			p++;
		if (*p == ']' || !*p)
			break;
		v.push_back(std::strtoll(p, const_cast<char **>(&p), 10));
	}
	return v;
}

void load(weights &w, const std::string &path)
{
	FILE *f = std::fopen(path.c_str(), "rb");
	if (!f) {
		std::fprintf(stderr, "bench_models: %s: cannot open (run make first)\n", path.c_str());
		std::exit(1);
	}
	std::fseek(f, 0, SEEK_END);
	w.bytes.resize((size_t)std::ftell(f));
	std::fseek(f, 0, SEEK_SET);
	if (std::fread(w.bytes.data(), 1, w.bytes.size(), f) != w.bytes.size())
		std::exit(1);
	std::fclose(f);
	uint64_t hlen;
	std::memcpy(&hlen, w.bytes.data(), 8);
	std::string h(w.bytes.data() + 8, hlen);
	const char *data = w.bytes.data() + 8 + hlen;
	// Entries are "name": {...}; none of gen_models.py's names holds a brace.
	size_t p = 1;
	while ((p = h.find('"', p)) != std::string::npos) {
		size_t e = h.find('"', p + 1);
		std::string name = h.substr(p + 1, e - p - 1);
		size_t ob = h.find('{', e), cb = h.find('}', ob);
		std::string obj = h.substr(ob, cb - ob + 1);
		p = cb + 1;
		if (name == "__metadata__")
			continue;
		if (field(obj, "dtype") != "\"F32\"")
			continue;
		std::vector<int64_t> shape = ints(field(obj, "shape"));
		std::vector<int64_t> off = ints(field(obj, "data_offsets"));
		tn_tensor *t;
		check(tn_empty((int)shape.size(), shape.data(), TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT,
			       &t),
		      name.c_str());
		std::memcpy(tn_tensor_data(t), data + off[0], (size_t)(off[1] - off[0]));
		w.tensors[name] = t;
	}
}

int get_weight(void *ctx, const char *name, tn_tensor **ret)
{
	auto &m = static_cast<weights *>(ctx)->tensors;
	auto it = m.find(name);
	if (it == m.end())
		return TN_ENOENT;
	*ret = tn_tensor_ref(it->second);
	return 0;
}

tn_tensor *W(weights &w, const std::string &name)
{
	auto it = w.tensors.find(name);
	if (it == w.tensors.end()) {
		std::fprintf(stderr, "bench_models: no weight %s\n", name.c_str());
		std::exit(1);
	}
	return it->second;
}

#ifdef TN_HAVE_LIBTORCH
torch::Tensor T(tn_tensor *t)
{
	std::vector<int64_t> s(tn_tensor_sizes(t), tn_tensor_sizes(t) + tn_tensor_ndim(t));
	return torch::from_blob(tn_tensor_data(t), s, torch::kFloat32);
}

torch::Tensor TW(weights &w, const std::string &name) { return T(W(w, name)); }

double max_diff(tn_tensor *a, const torch::Tensor &b)
{
	return (T(a) - b).abs().max().item<double>();
}
#endif

// A new float32 tensor of @shape with deterministic values in [-1, 1).
tn_tensor *filled(std::vector<int64_t> shape, uint32_t seed)
{
	tn_tensor *t;
	check(tn_empty((int)shape.size(), shape.data(), TN_FLOAT32, TN_CPU, TN_CONTIGUOUS_FORMAT, &t),
	      "empty");
	float *p = static_cast<float *>(tn_tensor_data(t));
	uint32_t x = seed * 2654435761u + 1;
	for (int64_t i = 0; i < tn_tensor_numel(t); i++) {
		x = x * 1664525u + 1013904223u;
		p[i] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
	}
	return t;
}

// ---- GPT-2 --------------------------------------------------------------------------------------

const int64_t C = 256, H = 4, D = 64, L0 = 0; // models/gen_models.py: 4 heads of 64

// x + attention + MLP of layer 0 on [B, T, C], with libtensor's operators.
tn_tensor *lt_block(weights &w, tn_tensor *x)
{
	const std::string p = "h." + std::to_string(L0) + ".";
	const int64_t B = tn_tensor_sizes(x)[0], Tn = tn_tensor_sizes(x)[1];
	std::vector<tn_tensor *> tmp;
	auto k = [&](tn_tensor *t) { tmp.push_back(t); return t; };
	tn_tensor *h, *qkv, *heads[3], *y, *yt, *y2, *proj, *x1, *h2, *f, *g, *o, *out;
	check(tn_layer_norm(x, 1, &C, W(w, p + "ln_1.weight"), W(w, p + "ln_1.bias"), 1e-5, true, &h), "ln");
	k(h);
	check(tn_linear(h, W(w, p + "attn.c_attn.weight"), W(w, p + "attn.c_attn.bias"), &qkv), "qkv");
	k(qkv);
	for (int i = 0; i < 3; i++) {
		tn_tensor *part, *v4;
		check(tn_narrow(qkv, 2, i * C, C, &part), "narrow");
		k(part);
		int64_t s4[4] = { B, Tn, H, D };
		check(tn_view(part, 4, s4, &v4), "view");
		k(v4);
		check(tn_transpose(v4, 1, 2, &heads[i]), "transpose");
		k(heads[i]);
	}
	check(tn_scaled_dot_product_attention(heads[0], heads[1], heads[2], NULL, 0.0, true, NULL, &y),
	      "attention");
	k(y);
	check(tn_transpose(y, 1, 2, &yt), "transpose");
	k(yt);
	int64_t s3[3] = { B, Tn, C };
	check(tn_reshape(yt, 3, s3, &y2), "reshape");
	k(y2);
	check(tn_linear(y2, W(w, p + "attn.c_proj.weight"), W(w, p + "attn.c_proj.bias"), &proj), "proj");
	k(proj);
	check(tn_add(x, proj, tn_scalar_int(1), &x1), "add");
	k(x1);
	check(tn_layer_norm(x1, 1, &C, W(w, p + "ln_2.weight"), W(w, p + "ln_2.bias"), 1e-5, true, &h2), "ln");
	k(h2);
	check(tn_linear(h2, W(w, p + "mlp.c_fc.weight"), W(w, p + "mlp.c_fc.bias"), &f), "fc");
	k(f);
	check(tn_gelu(f, "tanh", &g), "gelu");
	k(g);
	check(tn_linear(g, W(w, p + "mlp.c_proj.weight"), W(w, p + "mlp.c_proj.bias"), &o), "fc2");
	k(o);
	check(tn_add(x1, o, tn_scalar_int(1), &out), "add");
	for (tn_tensor *t : tmp)
		tn_tensor_unref(t);
	return out;
}

#ifdef TN_HAVE_LIBTORCH
namespace F = torch::nn::functional;

// Transformer block @layer on [B, T, C].
torch::Tensor th_block(weights &w, const torch::Tensor &x, int64_t layer = L0)
{
	const std::string p = "h." + std::to_string(layer) + ".";
	const int64_t B = x.size(0), Tn = x.size(1);
	auto h = F::layer_norm(x, F::LayerNormFuncOptions({ C }).weight(TW(w, p + "ln_1.weight"))
					  .bias(TW(w, p + "ln_1.bias")).eps(1e-5));
	auto qkv = F::linear(h, TW(w, p + "attn.c_attn.weight"), TW(w, p + "attn.c_attn.bias"));
	auto q = qkv.narrow(2, 0, C).view({ B, Tn, H, D }).transpose(1, 2);
	auto k = qkv.narrow(2, C, C).view({ B, Tn, H, D }).transpose(1, 2);
	auto v = qkv.narrow(2, 2 * C, C).view({ B, Tn, H, D }).transpose(1, 2);
	auto s = torch::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt((double)D));
	auto mask = torch::ones({ Tn, Tn }, torch::kBool).triu(1);
	auto a = torch::softmax(s.masked_fill(mask, -INFINITY), -1);
	auto y = torch::matmul(a, v).transpose(1, 2).reshape({ B, Tn, C });
	auto x1 = x + F::linear(y, TW(w, p + "attn.c_proj.weight"), TW(w, p + "attn.c_proj.bias"));
	auto h2 = F::layer_norm(x1, F::LayerNormFuncOptions({ C }).weight(TW(w, p + "ln_2.weight"))
					    .bias(TW(w, p + "ln_2.bias")).eps(1e-5));
	auto f = F::linear(h2, TW(w, p + "mlp.c_fc.weight"), TW(w, p + "mlp.c_fc.bias"));
	auto g = F::gelu(f, F::GELUFuncOptions().approximate("tanh"));
	return x1 + F::linear(g, TW(w, p + "mlp.c_proj.weight"), TW(w, p + "mlp.c_proj.bias"));
}

// The whole GPT-2 on one prompt: embeddings, the blocks, ln_f, tied logits.
torch::Tensor th_gpt2(weights &w, const torch::Tensor &tokens, int64_t layers)
{
	auto x = F::embedding(tokens, TW(w, "wte.weight")) +
		 TW(w, "wpe.weight").narrow(0, 0, tokens.size(0));
	x = x.unsqueeze(0);
	for (int64_t l = 0; l < layers; l++)
		x = th_block(w, x, l);
	x = F::layer_norm(x, F::LayerNormFuncOptions({ C }).weight(TW(w, "ln_f.weight"))
				     .bias(TW(w, "ln_f.bias")).eps(1e-5));
	return F::linear(x.squeeze(0), TW(w, "wte.weight"));
}

// ---- ResNet-18 ------------------------------------------------------------------------------

torch::Tensor th_bn(weights &w, const std::string &p, const torch::Tensor &x)
{
	return F::batch_norm(x, TW(w, p + ".running_mean"), TW(w, p + ".running_var"),
			     F::BatchNormFuncOptions().weight(TW(w, p + ".weight"))
				     .bias(TW(w, p + ".bias")).training(false).eps(1e-5));
}

torch::Tensor th_resnet18(weights &w, const torch::Tensor &images)
{
	auto x = F::conv2d(images, TW(w, "conv1.weight"), F::Conv2dFuncOptions().stride(2).padding(3));
	x = th_bn(w, "bn1", x).relu_();
	x = F::max_pool2d(x, F::MaxPool2dFuncOptions(3).stride(2).padding(1));
	const int64_t strides[4] = { 1, 2, 2, 2 };
	for (int layer = 1; layer <= 4; layer++) {
		for (int b = 0; b < 2; b++) {
			const std::string p = "layer" + std::to_string(layer) + "." + std::to_string(b);
			int64_t s = b == 0 ? strides[layer - 1] : 1;
			auto y = F::conv2d(x, TW(w, p + ".conv1.weight"),
					   F::Conv2dFuncOptions().stride(s).padding(1));
			y = th_bn(w, p + ".bn1", y).relu_();
			y = F::conv2d(y, TW(w, p + ".conv2.weight"), F::Conv2dFuncOptions().padding(1));
			y = th_bn(w, p + ".bn2", y);
			auto idn = x;
			if (w.tensors.count(p + ".downsample.0.weight"))
				idn = th_bn(w, p + ".downsample.1",
					    F::conv2d(x, TW(w, p + ".downsample.0.weight"),
						      F::Conv2dFuncOptions().stride(s)));
			x = (y + idn).relu_();
		}
	}
	x = F::adaptive_avg_pool2d(x, F::AdaptiveAvgPool2dFuncOptions({ 1, 1 })).flatten(1);
	return F::linear(x, TW(w, "fc.weight"), TW(w, "fc.bias"));
}
#endif

// The multiply-adds of a ResNet-18 forward of one image of h x w (convolutions and fc).
double resnet18_macs(int64_t h, int64_t w)
{
	auto out = [](int64_t n, int64_t k, int64_t s, int64_t p) { return (n + 2 * p - k) / s + 1; };
	double macs = 0;
	int64_t H = out(h, 7, 2, 3), Wd = out(w, 7, 2, 3);
	macs += (double)H * Wd * 64 * 3 * 49;
	H = out(H, 3, 2, 1);
	Wd = out(Wd, 3, 2, 1);
	int64_t cin = 64;
	const int64_t chans[4] = { 64, 128, 256, 512 };
	for (int l = 0; l < 4; l++) {
		for (int b = 0; b < 2; b++) {
			int64_t s = (b == 0 && l > 0) ? 2 : 1, co = chans[l];
			int64_t Ho = out(H, 3, s, 1), Wo = out(Wd, 3, s, 1);
			macs += (double)Ho * Wo * co * cin * 9 + (double)Ho * Wo * co * co * 9;
			if (s == 2)
				macs += (double)Ho * Wo * co * cin;
			H = Ho;
			Wd = Wo;
			cin = co;
		}
	}
	return macs + 512.0 * 1000;
}

// One contender per library computing the same result: libtensor's returns a new reference.
struct contenders {
	std::function<tn_tensor *()> lt;
#ifdef TN_HAVE_LIBTORCH
	std::function<torch::Tensor()> th;
#endif
};

// Time both in alternating blocks of @reps runs, compare one result of each, print a row.
void row(const char *name, int64_t batch, double flop, double peak, int reps,
	 const contenders &c, const char *note)
{
	std::vector<std::function<void()>> fns = { [&] { tn_tensor_unref(c.lt()); } };
#ifdef TN_HAVE_LIBTORCH
	fns.push_back([&] { (void)c.th(); });
#endif
	std::vector<double> s = blocks(fns, reps);
	double lt = flop / s[0] / 1e9, th = s.size() > 1 ? flop / s[1] / 1e9 : 0, diff = 0;
#ifdef TN_HAVE_LIBTORCH
	tn_tensor *r = c.lt();
	diff = max_diff(r, c.th());
	tn_tensor_unref(r);
#endif
	std::printf("%-14s %6lld %7.2f ms %7.2f ms %9.2f %9.2f %10.2g   (%s; %.1f vs %.1f GFLOP/s)\n",
		    name, (long long)batch, s[0] * 1e3, s.size() > 1 ? s[1] * 1e3 : 0,
		    th > 0 ? lt / th : 0, lt / peak, diff, note, lt, th);
}

} // namespace

static void run_gpt2(const char *dir, double peak);
static void run_resnet18(const char *dir, double peak);

int main(int argc, char **argv)
{
	if (!std::getenv("OPENBLAS_NUM_THREADS")) {
		setenv("OPENBLAS_NUM_THREADS", "1", 1);
		execv("/proc/self/exe", argv);
		std::perror("bench_models: execv");
		return 1;
	}
	const char *dir = argc > 1 ? argv[1] : "models/data";
	const std::string only = argc > 2 ? argv[2] : "";
	const int nt = bench::threads();
	char env[16];
	std::snprintf(env, sizeof env, "%d", nt);
	setenv("TN_NUM_THREADS", env, 1);
	double peak = bench::fma_peak(nt);
	std::printf("bench_models: %d threads; FMA peak %.0f GFLOP/s (%s, measured)\n", nt, peak,
		    bench::has_avx512() ? "AVX-512" : "AVX2");
#ifdef TN_HAVE_LIBTORCH
	at::set_num_threads(nt);
	torch::NoGradGuard no_grad;
	std::printf("bench_models: torch %s (its BLAS through libblas.so.3, OPENBLAS_NUM_THREADS=%s; "
		    "its convolutions through oneDNN); libtensor's BLAS is BLIS\n", TORCH_VERSION,
		    std::getenv("OPENBLAS_NUM_THREADS"));
#else
	std::printf("bench_models: built without libtorch: libtensor's figures only\n");
#endif
	std::printf("%-14s %6s %12s %12s %9s %9s %10s\n", "case", "batch", "libtensor", "torch",
		    "lt/torch", "lt/peak", "max|diff|");

	if (only != "resnet18")
		run_gpt2(dir, peak);
	if (only != "gpt2")
		run_resnet18(dir, peak);
	return 0;
}

static void run_gpt2(const char *dir, double peak)
{
	weights g;
	load(g, std::string(dir) + "/gpt2.safetensors");
	// One block: [B, 128, 256]. MACs: qkv 3C^2, proj C^2, MLP 8C^2 per token, attention 2 T C.
	for (int64_t B : { 1, 32 }) {
		const int64_t Tn = 128;
		tn_tensor *x = filled({ B, Tn, C }, 7);
		double flop = 2.0 * B * Tn * (12.0 * C * C + 2.0 * Tn * C);
		contenders c;
		c.lt = [&] { return lt_block(g, x); };
#ifdef TN_HAVE_LIBTORCH
		torch::Tensor tx = T(x);
		c.th = [&] { return th_block(g, tx); };
#endif
		row("gpt2 block", B, flop, peak, B == 1 ? 40 : 5, c, "128 tokens");
		tn_tensor_unref(x);
	}

	struct gpt2 m;
	const struct gpt2_config cfg = { 4, C, H, tn_tensor_sizes(W(g, "wte.weight"))[0],
					 tn_tensor_sizes(W(g, "wpe.weight"))[0] };
	if (gpt2_load(&m, &cfg, get_weight, &g) < 0) {
		std::fprintf(stderr, "bench_models: %s\n", gpt2_last_error());
		std::exit(1);
	}
	{
		std::vector<int64_t> prompt(128);
		for (int64_t i = 0; i < 128; i++)
			prompt[i] = (i * 7919 + 13) % cfg.vocab;
		double flop = 2.0 * 128 * (cfg.n_layer * (12.0 * C * C + 2.0 * 128 * C) + (double)C * cfg.vocab);
		contenders c;
		c.lt = [&] {
			tn_tensor *logits;
			check(gpt2_forward(&m, NULL, prompt.data(), 128, &logits), "gpt2_forward");
			return logits;
		};
#ifdef TN_HAVE_LIBTORCH
		torch::Tensor tok = torch::from_blob(prompt.data(), { 128 }, torch::kInt64);
		c.th = [&] { return th_gpt2(g, tok, cfg.n_layer); };
#endif
		row("gpt2 prompt", 1, flop, peak, 20, c, "128 tokens, logits included");
	}
	{
		std::vector<int64_t> prompt(16), out(64);
		for (int64_t i = 0; i < 16; i++)
			prompt[i] = (i * 31 + 5) % cfg.vocab;
		double t = bench::median_seconds([&] {
			struct gpt2_cache c;
			if (gpt2_cache_init(&m, &c) < 0 ||
			    gpt2_generate(&m, &c, prompt.data(), 16, 64, out.data(), NULL) < 0)
				die("gpt2_generate");
			gpt2_cache_free(&c);
		}, 5);
		std::printf("%-14s %6d %8.0f tok/s %8s %9s %9s %10s   (16-token prompt, 64 new, cached)\n",
			    "gpt2 decode", 1, 64 / t, "-", "-", "-", "-");
	}
	gpt2_free(&m);
}

static void run_resnet18(const char *dir, double peak)
{
	weights r;
	load(r, std::string(dir) + "/resnet18.safetensors");
	struct resnet18 net;
	if (resnet18_load(&net, 1000, get_weight, &r) < 0) {
		std::fprintf(stderr, "bench_models: %s\n", resnet18_last_error());
		std::exit(1);
	}
	for (int64_t B : { 1, 32 }) {
		tn_tensor *img = filled({ B, 3, 224, 224 }, 11);
		double flop = 2.0 * B * resnet18_macs(224, 224);
		contenders c;
		c.lt = [&] {
			tn_tensor *logits;
			if (resnet18_forward(&net, img, &logits) < 0) {
				std::fprintf(stderr, "bench_models: %s\n", resnet18_last_error());
				std::exit(1);
			}
			return logits;
		};
#ifdef TN_HAVE_LIBTORCH
		torch::Tensor timg = T(img);
		c.th = [&] { return th_resnet18(r, timg); };
#endif
		row("resnet18", B, flop, peak, B == 1 ? 10 : 2, c, "224x224");
		tn_tensor_unref(img);
	}
	resnet18_free(&net);
}
