"""char_transformer_small in PyTorch: nanoGPT's model code (model.py: GPT, Block,
CausalSelfAttention with F.scaled_dot_product_attention, MLP with GELU) at the
shakespeare_char CPU size: 4 layers, 4 heads, 128 wide, context 64, batch 12, no dropout.
Set up as sinter's preset for a like-for-like step: biases on (nanoGPT's bias=True), output
layer untied (--tie 1 ties it as nanoGPT does; the FLOPs are the same), LayerNorm eps 1e-5.
AdamW (nanoGPT's optimizer) at 1e-3. Prints one key=value line like ../shared/bench/char_lstm.py,
for bench/compare.sh-style runs next to `sinter bench --model char_transformer_small`:

    ../shared/bench/tuned.sh python3 bench/char_transformer.py --threads 2 [--steps 10]
        [--precision bf16]

--precision bf16 runs the forward and the loss under torch.autocast('cpu', dtype=bfloat16)
(PyTorch's mixed precision, as ../shared/bench/seed_cnn.py --bf16 1). Checked with torch 2.15:
the Linear layers and scaled_dot_product_attention return bf16, GELU runs on (and returns) the
bf16 c_fc output, the embeddings and the residual stream (f32 + bf16 adds promote) stay f32, so
LayerNorm runs in f32, and cross_entropy is f32; parameters and AdamW stay f32. Against
`sinter bench --precision bf16`.

Uses ../shared/bench/common.py. Torch < 2.0 has no scaled_dot_product_attention: the
attention is then written out (masked softmax), as nanoGPT's own fallback does."""
import math, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared', 'bench'))
import torch, torch.nn as nn, torch.nn.functional as F
from common import parse, setup, time_steps, report

a = parse(batch=12, seq=64, n_layer=4, n_head=4, n_embd=128, steps=10, warmup=2, tie=0,
          precision='fp32',
          text=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'shared',
                            'data', 'tinyshakespeare.txt'))
info = setup(a)
raw = open(a.text, encoding='utf-8').read()
chars = sorted(set(raw))
stoi = {c: i for i, c in enumerate(chars)}
ids = torch.tensor([stoi[c] for c in raw], dtype=torch.long)
V, B, T, C, NH, NL = len(chars), a.batch, a.seq, a.n_embd, a.n_head, a.n_layer
FLASH = hasattr(F, 'scaled_dot_product_attention')
if a.precision not in ('fp32', 'bf16'):
    sys.exit(f"char_transformer.py: --precision {a.precision}: expected fp32 or bf16")
BF16 = a.precision == 'bf16'


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.register_buffer('bias', torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        Bx, Tx, _ = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(Bx, Tx, NH, C // NH).transpose(1, 2)
        q = q.view(Bx, Tx, NH, C // NH).transpose(1, 2)
        v = v.view(Bx, Tx, NH, C // NH).transpose(1, 2)
        if FLASH:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :Tx, :Tx] == 0, float('-inf'))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(Bx, Tx, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(C, eps=1e-5), CausalSelfAttention()
        self.ln_2, self.mlp = nn.LayerNorm(C, eps=1e-5), MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.h = nn.ModuleList([Block() for _ in range(NL)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        self.lm_head = nn.Linear(C, V, bias=True)
        if a.tie:
            self.lm_head.weight = self.wte.weight

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for blk in self.h:
            x = blk(x)
        return self.lm_head(self.ln_f(x))


model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(a.seed)


def step(i):
    starts = torch.randint(0, len(ids) - T - 1, (B,), generator=g)
    chunk = ids[starts[:, None] + torch.arange(T + 1)]
    with torch.autocast('cpu', dtype=torch.bfloat16, enabled=BF16):
        logits = model(chunk[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), chunk[:, 1:].reshape(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


time_steps(step, a.warmup)
secs, loss = time_steps(step, a.steps)
# training FLOPs per token: 6 x matmul parameters + attention 6 x 2 x T/2 x C per layer (causal)
mat = NL * (C * 3 * C + C * C + 2 * C * 4 * C) + C * V
flops_tok = 6 * mat + NL * 6 * T * C
tok = B * T * a.steps
report(framework='torch' + torch.__version__.split('+')[0], workload='char_transformer_small',
       **info, precision=a.precision, batch=B, seq=T, vocab=V, sdpa=int(FLASH), steps=a.steps,
       ms_per_step=1e3 * secs / a.steps, tokens_per_s=tok / secs, samples_per_s=B * a.steps / secs,
       achieved_gflops=flops_tok * tok / secs / 1e9, loss=loss)
