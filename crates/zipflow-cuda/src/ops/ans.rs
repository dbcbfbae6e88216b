//! `ans`: each warp of the chunk's block takes whole blocks of the stream and decodes them
//! with one state per lane, exactly as the format lays them out (`zipflow_encodings::ans`):
//! the lanes that renormalise find their word by a ballot and a population count. The
//! 4096-slot decoding table is built in shared memory from the cumulative frequencies the
//! host staged after the tree.

use super::Filler;
use crate::codegen::{Gen, Writer};
use zipflow_core::{PType, Result};
use zipflow_encodings::{NodeView, ans};

/// Slots after the length: byte offsets of the states, block starts and words, the number of
/// words, the block size's log2, the byte offset of the cumulative frequencies (`nsym + 1`
/// u32, staged by the host after the tree) and `nsym`.
pub(crate) const SLOTS: usize = 7;

/// Checks an `ans` node, writes its slots and stages its cumulative frequencies.
pub(crate) fn fill(f: &mut Filler<'_>, node: &NodeView<'_>, b: usize) -> Result<()> {
    let ans::View {
        log2_block: log2,
        freqs,
    } = ans::View::parse(node)?;
    let states = node.buffer(0, "states")?;
    let starts = node.buffer(1, "starts")?;
    let words = node.buffer(2, "words")?;
    f.prm[b + 1] = f.offset(states, 4)?;
    f.prm[b + 2] = f.offset(starts, 4)?;
    f.prm[b + 3] = f.offset(words, 2)?;
    f.prm[b + 4] = (words.len() / 2) as u64;
    f.prm[b + 5] = u64::from(log2);
    // Cumulative frequencies, `nsym + 1` of them, for the kernel's table.
    f.prm[b + 6] = f.extra_aligned(4);
    f.prm[b + 7] = freqs.len() as u64;
    let mut c = 0u32;
    f.extra.extend_from_slice(&c.to_le_bytes());
    for x in &freqs {
        c += x;
        f.extra.extend_from_slice(&c.to_le_bytes());
    }
    Ok(())
}

/// Words of an `ans` block each warp keeps in shared memory.
pub(crate) const ANS_WINDOW: u32 = 512;

const ANS_RENORM: &str = r#"
// A warp's window of its block's words in shared memory: words [base, end) of the stream.
// Each step reads its words from the window, so the state's dependency chain waits on
// shared memory, not on device memory; the window is refilled (all loads in flight at once)
// when a step might read past it.
struct ZfWin {
  u16* w;
  u32 base, end;
};

__device__ __forceinline__ void zf_ans_fill(ZfWin& win, const u16* __restrict__ words,
                                            u32 from, u32 stop) {
  __syncwarp();
  const u32 to = min(from + ZF_ANS_WIN, stop), lane = threadIdx.x & 31u;
#pragma unroll 8
  for (u32 i = from + lane; i < to; i += 32u) win.w[i - from] = __ldg(words + i);
  __syncwarp();
  win.base = from;
  win.end = to;
}

// Refills the states of the lanes that fell below 2^16, in lane order, from the block's
// words; a read past the block's words marks it bad.
__device__ __forceinline__ void zf_ans_renorm(u32& x, bool act, u32& pos, const ZfWin& win,
                                              bool& bad) {
  const bool need = act && x < 65536u;
  const u32 m = __ballot_sync(0xffffffffu, need);
  if (need) {
    const u32 i = pos + __popc(m & ((1u << (threadIdx.x & 31u)) - 1u));
    u32 w = 0u;
    if (i < win.end) w = win.w[i - win.base]; else bad = true;
    x = (x << 16) | w;
  }
  pos += __popc(m);
}
"#;

