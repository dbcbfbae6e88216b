//! Host-side checks of the encoder: its generated source, and the tables, block words and
//! nodes it builds against the CPU encoder's.

use super::kernel::*;
use super::*;
use zipflow_core::{IntVec, Plan, Values};
use zipflow_encodings::chartable::SwitchCost;

/// A small deterministic generator (xorshift64*).
fn rng(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    move || {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        s.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// Text, then digits, then noise, in runs of a few blocks: several tables pay off.
fn mixed(seed: u64, n: usize) -> Vec<u8> {
    const WORDS: &[&str] = &["the", "of", "and", "quoth", "Pickwick", "zephyr", "\n"];
    let mut r = rng(seed);
    let mut out = Vec::with_capacity(n + CHUNK * 5);
    while out.len() < n {
        let run = (1 + r() % 4) as usize * CHUNK;
        let end = out.len() + run;
        match r() % 3 {
            0 => out.extend((0..run).map(|_| b"0123456789,\n"[(r() % 12) as usize])),
            1 => {
                while out.len() < end {
                    out.extend_from_slice(WORDS[(r() % WORDS.len() as u64) as usize].as_bytes());
                    out.push(b' ');
                }
            }
            _ => out.extend((0..run).map(|_| r() as u8)),
        }
    }
    out.truncate(n);
    out
}

fn cpu(plan: &str, data: &[u8]) -> EncodedNode {
    let plan: Plan = plan.parse().unwrap_or_else(|e| panic!("{plan}: {e}"));
    zipflow_encodings::encode(&plan, &Values::Int(IntVec::U8(data.to_vec())))
        .unwrap_or_else(|e| panic!("{plan}: {e}"))
}

/// The coder whose device node should equal `node`, a CPU `chardict16` or `chartable` node.
fn coder_of(node: &EncodedNode) -> TextCoder {
    if node.id == chardict::ID {
        return TextCoder::CharDict16;
    }
    let bytes = node.to_bytes().unwrap_or_else(|e| panic!("{e}"));
    let view = NodeView::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
    TextCoder::CharTable(TableChoice::of_node(&view).unwrap_or_else(|e| panic!("{e}")))
}

/// `n <= 16` bits of `payload` from bit `pos`, most significant first.
fn bits_at(payload: &[u8], pos: u64, n: u32) -> u32 {
    (0..u64::from(n)).fold(0, |v, i| {
        let p = pos + i;
        v << 1 | u32::from(payload[(p / 8) as usize] >> (7 - p % 8) & 1)
    })
}

/// One- and two-tier codes of every first-tier width.
fn codes() -> Vec<CharCode> {
    let mut codes = vec![chardict::preset_code().unwrap_or_else(|e| panic!("{e}"))];
    for k in 0..=7u32 {
        let first: Vec<u8> = (0..1u32 << k).map(|i| (i * 37 + 5) as u8).collect();
        codes.push(CharCode::new(&first).unwrap_or_else(|e| panic!("{e}")));
        for k2 in [0u32, 3, 7] {
            let second: Vec<u8> = (0..=255u8)
                .rev()
                .filter(|b| !first.contains(b))
                .take(1 << k2)
                .collect();
            codes.push(CharCode::with_tiers(&first, &second).unwrap_or_else(|e| panic!("{e}")));
        }
    }
    codes
}

#[test]
fn generated_source_has_the_three_kernels_and_the_cpu_constants() {
    let src = source();
    for name in [COUNT_KERNEL, SCAN_KERNEL, ASSEMBLE_KERNEL] {
        assert!(
            src.contains(&format!(
                "extern \"C\" __global__ void __launch_bounds__(ZF_THREADS) {name}("
            )),
            "{name}"
        );
    }
    for define in [
        format!("#define ZF_CHUNK {}u", chardict::CHUNK),
        format!("#define ZF_MAX_TABLES {}u", chartable::MAX_TABLES),
        format!("#define ZF_TILE_CHUNKS {TILE_CHUNKS}u"),
        format!("#define ZF_CHUNK_WORDS {CHUNK_WORDS}u"),
        format!("#define ZF_SCAN_ITEMS {SCAN_ITEMS}u"),
    ] {
        assert!(src.contains(&define), "{define}");
    }
    // Most significant bit first: every word is byte-swapped on its way out.
    assert!(src.contains("out[w0 + q] = __byte_perm(sw[q], 0u, 0x0123u);"));
    // The previous chunk's last bits start the first word; nothing else crosses chunks.
    assert!(src.contains("if (lane == 0u) sw[0] = tail << (32u - lead);"));
    assert!(!src.contains("atomicOr(out"));
    let k = kernel();
    assert_eq!(k.threads, ENCODE_THREADS);
    assert_eq!(k.source, src);
    // Warps split a tile evenly, and a lane's 32 bytes are two 16-byte loads.
    assert_eq!(TILE_CHUNKS % (ENCODE_THREADS / 32), 0);
    assert_eq!(TILE_CHUNKS % 32, 0);
    assert_eq!(chardict::CHUNK, 1024);
}

#[test]
fn kernel_tables_are_the_cpu_encoders_codes() {
    for code in codes() {
        let table = kernel_table(&code);
        let enc = code.encoder();
        let lengths = code.lengths();
        for b in 0..256 {
            let (len, bits) = (u32::from(table[b] >> 12), u32::from(table[b] & 0xfff));
            assert_eq!(len, enc[b] >> 16, "{code:?} byte {b}");
            assert_eq!(bits, enc[b] & 0xffff, "{code:?} byte {b}");
            assert_eq!(len, u32::from(lengths[b]));
            assert!((1..=MAX_CODE_BITS).contains(&len) && bits < 1 << len);
        }
    }
    // The published code: ' ' is `1 0000`, 'f' `1 1111`, others `0` and the byte.
    let table = kernel_table(&chardict::preset_code().unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(table[usize::from(b' ')], 5 << 12 | 0b1_0000);
    assert_eq!(table[usize::from(b'f')], 5 << 12 | 0b1_1111);
    assert_eq!(table[usize::from(b'Z')], 9 << 12 | u16::from(b'Z'));
}

#[test]
fn shared_words_hold_the_longest_chunk() {
    let announce = (1..=chartable::MAX_TABLES)
        .map(SwitchCost::of)
        .map(|s| s.first.max(s.change))
        .max()
        .unwrap_or(0);
    assert_eq!(u64::from(MAX_ANNOUNCE_BITS), announce);
    // Up to 31 bits of the previous chunk, the announcement, then 1024 codes of 10 bits.
    let longest = 31 + MAX_ANNOUNCE_BITS + MAX_CODE_BITS * CHUNK as u32;
    assert!(CHUNK_WORDS * 32 >= longest);
    // The block word keeps the announcement's length in 4 bits.
    const { assert!(MAX_ANNOUNCE_BITS < 16) };
}

#[test]
fn block_words_announce_what_the_cpu_stream_holds() {
    let data = mixed(4, 60 * CHUNK + 77);
    let mut seen_change = false;
    for plan in ["chartable(1)", "chartable(3)", "chartable(16)"] {
        let node = cpu(plan, &data);
        let TextCoder::CharTable(choice) = coder_of(&node) else {
            panic!("{plan}: not a chartable node");
        };
        let words = block_words(&choice);
        assert_eq!(words.len(), data.len().div_ceil(CHUNK));
        let payload = &node.buffers[0];
        for (b, (w, entry)) in words
            .iter()
            .zip(node.buffers[1].chunks_exact(4))
            .enumerate()
        {
            let entry = u32::from_le_bytes([entry[0], entry[1], entry[2], entry[3]]);
            let (start, table) = (u64::from(entry >> 4), entry & 15);
            let len = (w >> 4) & 15;
            assert_eq!(w & 15, table, "{plan} block {b}");
            assert_eq!(bits_at(payload, start, len), w >> 8, "{plan} block {b}");
            if choice.codes().len() == 1 {
                assert_eq!(*w >> 4, 0, "{plan}: one table announces nothing");
            }
            seen_change |= b > 0 && len == SwitchCost::of(choice.codes().len()).change as u32;
        }
    }
    assert!(seen_change, "the mixed data should change tables");
}

#[test]
fn nodes_are_the_cpu_encoders_given_its_stream() {
    let mut r = rng(3);
    let random: Vec<u8> = (0..5000).map(|_| r() as u8).collect();
    for data in [Vec::new(), b"e".to_vec(), random, mixed(9, 20 * CHUNK + 3)] {
        for plan in [
            "chardict16",
            "chartable(1)",
            "chartable(4)",
            "chartable(16)",
        ] {
            let want = cpu(plan, &data);
            let total = u64::from_le_bytes(
                want.meta[want.meta.len() - 8..]
                    .try_into()
                    .unwrap_or_else(|e| panic!("{e}")),
            );
            let got = node(
                &coder_of(&want),
                data.len(),
                total,
                want.buffers[0].clone(),
                want.buffers[1].clone(),
            )
            .unwrap_or_else(|e| panic!("{plan}: {e}"));
            assert_eq!(got, want, "{plan}, {} bytes", data.len());
        }
    }
}

#[test]
fn table_choices_and_input_sizes_are_checked() -> Result<()> {
    let code = CharCode::new(b"etao")?;
    assert!(TableChoice::new(0, vec![code.clone()], vec![0]).is_err());
    assert!(TableChoice::new(17, vec![code.clone()], vec![0]).is_err());
    assert!(TableChoice::new(1, vec![code.clone(), code.clone()], vec![0]).is_err());
    assert!(TableChoice::new(2, vec![code.clone()], vec![0, 1]).is_err());
    let one = TableChoice::single(code.clone(), 3000);
    assert_eq!(one.blocks(), &[0, 0, 0]);
    // The choice must cover the input's blocks (and so name a table when there are bytes).
    let coder = TextCoder::CharTable(one);
    assert!(Setup::new(&coder, 3000).is_ok());
    assert!(Setup::new(&coder, 4000).is_err());
    let empty = TextCoder::CharTable(TableChoice::new(1, Vec::new(), vec![0; 0])?);
    assert!(Setup::new(&empty, 0).is_ok());
    assert!(Setup::new(&empty, 5).is_err());
    // Inputs whose shortest stream would overflow the index are refused before any launch.
    assert!(Setup::new(&TextCoder::CharDict16, (1usize << 32) / 5).is_ok());
    let e = Setup::new(&TextCoder::CharDict16, (1usize << 32) / 5 + 1).err();
    assert!(e.is_some_and(|e| e.to_string().contains("does not fit its index")));
    let e = Setup::new(&TextCoder::CharDict16, 1usize << 32).err();
    assert!(e.is_some_and(|e| e.to_string().contains("exceeds 2^32 - 1")));
    let big = (1usize << 28) + 1;
    let coder = TextCoder::CharTable(TableChoice::single(CharCode::new(b"a")?, big));
    let e = Setup::new(&coder, big).err();
    assert!(e.is_some_and(|e| e.to_string().contains("does not fit its index")));
    Ok(())
}
