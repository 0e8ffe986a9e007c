"""Estimator vs measured: train small transformers on CPU torch with Adam and compare the peak
allocated memory (PyTorch Profiler memory events) with ``rightsize``'s estimate.

Run:  python benchmarks/estimator_vs_measured.py [--steps 3] [--check 15]

Each model is written the way Hugging Face's eager implementations are (composite RMSNorm,
SwiGLU or GELU MLP, SDPA or softmax attention, tied or untied lm head, cross-entropy on fp32
logits), built inside the profiler so every allocation is seen, and trained for a few steps with
``torch.optim.Adam`` and ``zero_grad(set_to_none=True)``. The peak is the largest "Total
Allocated" among the CPU ``[memory]`` events. Prints a markdown table; with ``--check P`` exits 1
when any estimate is more than P% off.

This is a benchmark, not part of the package: it imports torch (the package never does outside
``rightsize.profiler``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.profiler import ProfilerActivity, profile

from rightsize.analyzers.sizing.estimator import Mode, Optimizer, Setup, estimate
from rightsize.analyzers.sizing.hf_config import MlpKind, ModelShape, NormKind
from rightsize.vocab import Precision


class RMSNorm(nn.Module):
    """As LlamaRMSNorm: fp32 statistics, composite ops."""

    def __init__(self, h: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.to(torch.float32)
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * xf.to(x.dtype)


class Mlp(nn.Module):
    """Gated (SwiGLU) or plain GELU MLP of one width."""

    def __init__(self, s: ModelShape, width: int) -> None:
        super().__init__()
        h, self.gated = s.hidden_size, s.mlp is MlpKind.GATED
        if self.gated:
            self.gate = nn.Linear(h, width, bias=s.mlp_bias)
        self.up = nn.Linear(h, width, bias=s.mlp_bias)
        self.down = nn.Linear(width, h, bias=s.mlp_bias)

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        if self.gated:
            return self.down(F.silu(self.gate(y)) * self.up(y))
        return self.down(F.gelu(self.up(y)))


class Moe(nn.Module):
    """As MixtralSparseMoeBlock / Qwen2MoeSparseMoeBlock in eager mode: fp32 softmax router,
    top-k, a loop over experts gathering their tokens, index_add back; optional shared expert
    with a sigmoid gate."""

    def __init__(self, s: ModelShape) -> None:
        super().__init__()
        h = s.hidden_size
        self.s = s
        self.router = nn.Linear(h, s.num_experts, bias=False)
        width = s.expert_intermediate_size or s.intermediate_size
        self.experts = nn.ModuleList(Mlp(s, width) for _ in range(s.num_experts))
        self.shared = Mlp(s, s.shared_expert_intermediate_size) \
            if s.shared_expert_intermediate_size else None
        self.shared_gate = nn.Linear(h, 1, bias=False) if s.shared_expert_gate else None

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        b, t, h = y.shape
        x = y.view(-1, h)
        weights = torch.softmax(self.router(x), dim=1, dtype=torch.float32)
        weights, chosen = torch.topk(weights, self.s.experts_per_token, dim=-1)
        weights = weights.to(x.dtype)
        out = torch.zeros_like(x)
        mask = F.one_hot(chosen, self.s.num_experts).permute(2, 1, 0)
        for e, expert in enumerate(self.experts):
            slot, token = torch.where(mask[e])
            part = expert(x[token]) * weights[token, slot, None]
            out = out.index_add(0, token, part)
        if self.shared is not None:
            shared = self.shared(x)
            if self.shared_gate is not None:
                shared = torch.sigmoid(self.shared_gate(x)) * shared
            out = out + shared
        return out.view(b, t, h)


class Mla(nn.Module):
    """As DeepseekV2Attention on its FlashAttention path (V padded to the query head size so
    one fused kernel runs; CPU SDPA otherwise falls back to the math kernel): optional q_lora bottleneck with RMSNorm,
    kv_a_proj_with_mqa to the latent + rope part, kv_a_layernorm, kv_b_proj to per-head
    nope + v, the rope key shared by every head; RoPE itself is left out (no saved tensors
    beyond the ones counted)."""

    def __init__(self, s: ModelShape) -> None:
        super().__init__()
        h, heads, self.s = s.hidden_size, s.num_heads, s
        qk = s.qk_nope_head_dim + s.qk_rope_head_dim
        if s.q_lora_rank:
            self.q_a = nn.Linear(h, s.q_lora_rank, bias=s.qkv_bias)
            self.q_norm = RMSNorm(s.q_lora_rank)
            self.q_b = nn.Linear(s.q_lora_rank, heads * qk, bias=False)
        else:
            self.q = nn.Linear(h, heads * qk, bias=False)
        self.kv_a = nn.Linear(h, s.kv_lora_rank + s.qk_rope_head_dim, bias=s.qkv_bias)
        self.kv_norm = RMSNorm(s.kv_lora_rank)
        self.kv_b = nn.Linear(s.kv_lora_rank, heads * (s.qk_nope_head_dim + s.v_head_dim),
                              bias=False)
        self.o = nn.Linear(heads * s.v_head_dim, h, bias=s.out_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.s
        b, t, _ = x.shape
        q = self.q_b(self.q_norm(self.q_a(x))) if s.q_lora_rank else self.q(x)
        q = q.view(b, t, s.num_heads, -1).transpose(1, 2)
        latent, k_pe = self.kv_a(x).split([s.kv_lora_rank, s.qk_rope_head_dim], dim=-1)
        k_pe = k_pe.view(b, t, 1, s.qk_rope_head_dim).transpose(1, 2)
        kv = self.kv_b(self.kv_norm(latent)).view(b, t, s.num_heads, -1).transpose(1, 2)
        k_nope, v = kv.split([s.qk_nope_head_dim, s.v_head_dim], dim=-1)
        k = torch.cat([k_nope, k_pe.expand(-1, s.num_heads, -1, -1)], dim=-1)
        qk = s.qk_nope_head_dim + s.qk_rope_head_dim
        if qk != s.v_head_dim:  # as HF does for FlashAttention: one head size, pad V
            v = F.pad(v, [0, qk - s.v_head_dim])
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)[..., :s.v_head_dim]
        return self.o(out.transpose(1, 2).reshape(b, t, s.num_heads * s.v_head_dim))


class Block(nn.Module):
    def __init__(self, s: ModelShape, flash: bool, moe: bool = False) -> None:
        super().__init__()
        h, q, kv = s.hidden_size, s.q_dim, s.kv_dim
        norm = RMSNorm if s.norm is NormKind.RMSNORM else nn.LayerNorm
        self.s, self.flash = s, flash
        self.norm1, self.norm2 = norm(h), norm(h)
        self.mla = Mla(s) if s.mla else None
        if not s.mla:
            self.q = nn.Linear(h, q, bias=s.qkv_bias)
            self.k = nn.Linear(h, kv, bias=s.qkv_bias)
            self.v = nn.Linear(h, kv, bias=s.qkv_bias)
            self.o = nn.Linear(q, h, bias=s.out_bias)
        self.mlp: nn.Module = Moe(s) if moe else Mlp(s, s.intermediate_size)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        if self.mla is not None:
            return self.mla(x)
        s = self.s
        b, t, _ = x.shape
        q = self.q(x).view(b, t, s.num_heads, s.head_size).transpose(1, 2)
        k = self.k(x).view(b, t, s.kv_heads, s.head_size).transpose(1, 2)
        v = self.v(x).view(b, t, s.kv_heads, s.head_size).transpose(1, 2)
        groups = s.num_heads // s.kv_heads
        p = s.attention_dropout if self.training else 0.0
        if self.flash:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True,
                                                 enable_gqa=groups > 1)
        else:  # as HF "eager": repeat_kv, fp32 softmax, dropout, matmul
            k = k.repeat_interleave(groups, dim=1) if groups > 1 else k
            v = v.repeat_interleave(groups, dim=1) if groups > 1 else v
            scores = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(s.head_size)
            mask = torch.full((t, t), float("-inf")).triu(1)
            probs = torch.softmax(scores + mask, dim=-1, dtype=torch.float32).to(q.dtype)
            probs = F.dropout(probs, p=p, training=self.training)
            out = torch.matmul(probs, v)
        return self.o(out.transpose(1, 2).contiguous().view(b, t, s.q_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        drop = self.s.hidden_dropout
        x = x + F.dropout(self.attention(self.norm1(x)), drop, self.training)
        return x + F.dropout(self.mlp(self.norm2(x)), drop, self.training)


class LM(nn.Module):
    def __init__(self, s: ModelShape, flash: bool) -> None:
        super().__init__()
        self.embed = nn.Embedding(s.vocab_size, s.hidden_size)
        self.pos = nn.Embedding(s.learned_positions, s.hidden_size) if s.learned_positions else None
        self.blocks = nn.ModuleList(Block(s, flash, bool(s.num_experts) and i >= s.dense_layers)
                                    for i in range(s.num_layers))
        norm = RMSNorm if s.norm is NormKind.RMSNORM else nn.LayerNorm
        self.norm = norm(s.hidden_size)
        self.head = nn.Linear(s.hidden_size, s.vocab_size, bias=False)
        if s.tied_embeddings:
            self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        if self.pos is not None:
            x = x + self.pos(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), labels.view(-1))


@dataclass(frozen=True)
class Case:
    label: str
    shape: ModelShape
    batch: int
    seq: int
    flash: bool


CASES = (
    Case("llama-like, SDPA", ModelShape(256, 4, 4, 688, 2048, name="llama-like"), 8, 256, True),
    Case("GQA 6q/2kv, SDPA", ModelShape(384, 6, 6, 1024, 4096, num_kv_heads=2, name="gqa"),
         8, 128, True),
    Case("llama-like, eager softmax", ModelShape(256, 4, 8, 688, 1000, tied_embeddings=True,
                                                 name="eager"), 4, 256, False),
    Case("GPT-like, LayerNorm+GELU, dropout, eager",
         ModelShape(256, 4, 4, 1024, 1000, mlp=MlpKind.PLAIN, norm=NormKind.LAYERNORM,
                    qkv_bias=True, out_bias=True, mlp_bias=True, learned_positions=256,
                    tied_embeddings=True, final_norm=True, attention_dropout=0.1,
                    hidden_dropout=0.1, name="gpt-like"), 4, 256, False),
    Case("MoE 8 experts top-2 + gated shared expert, SDPA",
         ModelShape(256, 4, 4, 688, 2048, num_experts=8, experts_per_token=2,
                    expert_intermediate_size=256, shared_expert_intermediate_size=512,
                    shared_expert_gate=True, name="moe"), 8, 256, True),
    Case("MLA (q_lora, kv_lora 64) + MoE, dense first layer, SDPA",
         ModelShape(256, 4, 4, 688, 2048, q_lora_rank=96, kv_lora_rank=64,
                    qk_rope_head_dim=16, qk_nope_head_dim=32, v_head_dim=32, num_experts=8,
                    experts_per_token=2, expert_intermediate_size=256,
                    shared_expert_intermediate_size=512, dense_layers=1, name="mla-moe"),
         8, 256, True),
)


def measure(case: Case, steps: int) -> tuple[int, int]:
    """(peak allocated bytes over the run, parameter count)."""
    torch.manual_seed(0)
    s = case.shape
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        model = LM(s, case.flash)
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)
        ids = torch.randint(0, s.vocab_size, (case.batch, case.seq))
        labels = torch.randint(0, s.vocab_size, (case.batch, case.seq))
        for _ in range(steps):
            opt.zero_grad(set_to_none=True)
            model(ids, labels).backward()
            opt.step()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    cpu = [e["args"] for e in events
           if e.get("name") == "[memory]" and e["args"].get("Device Type") == 0]
    # "Total Allocated" is process-wide and keeps what earlier profiles allocated and freed
    # after they stopped: measure from the level just before this run's first allocation.
    base = cpu[0]["Total Allocated"] - cpu[0]["Bytes"] if cpu else 0
    peak = max((a["Total Allocated"] for a in cpu), default=base) - base
    return int(peak), sum(p.numel() for p in model.parameters())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--check", type=float, default=None, help="fail above this error, %%")
    args = parser.parse_args()
    torch.set_num_threads(max(1, min(8, torch.get_num_threads())))
    rows, worst = [], 0.0
    for case in CASES:
        measured, n_params = measure(case, args.steps)
        setup = Setup(mode=Mode.TRAIN, precision=Precision.FP32, batch=case.batch, seq=case.seq,
                      optimizer=Optimizer.ADAM, flash_attention=case.flash, device="cpu")
        est = estimate(case.shape, setup)
        assert est.params == n_params, (case.label, est.params, n_params)
        err = (est.total_bytes - measured) / measured * 100
        worst = max(worst, abs(err))
        m = est.memory
        rows.append(f"| {case.label} | {n_params:,} | {case.batch}x{case.seq} | "
                    f"{measured / 2**20:.1f} | {est.total_bytes / 2**20:.1f} | {err:+.1f}% | "
                    f"{m.weights_bytes / 2**20:.1f} / {m.gradients_bytes / 2**20:.1f} / "
                    f"{m.optimizer_bytes / 2**20:.1f} / {m.activations_bytes / 2**20:.1f} |")
    print(f"torch {torch.__version__}, CPU, fp32, Adam, {args.steps} steps\n")
    print("| model | params | batch x seq | measured peak MiB | estimate MiB | error |"
          " weights / grads / Adam / activations MiB |")
    print("|---|---:|---:|---:|---:|---:|---|")
    print("\n".join(rows))
    if args.check is not None and worst > args.check:
        print(f"\nworst error {worst:.1f}% exceeds {args.check}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