impl Gen<'_> {
    /// Emits the stage that decodes `ans` node `k` into its buffer.
    pub(crate) fn ans_stage(&mut self, k: usize) -> Result<String> {
        let n = self.nodes[k].clone();
        let t = crate::codegen::ctype(n.ptype)?;
        let b = n.base;
        if !self.ans_table {
            self.ans_table = true;
            let decl = Writer::at(0)
                .blank()
                .line("__shared__ u32 zf_atab[4096];")
                .line("__shared__ u16 zf_awin[ZF_THREADS / 32u][ZF_ANS_WIN];")
                .raw(ANS_RENORM)
                .finish();
            self.src.push_str(&decl);
        }
        let nphases = match n.ptype {
            PType::U8 => 1,
            PType::U16 => 2,
            _ => 3,
        };
        let out = self.buf(k, "first + j0 + lane")?;
        let mut w = Writer::at(1);
        w.scope(format!(
            "node {k}: ans: each warp decodes whole blocks, one state per lane"
        ))
        .line(format!("const u32 n = (u32)e.prm[{b}];"))
        .line(format!("const u32 nsym = (u32)e.prm[{}];", b + 7))
        .line(format!(
            "const u32* cum = (const u32*)(e.in + e.prm[{}]);",
            b + 6
        ))
        .line("// The table may still be read by an earlier ans stage.")
        .line("__syncthreads();")
        .open("if (n != 0u)")
        .open("for (u32 slot = threadIdx.x; slot < 4096u; slot += ZF_THREADS)")
        .line("u32 lo = 0u, hi = nsym;  // the last symbol whose cumulative frequency is <= slot")
        .open("while (hi - lo > 1u)")
        .line("const u32 mid = (lo + hi) >> 1;")
        .line("if (__ldg(cum + mid) <= slot) lo = mid; else hi = mid;")
        .close()
        .line("const u32 c = __ldg(cum + lo), f = __ldg(cum + lo + 1u) - c;")
        .line("zf_atab[slot] = f << 20 | (slot - c) << 8 | lo;")
        .close()
        .close()
        .line("__syncthreads();")
        .line(format!(
            "const u32 lb = (u32)e.prm[{}], B = 1u << lb, nblocks = (n + B - 1u) >> lb;",
            b + 5
        ))
        .line(format!(
            "const u32* states = (const u32*)(e.in + e.prm[{}]);",
            b + 1
        ))
        .line(format!(
            "const u32* starts = (const u32*)(e.in + e.prm[{}]);",
            b + 2
        ))
        .line(format!(
            "const u16* words = (const u16*)(e.in + e.prm[{}]);",
            b + 3
        ))
        .line(format!("const u32 nwords = (u32)e.prm[{}];", b + 4))
        .line("const u32 lane = threadIdx.x & 31u;")
        .open("for (u32 blk = threadIdx.x >> 5; blk < nblocks; blk += ZF_THREADS / 32u)")
        .line("const u32 first = blk * B, cnt = min(B, n - first);")
        .line("u32 x = __ldg(states + blk * 32u + lane);")
        .line("u32 pos = __ldg(starts + blk);")
        .line("const u32 end = blk + 1u < nblocks ? __ldg(starts + blk + 1u) : nwords;")
        .line("bool bad = false;")
        .line("ZfWin win = {zf_awin[threadIdx.x >> 5], 0u, 0u};")
        .line("zf_ans_fill(win, words, pos, end);")
        .open("for (u32 j0 = 0u; j0 < cnt; j0 += 32u)")
        .line("// A step reads at most 32 words per phase.")
        .line(format!(
            "if (pos + {nphases}u * 32u > win.end && win.end < end) zf_ans_fill(win, words, pos, end);"
        ))
        .line("const bool act = j0 + lane < cnt;")
        .line("u32 v = 0u;")
        .open("if (act)")
        .line("const u32 s = zf_atab[x & 4095u];")
        .line("v = s & 0xffu;")
        .line("x = (s >> 20) * (x >> 12) + ((s >> 8) & 4095u);")
        .close()
        .line("zf_ans_renorm(x, act, pos, win, bad);");
        // u16 and u32 symbols read bypass bits after the first step (only when some lane's
        // bucket has them, else no state changes); u32 symbols may need a second refill.
        if nphases > 1 {
            w.line("// Bypass bits only when some lane's bucket has them (else no state changes).")
                .line("u32 nb = 0u;")
                .open("if (__any_sync(0xffffffffu, act && v >= 16u))")
                .open("if (act && v >= 16u)")
                .line("nb = (v >> 2) - 2u;")
                .line("const u32 k1 = min(nb, 16u);")
                .line("const u32 bits = x & ((1u << k1) - 1u);")
                .line("x >>= k1;")
                .line("v = ((4u + (v & 3u)) << nb) | bits;")
                .close()
                .line("zf_ans_renorm(x, act, pos, win, bad);");
            if nphases > 2 {
                w.open("if (__any_sync(0xffffffffu, nb > 16u))")
                    .open("if (act && nb > 16u)")
                    .line("const u32 k2 = nb - 16u;")
                    .line("v |= (x & ((1u << k2) - 1u)) << 16;")
                    .line("x >>= k2;")
                    .close()
                    .line("zf_ans_renorm(x, act, pos, win, bad);")
                    .close();
            }
            w.close();
        }
        w.line(format!("if (act) {out} = ({t})v;"))
            .close()
            .line("if (bad || pos != end || x != 65536u) atomicOr(e.err, ZF_ERR_ANS);")
            .close()
            .line("__syncthreads();")
            .close();
        Ok(w.finish())
    }
}
