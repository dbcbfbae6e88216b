//! The generated sources of representative shapes.

use super::*;
use zipflow_core::{IntVec, Plan, Values};
use zipflow_encodings::{NodeView, encode};

fn shape_of(plan: &str, values: &Values) -> Shape {
    let plan: Plan = plan.parse().unwrap_or_else(|e| panic!("{plan}: {e}"));
    let node = encode(&plan, values).unwrap_or_else(|e| panic!("{plan}: {e}"));
    let bytes = node.to_bytes().unwrap_or_else(|e| panic!("{e}"));
    let view = NodeView::parse(&bytes).unwrap_or_else(|e| panic!("{e}"));
    Shape::of(&view).unwrap_or_else(|e| panic!("{plan}: {e}"))
}

fn ints() -> Values {
    Values::Int(IntVec::I64(
        (0..3000).map(|i| (i * 7919) % 1000 - 300).collect(),
    ))
}

#[test]
fn narrow_bitpacked_tiles_decode_lane_by_lane() {
    let v = Values::Int(IntVec::I32(
        (0..5000).map(|i| 8036 + (i * 7919) % 2526).collect(),
    ));
    for plan in ["for | bitpack", "bitpack"] {
        let k = generate(&shape_of(plan, &v)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Tile);
        assert!(
            k.source
                .contains("o[p0 + (row & 7u) * 128u + fl * 16u + lane]"),
            "{plan}"
        );
    }
    // 64-bit words: 16 lanes, four row groups per vector.
    let k = generate(&shape_of("for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        k.source
            .contains("const u32 warp = threadIdx.x >> 5, lane = threadIdx.x & 15u;")
    );
    assert!(k.source.contains("u64 cur = __ldg(vw + 16u * k);"));
    assert!(
        k.source
            .contains("default: zf_rows<48u>(e, zf_lst, vw, s0, lane);")
    );
    assert!(
        k.source
            .contains("o[p0 + (row & 7u) * 128u + fl * 16u + lane]")
    );
    // Other shapes keep the per-position loop.
    let k = generate(&shape_of("zigzag | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    assert!(!k.source.contains("fl * 16u + lane"));
}

#[test]
fn dictionary_caches_give_way_to_the_other_shared_arrays() {
    // An `ans` table and a delta scan's tiles beside an 8 KiB cache pass the 48 KiB a kernel
    // may declare: the condition counts every array, defined before the first use.
    let v = Values::Int(IntVec::I64(
        (0..20_000).map(|i| (i * 7919 % 3001) * 1_000_003).collect(),
    ));
    let k = generate(&shape_of("delta | dict(codes: ans, values: plain)", &v))
        .unwrap_or_else(|e| panic!("{e}"));
    let at = |needle: &str| k.source.find(needle).unwrap_or(usize::MAX);
    let line = k
        .source
        .lines()
        .find(|l| l.starts_with("#define ZF_DICT_CACHE (("))
        .unwrap_or_default();
    for term in [
        "sizeof(i64) * 1024u",
        "sizeof(u32) * (4096)",
        "sizeof(u16) * (ZF_THREADS / 32u) * (ZF_ANS_WIN)",
        "sizeof(u64) * (2u * ZF_THREADS * ZF_DELTA_ITEMS)",
    ] {
        assert!(line.contains(term), "{term} missing from {line:?}");
    }
    let define = at("#define ZF_DICT_CACHE");
    assert!(define < at("zf_d1[ZF_DICT_CACHE]"));
    assert!(at("#define ZF_ANS_WIN") < define);
    // Shapes without a dictionary have no cache to size.
    let k = generate(&shape_of("delta | bitpack", &v)).unwrap_or_else(|e| panic!("{e}"));
    assert!(!k.source.contains("ZF_DICT_CACHE"));
}

#[test]
fn small_dictionaries_are_read_from_shared_memory() {
    let v = Values::Int(IntVec::I64(
        (0..5000).map(|i| 1000 + (i % 50) * 7).collect(),
    ));
    let k = generate(&shape_of("dict(codes: bitpack, values: for | bitpack)", &v))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Tile);
    assert!(k.source.contains("__shared__ i64 zf_d0[ZF_DICT_CACHE]"));
    // The cache is counted with the lane stage beside it.
    let define = k
        .source
        .lines()
        .find(|l| l.starts_with("#define ZF_DICT_CACHE"));
    assert_eq!(
        define,
        Some(
            "#define ZF_DICT_CACHE ((sizeof(i64) * 1024u + sizeof(u32) * (2) * (ZF_THREADS / 32u) + sizeof(i64) * (ZF_TILE_VECTORS * 1024u)) <= 47104u ? 1024u : 1u)"
        )
    );
    // Filled once per block, before the codes are unpacked lane by lane and looked up.
    let fill = k.source.find("zf_d0[i] = zf_n2(e, i)");
    let lanes = k.source.find("zf_rows<0u, 8u>(e, zf_lst, vw, s0, lane, n)");
    assert!(fill.is_some() && lanes.is_some() && fill < lanes);
    assert!(k.source.contains("? zf_d0[c] : zf_n2(e, c)"));
    // The second lane of each thread's pair.
    assert!(
        k.source
            .contains("zf_rows<0u, 8u>(e, zf_lst, vw + 64u, s0, lane + 64u, n)")
    );
    // Aligned, byte codes of 8-byte values go two neighbouring lanes a thread: one 16-bit
    // load a word, one 16-byte store a row, the words loaded before the dictionary's
    // barrier.
    assert!(
        k.source
            .contains("zf_rows2(e, zf_lst, zf_wd, s0, lane, n);")
    );
    let load = k.source.find("if (zf_pre) zf_load2(zf_vb, lane, zf_wd);");
    let barrier = k.source[fill.unwrap_or(0)..].find("__syncthreads();");
    assert!(load.is_some() && load < fill && barrier.is_some());
    assert!(
        k.source
            .contains("*(ulonglong2*)(o + p0 + i * 128u + 2u * m) = pr.u;")
    );
    // Values that need a stage keep the per-lookup path.
    let runs = Values::Int(IntVec::I64((0..5000).map(|i| i / 100).collect()));
    let k = generate(&shape_of("dict(codes: bitpack, values: rle)", &runs))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!k.source.contains("zf_d0"));
}

#[test]
fn for_bitpack_is_one_fused_tile_kernel() {
    let k = generate(&shape_of("for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Tile);
    assert_eq!(k.key, "for:i64(bitpack(10):u64)");
    // The width is compiled in, not read from the descriptor.
    assert!(k.source.contains("e.prm[4]), 10u, p)"));
    assert!(k.source.contains("extern \"C\" __global__"));
    assert!(k.source.contains("zf_decode("));
    assert!(k.source.contains("zf_unpack<u64, u64, 64>"));
    // Fused: the root's value goes from the expression to the block's stage (a partial
    // vector's too), stored by one bulk copy; no buffer of a node's own.
    assert!(k.source.contains("zf_lst[p - P0] = zf_n0(e, p)"));
    assert!(
        k.source
            .contains("__shared__ __align__(128) i64 zf_lst[ZF_TILE_VECTORS * 1024u];")
    );
    let (decode, store) = k
        .source
        .split_once("  zf_bulk_fence();\n  __syncthreads();\n  zf_store_values(o + P0, zf_lst, ")
        .unwrap_or_else(|| panic!("no staged store in\n{}", k.source));
    assert!(decode.contains("switch (rg)") && store.starts_with("min(len - P0, "));
    assert!(!k.source.contains("__shared__ i64 zf_m"));
    assert_eq!(k.threads, TILE_THREADS);
    // out offset, for: len + reference, bitpack: len + offset + width.
    assert_eq!(k.nparams, 1 + 2 + 3);
    assert_eq!(k.nodes[1].base, 3);
    assert_eq!(k.source.matches("#define ZF_NPRM 6").count(), 1);
}

#[test]
fn other_tile_shapes_use_the_unrolled_generic_body() {
    let k =
        generate(&shape_of("zigzag | for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.threads, TILE_THREADS);
    assert!(k.source.contains("o[p] = zf_n0(e, p)"));
    assert!(
        k.source
            .contains("#pragma unroll\n      for (u32 i = 0u; i < 1024u / ZF_THREADS")
    );
    // Dictionary codes of every width go lane by lane.
    let k = generate(&shape_of(
        "dict(codes: bitpack, values: for | bitpack)",
        &ints(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        k.source
            .contains("zf_rows<0u, 16u>(e, zf_lst, vw, s0, lane, n)")
    );
    let wide = Values::Int(IntVec::I64((0..200_000).map(|i| i * 3).collect()));
    let k = generate(&shape_of("dict(codes: bitpack, values: plain)", &wide))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        k.source
            .contains("else zf_rows<16u, 16u>(e, zf_lst, vw, s0, lane, n)")
    );
}

#[test]
fn every_primitive_has_its_code_path() {
    let f: Values = Values::F64((0..3000).map(|i| f64::from(i) * 0.25 + 0.01).collect());
    let cases = [
        ("plain", ints(), "__ldg((const i64*)"),
        (
            "bitpack",
            Values::Int(IntVec::U16((0..3000).collect())),
            "zf_unpack<u16, u32, 16>",
        ),
        ("zigzag | bitpack", ints(), "(z >> 1) ^"),
        (
            "constant",
            Values::Int(IntVec::U8(vec![7; 100])),
            "return (u8)e.prm[",
        ),
        (
            "dict(codes: bitpack, values: for | bitpack)",
            ints(),
            "ZF_ERR_DICT",
        ),
        (
            "for | patch | bitpack",
            ints(),
            "zf_lower_bound(pos, cnt, s0)",
        ),
        (
            "delta | for | bitpack",
            ints(),
            "if (lane == 31u) wt[warp] = x;",
        ),
        (
            "rle(values: for | bitpack, runs: for | bitpack)",
            ints(),
            "ZF_ERR_RLE_SUM",
        ),
        (
            "float2int | for | bitpack",
            f.clone(),
            "__longlong_as_double((long long)x)",
        ),
        ("alprd", f, "__longlong_as_double((long long)bits)"),
        ("lowbits(12)", ints(), "& ((1ull << s) - 1ull)"),
    ];
    for (plan, values, needle) in cases {
        let k = generate(&shape_of(plan, &values)).unwrap_or_else(|e| panic!("{plan}: {e}"));
        assert!(
            k.source.contains(needle),
            "{plan}: no `{needle}` in\n{}",
            k.source
        );
    }
}

/// Values below 2^20 with one in 32 spilling one bit past them.
fn spilled() -> Values {
    Values::Int(IntVec::I64(
        (0..5000)
            .map(|i| 1000 + (i * 7919) % (1 << 20) + if i % 32 == 5 { 1 << 20 } else { 0 })
            .collect(),
    ))
}

#[test]
fn hipatch_roots_decode_lane_by_lane_and_add_exceptions_high_bits() {
    for (plan, low, reference) in [
        ("hipatch | bitpack", "zf_n1(e, p)", false),
        (
            "for | hipatch | bitpack",
            "zf_n2(e, p) + (u64)e.prm[2]",
            true,
        ),
    ] {
        let k = generate(&shape_of(plan, &spilled())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.kind, KernelKind::Tile, "{plan}");
        let src = &k.source;
        assert!(
            src.contains("default: zf_rows<48u>(e, zf_lst, vw, s0, lane);"),
            "{plan}"
        );
        // Partial vectors take the low bits alone; no thread leaves before the barrier.
        assert!(src.contains(low), "{plan}: no `{low}` in\n{src}");
        assert!(!src.contains("if (p0 >= len) return;"), "{plan}");
        // Exceptions found before the low bits, their high bits added after the barrier.
        let (before, after) = src
            .split_once("  __syncthreads();\n  // An exception's position lies in its vector, one of the block's.\n  if (hw) {")
            .unwrap_or_else(|| panic!("{plan}: no exception stores in\n{src}"));
        let hp = if reference { 1 } else { 0 };
        let found = before
            .find(&format!("zf_hp{hp}(e, hv, hj0, hj1);"))
            .unwrap_or_else(|| panic!("{plan}: exceptions not found first"));
        assert!(found < before.find("switch (rg)").unwrap_or(0), "{plan}");
        assert!(
            after.contains("if (hq != ~0u) atomicAdd((u64*)(zf_lst + (hq - P0)), hx);"),
            "{plan}"
        );
        let full = if reference {
            "return (u64)zf_n5(e, j) << (u32)e.prm[4];"
        } else {
            "return (u64)zf_n4(e, j) << (u32)e.prm[2];"
        };
        assert!(src.contains(full), "{plan}: no `{full}` in\n{src}");
        // Counts summed across the warp; offsets checked in order.
        assert!(
            src.contains("s += __shfl_xor_sync(0xffffffffu, s, d);"),
            "{plan}"
        );
        assert!(src.contains("atomicOr(e.err, ZF_ERR_PATCH);"), "{plan}");
    }
}

#[test]
fn hipatch_elsewhere_is_a_stage() {
    // Under `zigzag` in a tile: low bits to shared memory, then one warp's exceptions.
    let k = generate(&shape_of("zigzag | hipatch | bitpack", &spilled()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Tile);
    assert!(
        k.source.contains("__shared__ u64 zf_m1[1024]"),
        "{}",
        k.source
    );
    assert!(
        k.source.contains("zf_m1[(p) & 1023u] = zf_n2(e, p);"),
        "{}",
        k.source
    );
    assert!(
        k.source
            .contains("zf_m1[(q) & 1023u] = (u64)((((u64)zf_m1[(q) & 1023u]) | h));")
    );
    // Under `delta`: a chunk kernel with the low bits in scratch.
    let k = generate(&shape_of("delta | hipatch | bitpack", &spilled()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Chunk);
    assert!(k.nodes[1].scratch.is_some());
    assert!(
        k.source
            .contains("v < (s1 + 1023u) >> 10; v += ZF_THREADS / 32u")
    );
    // Side streams that need a stage are read at exception positions: a chunk kernel.
    let k = generate(&shape_of("hipatch(counts: rle) | bitpack", &spilled()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Chunk);
}

#[test]
fn short_strings_take_the_expansion_with_the_smaller_stage() {
    // l_shipmode's 4.3 bytes a row fit it, l_shipinstruct's 12.6 do not.
    assert!(strings::fits_narrow_stage(65_536, 65_536 * 43 / 10));
    assert!(!strings::fits_narrow_stage(65_536, 65_536 * 126 / 10));
    assert!(strings::fits_narrow_stage(0, 0));
    assert!(!strings::fits_narrow_stage(1, u64::from(u32::MAX)));
    // The edge: an average tile with a quarter more fills the stage, less 16 bytes.
    let edge = u64::from(strings::STAGE_BYTES_NARROW_STRINGS - 16) * 4 / 5;
    assert!(strings::fits_narrow_stage(4096, edge));
    assert!(!strings::fits_narrow_stage(4096, edge + 1));
    // A `strdict` gets it when its codes' encoding stays below 2^16; entries of one
    // length, codes that could pass 2^16 and `words` roots do not.
    let short = byte_strings((0..3000).map(|i| format!("s{}", "x".repeat(i % 9)).into_bytes()));
    for (plan, values, has) in [
        ("strdict(codes: radix)", &short, true),
        ("strdict(codes: bitpack)", &short, true),
        ("strdict(codes: ans)", &short, false),
        ("strdict(codes: plain)", &short, false),
        ("words(codes: bitpack, counts: bitpack)", &texts(), false),
    ] {
        let k = generate(&shape_of(plan, values)).unwrap_or_else(|e| panic!("{plan}: {e}"));
        assert_eq!(k.expand_narrow_smem > 0, has, "{plan}");
        assert_eq!(
            k.source.contains(strings::EXPAND_NARROW_NAME),
            has,
            "{plan}"
        );
        let code_t = if has {
            "zf_code_t"
        } else if plan.starts_with("words") {
            "u16"
        } else {
            "u32"
        };
        assert!(
            k.source.contains(&format!("#define ZF_CODE_T {code_t}")),
            "{plan}"
        );
    }
    let ones = byte_strings((0..3000).map(|i| vec![b'a' + (i % 3) as u8]));
    let k = generate(&shape_of("strdict(codes: radix)", &ones)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.expand_narrow_smem, 0);
}

#[test]
fn strings_of_one_length_expand_row_by_row() {
    let mut b = zipflow_core::values::ByteStrings::default();
    b.offsets.push(0);
    for i in 0..5000u64 {
        b.data.push(b"ANR"[(i % 3) as usize]);
        b.offsets.push(b.data.len() as u64);
    }
    let flags = Values::Bytes(b);
    for plan in ["strdict(codes: radix)", "strdict(codes: bitpack)"] {
        let shape = shape_of(plan, &flags);
        assert!(
            shape.key().contains("for:u32(bitpack(0):u32)"),
            "{}",
            shape.key()
        );
        let k = generate(&shape).unwrap_or_else(|e| panic!("{plan}: {e}"));
        for needle in [
            "tab[2u * s + 1u] = (u32)min((u64)r * L, (u64)claimed);",
            "const u64 g = at + (u64)r * L;",
            "((u32*)o)[r] = (u32)(at + (u64)r * L);",
            "const u8* const src = zf_sdict + zf_dsh",
        ] {
            assert!(k.source.contains(needle), "{plan}: no `{needle}`");
        }
        // No sums over the rows' lengths, and no shared memory for token positions or
        // staged codes.
        assert!(!k.source.contains("zf_scan_excl<u64>(b, &bt)"), "{plan}");
        assert!(
            k.source
                .contains("#define zf_scode ((ZF_CODE_T*)((u32*)zf_dyn + ZF_STR_OFFS + 0u))")
        );
        assert_eq!(k.segment_rows, strings::SEGMENT_ROWS_FIXED, "{plan}");
    }
    // Radix codes are peeled a group at a time.
    let k = generate(&shape_of("strdict(codes: radix)", &flags)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        k.source.contains("u32 rest = (u32)(x >> sh)"),
        "{}",
        k.source
    );
    // One-byte entries: looked up in registers, unchecked where the codes' encoding
    // cannot pass the dictionary (a base of 3, two bits), whole groups and items
    // without bounds checks; three blocks a multiprocessor.
    for (plan, domain, split) in [
        ("strdict(codes: radix)", "3u <= zf_m", "if (SPLIT && g * "),
        (
            "strdict(codes: bitpack)",
            "4u <= zf_m",
            "const bool whole = SPLIT && base >= first",
        ),
    ] {
        let k = generate(&shape_of(plan, &flags)).unwrap_or_else(|e| panic!("{e}"));
        for needle in [
            domain,
            split,
            "st[i] = (u8)zf_pick8(dl, dh, c);",
            "zf_each1<true>(e,",
            "__launch_bounds__(ZF_THREADS, 1536 / ZF_THREADS)\nzf_expand",
        ] {
            assert!(k.source.contains(needle), "{plan}: no `{needle}`");
        }
    }
    // Other codes (here `for` over bit-packing) are always checked.
    let k = generate(&shape_of("strdict(codes: for | bitpack)", &flags))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(k.source.contains(" <= 8u && false;"));
    // Entries of several lengths keep the general expansion.
    let k =
        generate(&shape_of("strdict(codes: bitpack)", &texts())).unwrap_or_else(|e| panic!("{e}"));
    assert!(!k.source.contains("const u64 g = at + (u64)r * L;"));
}

#[test]
fn fsst_pieces_decode_a_thread_each_in_the_first_kernel() {
    for plan in [
        "plain(bytes: fsst)",
        "words(dict: plain(bytes: fsst(codes: ans)))",
    ] {
        let k = generate(&shape_of(plan, &texts())).unwrap_or_else(|e| panic!("{plan}: {e}"));
        let (first, _) = k
            .source
            .split_once(strings::EXPAND_NAME)
            .unwrap_or_else(|| panic!("{plan}: no expansion kernel"));
        for needle in [
            "__shared__ u64 zf_fs",
            "const u32 np = (u32)(((u64)n + (1ull << lg) - 1ull) >> lg);",
            "if (l == 0u || pos + l > o1) { bad = true; break; }",
            "if (bad || pos != o1) atomicOr(e.err, ZF_ERR_FSST);",
        ] {
            assert!(first.contains(needle), "{plan}: no `{needle}` in\n{first}");
        }
        assert!(
            k.nodes
                .iter()
                .any(|n| n.op == Op::Fsst && n.scratch.is_some()),
            "{plan}"
        );
    }
}

#[test]
fn radix_divides_by_constant_powers_of_its_base() {
    let v = Values::Int(IntVec::U8((0..5000).map(|i| (i * 7 % 3) as u8).collect()));
    let shape = shape_of("radix", &v);
    assert_eq!(shape.key(), "radix(3):u8");
    let k = generate(&shape).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Tile);
    for needle in [
        "const u32 j = p / 17u, d = p - j * 17u;",
        "const u64 bit = (u64)j * 27u;",
        "if (sh + 27u > 32u)",
        "u32 g = (u32)(x >> sh) & 134217727u;",
        "if (d & 1u) g /= 3u;",
        "if (d & 16u) g /= 43046721u;",
        "return (u8)(g % 3u);",
    ] {
        assert!(k.source.contains(needle), "no `{needle}` in\n{}", k.source);
    }
    assert!(!k.source.contains("if (d & 32u)"));
    let k = generate(&shape_of("dict(codes: radix, values: plain)", &v))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!k.source.contains("zf_rst"));
    // At the root, alone, under `for` or as a dictionary's codes, a thread takes whole
    // groups and the block stores its values in order.
    for (plan, store) in [
        ("radix", "zf_rst[p - P0] = v;"),
        (
            "for | radix",
            "zf_rst[p - P0] = (u8)((u32)v + (u32)e.prm[2]);",
        ),
    ] {
        let k = generate(&shape_of(plan, &v)).unwrap_or_else(|e| panic!("{plan}: {e}"));
        for needle in [
            store,
            "const u32 q = rest / 3u, p = g * 17u + d;",
            "o[p] = zf_rst[p - P0];",
        ] {
            assert!(
                k.source.contains(needle),
                "{plan}: no `{needle}` in\n{}",
                k.source
            );
        }
    }
    // Each base its own kernel.
    let five = Values::Int(IntVec::U8((0..5000).map(|i| (i % 5) as u8).collect()));
    let k5 = generate(&shape_of("radix", &five)).unwrap_or_else(|e| panic!("{e}"));
    assert!(k5.source.contains("const u32 j = p / 3u, d = p - j * 3u;"));
    assert!(k5.source.contains("if (d & 2u) g /= 25u;"));
}

#[test]
fn kernel_kinds_follow_the_shape() {
    let kind = |p: &str| {
        generate(&shape_of(p, &ints()))
            .unwrap_or_else(|e| panic!("{p}: {e}"))
            .kind
    };
    assert_eq!(kind("for | bitpack"), KernelKind::Tile);
    assert_eq!(kind("for | patch | bitpack"), KernelKind::Tile);
    assert_eq!(
        kind("dict(codes: bitpack, values: for | bitpack)"),
        KernelKind::Tile
    );
    assert_eq!(kind("delta | for | bitpack"), KernelKind::Chunk);
    assert_eq!(kind("rle"), KernelKind::Chunk);
    // A patched dictionary is read at code positions, not output positions.
    assert_eq!(
        kind("dict(codes: bitpack, values: for | patch | bitpack)"),
        KernelKind::Chunk
    );
}

#[test]
fn nested_materialised_nodes_use_shared_memory_in_tiles_and_scratch_in_chunks() {
    let tile =
        generate(&shape_of("for | patch | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        tile.source.contains("__shared__ u64 zf_m1[1024]"),
        "{}",
        tile.source
    );
    assert!(tile.nodes.iter().all(|n| n.scratch.is_none()));
    let chunk = generate(&shape_of("delta | for | patch | bitpack", &ints()))
        .unwrap_or_else(|e| panic!("{e}"));
    // In a chunk kernel, patch is an expression: no buffer, a search for exceptions.
    assert_eq!(chunk.nodes[2].op, Op::Patch);
    assert!(chunk.nodes.iter().all(|n| n.scratch.is_none()));
    assert!(
        chunk.source.contains("zf_lower_bound(pos, cnt, p)"),
        "{}",
        chunk.source
    );
    let nested = generate(&shape_of(
        "zigzag | delta | rle(values: for | bitpack, runs: for | bitpack)",
        &ints(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    for (k, op) in [(1, Op::Delta), (2, Op::Rle)] {
        assert_eq!(nested.nodes[k].op, op);
        let slot = nested.nodes[k]
            .scratch
            .unwrap_or_else(|| panic!("no scratch slot"));
        assert!(
            nested
                .source
                .contains(&format!("(u64*)(e.scratch + e.prm[{slot}])")),
            "{}",
            nested.source
        );
    }
    // The root delta writes the output directly.
    let delta =
        generate(&shape_of("delta | for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    assert!(delta.nodes[0].scratch.is_none());
    assert!(
        delta
            .source
            .contains("o[p] = (i64)(u64)st[i * ZF_THREADS + threadIdx.x]")
    );
}

#[test]
fn a_root_delta_over_rle_decodes_both_from_sums_over_runs() {
    let k = generate(&shape_of(
        "delta | rle(values: for | bitpack, runs: for | bitpack)",
        &ints(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Chunk);
    assert_eq!(k.nodes[1].op, Op::Rle);
    // No buffer for the runs' expansion, no scan over values.
    assert!(k.nodes.iter().all(|n| n.scratch.is_none()));
    assert!(!k.source.contains("zf_st0"), "{}", k.source);
    assert!(
        k.source
            .contains("o[q] = (i64)(u64)(bv.x + bv.y * (u64)q);"),
        "{}",
        k.source
    );
    assert!(k.source.contains(
        "rp[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = make_ulonglong2(d - (u64)nv[i] * ((u64)s - (u64)1), (u64)nv[i]);"
    ));
    assert!(k.source.contains("dl += (u64)nv[i] * (u64)nl[i];"));
    // The lengths and the values times the lengths in one block-wide sum.
    assert!(
        k.source
            .contains("u64 s = carry + (u64)zf_scan_tile2<u64>(ls, dl, &tot, &d, &dtot, flip);")
    );
    assert!(!k.source.contains("zf_scan_tile<"), "{}", k.source);
    // Each run's start goes to the tile's head map, a thread's bits ORed per word; the
    // walk counts runs from it. Two maps alternate by tile, each cleared the tile after
    // it was read.
    for q in [
        "__shared__ __align__(16) u32 zf_hd0[2u * ZF_HEAD_BITS / 32u];",
        "zf_head_clear(zf_hd);\n    zf_head_clear(zf_hd + ZF_HEAD_BITS / 32u);",
        "u32* const hd = zf_hd + hp;\n      zf_head_clear(zf_hd + (hp ^ ZF_HEAD_BITS / 32u));\n      hp ^= ZF_HEAD_BITS / 32u;",
        "if (nl[i] != 0u && s - carry < ZF_HEAD_BITS) {",
        "hm |= 1u << (b & 31u);",
        "if (hm != 0u) atomicOr(hd + hw, hm);",
        "zf_rle_walk_heads(rs, hd, rs[0], rs[zf_rle_slot(ZF_RLE_TILE)],",
    ] {
        assert!(k.source.contains(q), "{q}: {}", k.source);
    }
    assert!(
        k.source
            .contains("__launch_bounds__(ZF_THREADS, 2048 / ZF_THREADS)")
    );
    // Under another node, `rle` is expanded into its buffer as usual.
    let k = generate(&shape_of(
        "rle(values: delta | rle(values: bitpack, runs: bitpack), runs: bitpack)",
        &ints(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(!k.source.contains("zf_rp"), "{}", k.source);
}

#[test]
fn delta_and_rle_read_four_neighbouring_values_and_walk_their_runs() {
    // delta over a dictionary of bit-packed codes: the codes four at a time, each looked
    // up in the shared dictionary.
    let k = generate(&shape_of(
        "delta | dict(codes: bitpack, values: plain)",
        &ints(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let codes = &k.nodes[2];
    assert_eq!(codes.op, Op::BitPack);
    assert!(
        k.source.contains("void zf_q2(const Env& e, u32 p,"),
        "{}",
        k.source
    );
    assert!(k.source.contains("zf_unpack4<"), "{}", k.source);
    assert!(k.source.contains("void zf_q1(const Env& e, u32 p, i64* v)"));
    assert!(
        k.source
            .contains("zf_q1(e, threadIdx.x * ZF_DELTA_ITEMS, zq);")
    );
    // rle: both children four at a time (the `for` maps its child's four), and every
    // output position from the walk, not one search each.
    let k = generate(&shape_of(
        "rle(values: for | bitpack, runs: for | bitpack)",
        &ints(),
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    for q in [
        "zf_q1(e, threadIdx.x * ZF_RLE_ITEMS, zq);",
        "zf_q3(e, threadIdx.x * ZF_RLE_ITEMS, zq);",
    ] {
        assert!(k.source.contains(q), "{q}: {}", k.source);
    }
    assert!(k.source.contains("zf_q2(e, p, c);"), "{}", k.source);
    assert!(
        k.source
            .contains("zf_rle_walk(rs, rs[0], rs[zf_rle_slot(ZF_RLE_TILE)],")
    );
    assert!(!k.source.contains("zf_hd0"), "{}", k.source);
    // Starts and values go to padded slots (a warp's stores in distinct banks) and are
    // read back from them.
    for q in [
        "rs[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = (u32)min(s, (u64)n);",
        "rv[zf_rle_slot(threadIdx.x * ZF_RLE_ITEMS + i)] = nv[i];",
        "= rv[zf_rle_slot(j)]; });",
        "__shared__ u32 zf_rs0[ZF_RLE_PADDED + 1u];",
    ] {
        assert!(k.source.contains(q), "{q}: {}", k.source);
    }
    // Plain `rle` sums only its lengths.
    assert!(
        k.source
            .contains("u64 s = carry + (u64)zf_scan_tile<u32>(ls, &tot, flip);")
    );
    assert!(!k.source.contains("zf_scan_tile2<"), "{}", k.source);
    // Other children read value by value behind the same interface.
    let k =
        generate(&shape_of("delta | zigzag | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    assert!(k.source.contains("v[i] = zf_n1(e, p + i);"), "{}", k.source);
}

#[test]
fn same_shape_same_source_and_each_width_its_own() {
    let a = generate(&shape_of("for | bitpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    let same = Values::Int(IntVec::I64((0..70_000).map(|i| 5 + i % 1000).collect()));
    let b = generate(&shape_of("for | bitpack", &same)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(a.source, b.source);
    let wider = Values::Int(IntVec::I64((0..70_000).map(|i| i * 1_000_003).collect()));
    let c = generate(&shape_of("for | bitpack", &wider)).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(a.key, c.key);
    assert_ne!(a.source, c.source);
}

#[test]
fn the_gpu_objective_names_only_primitives_the_gpu_decodes() {
    for name in zipflow_encodings::gpu_parallel_names() {
        let enc = zipflow_encodings::by_name(name).unwrap_or_else(|| panic!("{name}"));
        assert!(Op::from_id(enc.id()).is_ok(), "{name}");
    }
}

#[test]
fn unknown_primitives_are_unsupported_by_name() {
    let e = Op::from_id(999).map(|_| ());
    let Err(Error::Unsupported { what, .. }) = e else {
        panic!("expected Unsupported, got {e:?}")
    };
    assert!(what.contains("id 999"), "{what}");
    // Every primitive the CPU writes has an op.
    for id in 1..=19 {
        if zipflow_encodings::by_id(id).is_some() {
            Op::from_id(id).unwrap_or_else(|e| panic!("{id}: {e}"));
        }
    }
}

#[test]
fn one_length_strings_run_without_the_first_kernel() {
    let ones = {
        let mut b = zipflow_core::values::ByteStrings::default();
        b.offsets.push(0);
        for i in 0..5000u64 {
            b.data.push(b'A' + (i % 3) as u8);
            b.offsets.push(b.data.len() as u64);
        }
        Values::Bytes(b)
    };
    for (plan, first) in [
        ("strdict(codes: radix)", false),
        ("strdict(codes: bitpack)", false),
        ("strdict(codes: ans)", true),
        ("strdict", false),
    ] {
        let k = generate(&shape_of(plan, &ones)).unwrap_or_else(|e| panic!("{plan}: {e}"));
        assert_eq!(k.first_kernel, first, "{plan}");
        // One-byte entries: each warp stages its own pieces, with no block barrier, and
        // the offsets go 16 bytes a store.
        if !first {
            for n in [
                "#define ZF_FIX_PIECE",
                "zf_store_from(out, wst, pa, pz, lane, 32u);",
                "((uint4*)o)[r / 4u] = make_uint4(w, w + L, w + 2u * L, w + 3u * L);",
            ] {
                assert!(k.source.contains(n), "{plan}: no `{n}`");
            }
        }
    }
    let k =
        generate(&shape_of("strdict(codes: bitpack)", &texts())).unwrap_or_else(|e| panic!("{e}"));
    assert!(k.first_kernel);
}

#[test]
fn character_coders_and_blockpack_generate() {
    let view_of = |plan: &str, v: &Values| {
        let plan: Plan = plan.parse().unwrap_or_else(|e| panic!("{e}"));
        let node = encode(&plan, v).unwrap_or_else(|e| panic!("{e}"));
        node.to_bytes().unwrap_or_else(|e| panic!("{e}"))
    };
    // The character coders: a stage in the first kernel, into the dictionary's bytes.
    for plan in [
        "plain(bytes: chardict16)",
        "words(dict: plain(bytes: chartable))",
    ] {
        let raw = view_of(plan, &texts());
        let view = NodeView::parse(&raw).unwrap_or_else(|e| panic!("{e}"));
        let k = generate(&Shape::of(&view).unwrap_or_else(|e| panic!("{plan}: {e}")))
            .unwrap_or_else(|e| panic!("{plan}: {e}"));
        assert_eq!(k.kind, KernelKind::Chunk, "{plan}");
        assert!(
            k.source
                .contains("if (pos != (u64)r.y) atomicOr(e.err, ZF_ERR_CHAR);"),
            "{plan}"
        );
    }
    // `blockpack`: fully parallel at the top (a tile kernel), a chunk kernel when its
    // references need a scan.
    let k = generate(&shape_of("blockpack", &ints())).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Tile);
    assert!(
        k.source
            .contains("zf_unpack<u64, u64, 64>(w, vt.y, p & 1023u)")
    );
    let k = generate(&shape_of("blockpack(refs: delta | for | bitpack)", &ints()))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(k.kind, KernelKind::Chunk);
}

fn byte_strings(rows: impl Iterator<Item = Vec<u8>>) -> Values {
    let mut b = zipflow_core::values::ByteStrings::default();
    b.offsets.push(0);
    for r in rows {
        b.data.extend_from_slice(&r);
        b.offsets.push(b.data.len() as u64);
    }
    Values::Bytes(b)
}

fn texts() -> Values {
    byte_strings((0..3000u64).map(|i| format!("word{} and {} more. ", i % 40, i % 7).into_bytes()))
}

#[test]
fn string_roots_write_a_segment_table_and_expand_segments() {
    let cases = [
        ("plain", "out[at + B0 + bc + x] = zf_n3(e, B0 + bc + x);"),
        // Bit-packed codes are staged lane by lane; bytes are assembled a word at a time.
        (
            "strdict(codes: bitpack)",
            "if (whole || p < cnt) f(p, (u32)(win >> sh) & mask);",
        ),
        ("strdict(codes: bitpack)", "__funnelshift_l(t0, t1, nb)"),
        (
            "strdict(codes: bitpack)",
            "st[x - w0] = zf_sdict[zf_dsh2 + so[j] + (x - q)];",
        ),
        (
            "strdict(codes: ans)",
            "zf_ans_renorm(x, act, pos, win, bad);",
        ),
        (
            "words(codes: ans, counts: ans)",
            "f(i, (u32)zf_n6(e, first + i));",
        ),
        // With every entry packed, a token's length is one load in the segment sums and
        // in the tiles, and a code past the dictionary is found from the largest.
        (
            "strdict(codes: bitpack)",
            "cmax = max(cmax, c); b += zf_soff[min(c, zf_m2)] >> 24;",
        ),
        (
            "words(codes: bitpack, counts: bitpack)",
            "zf_cmax = max(zf_cmax, in ? c : 0u);",
        ),
        (
            "words(codes: bitpack, counts: bitpack)",
            "if (tseg != 0u && zf_cmax >= zf_m2) atomicOr(e.err, ZF_ERR_DICT);",
        ),
    ];
    for (plan, needle) in cases {
        let k = generate(&shape_of(plan, &texts())).unwrap_or_else(|e| panic!("{plan}: {e}"));
        assert_eq!(k.kind, KernelKind::Chunk, "{plan}");
        let rows = if plan.starts_with("words") {
            strings::SEGMENT_ROWS
        } else {
            strings::SEGMENT_ROWS_STRINGS
        };
        assert_eq!(k.segment_rows, rows, "{plan}");
        // A `words` block takes several segments in turn, its dictionary staged once.
        let looped = "for (u32 seg = seg0; seg < min(seg0 + 8u, zf_nseg); ++seg) {";
        if plan.starts_with("words") {
            assert_eq!(k.segments_per_block, strings::WORDS_SEGMENTS_PER_BLOCK);
            assert!(k.source.contains(looped), "{plan}");
            assert!(
                k.source
                    .contains("__launch_bounds__(ZF_THREADS, 1024 / ZF_THREADS)")
            );
        } else {
            assert_eq!(k.segments_per_block, 1, "{plan}");
            assert!(k.source.contains("const u32 seg = seg0;"), "{plan}");
        }
        // Codes bit-packed in at most 16 bits: a `words` tile stages them as `u16` and
        // takes eight tokens a thread, in a larger stage; a `strdict` has a second
        // expansion with a smaller stage and its codes as `u16`, three blocks a
        // multiprocessor.
        let narrow_dict = plan.starts_with("strdict(codes: bitpack");
        let narrow = plan.starts_with("words(codes: bitpack") || narrow_dict;
        let stage = if narrow && !narrow_dict {
            strings::STAGE_BYTES_NARROW
        } else if plan.starts_with("words") {
            strings::STAGE_BYTES
        } else {
            strings::STAGE_BYTES_STRINGS
        };
        assert_eq!(
            k.source.contains("#define ZF_CODE_T u16"),
            narrow && !narrow_dict,
            "{plan}"
        );
        assert_eq!(
            k.source.contains("zf_cq0.x & 0xffffu, zf_cq0.x >> 16"),
            narrow,
            "{plan}"
        );
        // The segment table comes from the row index when the chunk has one.
        assert!(
            k.source
                .contains("zf_copy_table((const u32*)(e.in + given), tab, 2u * (nseg + 1u));"),
            "{plan}"
        );
        assert!(k.expand_smem >= stage, "{plan}");
        if narrow_dict {
            let narrow_stage = strings::STAGE_BYTES_NARROW_STRINGS;
            for n in [
                "#define ZF_STR_STAGE zf_stage_t".to_string(),
                format!("#define ZF_STAGE_WIDE {stage}u"),
                format!("#define ZF_STAGE_NARROW {narrow_stage}u"),
                "template <u32 zf_stage_t, typename zf_code_t>\n__device__ __forceinline__ void zf_expand_t("
                    .to_string(),
                "#define ZF_CODE_T zf_code_t".to_string(),
                "if constexpr (sizeof(ZF_CODE_T) == 2u) {".to_string(),
                "__launch_bounds__(ZF_THREADS)\nzf_expand(".to_string(),
                "zf_expand_t<ZF_STAGE_WIDE, u32>(in, out, scratch, prm, work, err);".to_string(),
                "__launch_bounds__(ZF_THREADS, 1536 / ZF_THREADS)\nzf_expand_n(".to_string(),
                "zf_expand_t<ZF_STAGE_NARROW, u16>(in, out, scratch, prm, work, err);".to_string(),
            ] {
                assert!(k.source.contains(&n), "{plan}: {n}");
            }
            // Three blocks (and their static shared memory) fit a multiprocessor's 228
            // KiB, a KiB of each reserved.
            assert!(k.expand_narrow_smem >= narrow_stage, "{plan}");
            assert!(
                3 * (k.expand_narrow_smem + 2048 + 1024) <= 228 * 1024,
                "{plan}"
            );
            assert!(k.expand_smem > k.expand_narrow_smem, "{plan}");
        } else {
            assert!(
                k.source.contains(&format!("#define ZF_STR_STAGE {stage}u")),
                "{plan}"
            );
            assert_eq!(k.expand_narrow_smem, 0, "{plan}");
            assert!(!k.source.contains(strings::EXPAND_NARROW_NAME), "{plan}");
        }
        let (first, second) = k
            .source
            .split_once(strings::EXPAND_NAME)
            .unwrap_or_else(|| panic!("{plan}: no expansion kernel"));
        assert!(first.contains(KERNEL_NAME), "{plan}");
        // The first kernel writes the table; the second reads it and writes the strings.
        assert!(
            first.contains(
                "tab[2u * ((j0 + threadIdx.x) / parts) + 1u] = (u32)min(t, (u64)claimed);"
            ),
            "{plan}"
        );
        // A `strdict` tile of entries of at most 8 or 24 bytes takes one step a token (of
        // three or seven words); a `words` tile one of five words for tokens of at most 16.
        for n in [
            "const bool zf_short = __syncthreads_and(zf_lmax2 <= 8u);",
            "const bool zf_mid = __syncthreads_and(zf_lmax2 <= 24u);",
            "d6 = dw[wa + 6u];",
        ] {
            assert_eq!(
                k.source.contains(n),
                plan.starts_with("strdict"),
                "{plan}: {n}"
            );
        }
        // A thread's codes come in 16-byte loads (four a thread of a `words` tile, or
        // eight as `u16`, eight of a `strdict` or `plain` one), and a tile's sum takes one
        // barrier.
        let last_quad = if plan.starts_with("words") {
            "const uint4 zf_cq0 = ((const uint4*)codes)[1u * threadIdx.x + 0u];"
        } else {
            "const uint4 zf_cq1 = ((const uint4*)codes)[2u * threadIdx.x + 1u];"
        };
        for n in [last_quad, "p0 = zf_scan_tile<u64>(lsum, &ttot, zf_flip);"] {
            assert!(k.source.contains(n), "{plan}: {n}");
        }
        assert_eq!(
            k.source.contains("#define ZF_TOK_ITEMS 8u"),
            !plan.starts_with("words") || narrow,
            "{plan}"
        );
        assert_eq!(
            k.source
                .contains("zf_short = false, zf_mid = __syncthreads_and(zf_lmax2 <= 16u);"),
            plan.starts_with("words"),
            "{plan}"
        );
        // A `words` thread stores its rows' offsets once, 16 bytes at a time where they
        // are aligned, and its lanes read only the dictionary words of their tokens.
        assert_eq!(
            second.contains("if (nw > 1u) d1 = dw[wa + 1u];"),
            plan.starts_with("words"),
            "{plan}"
        );
        let offsets = if plan.starts_with("words") {
            "__stcs((uint4*)((u32*)o + rb) + 0, make_uint4(b + ro[0], b + ro[1], b + ro[2], b + ro[3]));"
        } else {
            "__stcs((u32*)o + r0 + tt + x, (u32)v);"
        };
        for n in [
            "const u32 T1 = tab[2u * seg + 2u], B1 = tab[2u * seg + 3u];",
            offsets,
        ] {
            assert!(second.contains(n), "{plan}: no `{n}` in\n{second}");
        }
        // A tile's bytes go by bulk copy.
        assert_eq!(
            second.contains("zf_store_bulk(out, zf_stage, g, g + ttot);"),
            !plan.starts_with("plain"),
            "{plan}"
        );
        // Narrow `words` codes are staged eight a thread, from a multiple of eight.
        assert_eq!(
            second.contains("if (seg_codes) zf_codes8_1(e, T0 - za, T1 - T0 + za, zf_scode);"),
            narrow && !narrow_dict,
            "{plan}"
        );
        assert!(
            k.source.contains(needle),
            "{plan}: no `{needle}` in\n{}",
            k.source
        );
    }
    // Dictionaries get a scratch region for their offsets, which the expansion reads.
    let k = generate(&shape_of("strdict", &texts())).unwrap_or_else(|e| panic!("{e}"));
    assert!(k.nodes[2].scratch.is_some());
    assert!(
        k.source
            .contains("zf_m2 < ZF_STR_OFFS ? zf_soff : zf_goff2")
    );
    // Entries are looked up packed (offset and length in one word) in shared memory.
    assert!(
        k.source
            .contains("zf_entry(zf_m2 < ZF_STR_OFFS, zf_goff2, c, so[j], sl[j]);")
    );
    // Staged bytes are stored 16 bytes at a time, marked to be evicted first (the output
    // is not read again by the decoder), and so are the offsets.
    assert!(k.source.contains("__stcs(gw + y, sw[y]);"));
}

#[test]
fn every_op_is_a_registered_primitive() {
    for enc in zipflow_encodings::encodings() {
        match Op::from_id(enc.id()) {
            Ok(op) => assert_eq!(op.name(), enc.name()),
            // Only a primitive declared CPU-only lacks an op, and its error names it.
            Err(e) => {
                assert!(!enc.gpu().decoder, "{} has no GPU op", enc.name());
                assert!(e.to_string().contains(enc.name()), "{e}");
            }
        }
    }
}

#[test]
fn ops_written_first_are_those_not_fully_parallel() {
    let written = |kind| {
        let mut names: Vec<&str> = zipflow_encodings::encodings()
            .iter()
            .filter_map(|e| Op::from_id(e.id()).ok())
            .filter(|&op| materialised(op, kind))
            .map(Op::name)
            .collect();
        names.sort_unstable();
        names
    };
    let chunk = [
        "ans",
        "chardict16",
        "chartable",
        "delta",
        "fsst",
        "hipatch",
        "rle",
    ];
    assert_eq!(written(KernelKind::Chunk), chunk);
    let mut tile = chunk.to_vec();
    tile.extend(["float2int", "patch"]);
    tile.sort_unstable();
    assert_eq!(written(KernelKind::Tile), tile);
}

/// Writes the generated source (or the error) of every kernel over a wide set of plans and
/// streams into the directory `ZIPFLOW_DUMP_KERNELS` names, one file a case, so two builds of
/// the generator can be compared (`diff -r`, or token by token). Run with `--ignored`.
#[test]
#[ignore = "a tool: writes files when ZIPFLOW_DUMP_KERNELS names a directory"]
fn dump_generated_sources() {
    use zipflow_encodings::selection::{
        DICT_FORMS, STRING_BYTES_FORMS, TEXT_CANDIDATES, candidates,
    };
    let Some(dir) = std::env::var_os("ZIPFLOW_DUMP_KERNELS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let ramp = |n: i64, m: i64| (0..n).map(move |i| (i * 7919) % m);
    let numbers: Vec<(&str, Values)> = vec![
        ("i64", ints()),
        (
            "u8",
            Values::Int(IntVec::U8(ramp(5000, 200).map(|v| v as u8).collect())),
        ),
        (
            "u16",
            Values::Int(IntVec::U16(ramp(5000, 60_000).map(|v| v as u16).collect())),
        ),
        (
            "i32",
            Values::Int(IntVec::I32(
                ramp(5000, 1 << 20).map(|v| v as i32 - 9).collect(),
            )),
        ),
        (
            "u32runs",
            Values::Int(IntVec::U32((0..5000u32).map(|i| i / 37).collect())),
        ),
        (
            "i64sorted",
            Values::Int(IntVec::I64((0..5000i64).map(|i| i * 3 + (i & 5)).collect())),
        ),
        ("spilled", spilled()),
        (
            "f64",
            Values::F64((0..3000).map(|i| f64::from(i) * 0.25 + 0.01).collect()),
        ),
        (
            "f32",
            Values::F32((0..3000).map(|i| i as f32 * 0.5).collect()),
        ),
    ];
    let mut plans: Vec<String> = Vec::new();
    let extra = [
        "dict(codes: radix, values: plain)",
        "dict(codes: bitpack, values: rle)",
        "dict(codes: bitpack, values: for | patch | bitpack)",
        "hipatch(counts: rle) | bitpack",
        "hipatch | bitpack",
        "delta | zigzag | bitpack",
        "delta | hipatch | bitpack",
        "radix",
        "rle",
        "zigzag | bitpack",
    ];
    let mut cases: Vec<(String, String, Values)> = Vec::new();
    for (name, values) in &numbers {
        let ptype = values.ptype();
        plans.clear();
        plans.extend(candidates(ptype).iter().map(ToString::to_string));
        plans.extend(extra.iter().map(|p| p.to_string()));
        for p in &plans {
            cases.push((name.to_string(), p.clone(), values.clone()));
        }
    }
    let codes = ["bitpack", "for | bitpack", "ans", "radix", "plain", "rle"];
    let mut string_plans: Vec<String> = Vec::new();
    for c in codes {
        for d in DICT_FORMS {
            string_plans.push(format!("strdict(codes: {c}, dict: {d})"));
            string_plans.push(format!("words(codes: {c}, counts: {c}, dict: {d})"));
        }
    }
    string_plans.extend(
        STRING_BYTES_FORMS
            .iter()
            .map(|b| format!("plain(bytes: {b})")),
    );
    let strings: Vec<(&str, Values)> = vec![
        ("texts", texts()),
        (
            "categories",
            byte_strings((0..4000u64).map(|i| format!("cat{}", (i * 31) % 90).into_bytes())),
        ),
        (
            "fixed",
            byte_strings((0..4000u64).map(|i| format!("{:06}", i % 300).into_bytes())),
        ),
        (
            "unique",
            byte_strings((0..4000u64).map(|i| format!("id-{i}-x").into_bytes())),
        ),
        (
            "long",
            byte_strings((0..600u64).map(|i| {
                format!("{} ", "lorem ipsum dolor ".repeat((i % 9 + 1) as usize)).into_bytes()
            })),
        ),
    ];
    for (name, values) in &strings {
        for p in &string_plans {
            cases.push((name.to_string(), p.clone(), values.clone()));
        }
    }
    let text: Vec<u8> = (0..40_000u32)
        .map(|i| b"the quick brown fox jumps over the lazy dog, 0123456789\n"[(i % 56) as usize])
        .collect();
    for p in TEXT_CANDIDATES.iter().chain(&["chardict16", "chartable"]) {
        cases.push((
            "text".into(),
            p.to_string(),
            Values::Int(IntVec::U8(text.clone())),
        ));
    }
    let mut written = 0;
    for (i, (name, plan, values)) in cases.iter().enumerate() {
        let out = (|| -> std::result::Result<String, String> {
            let parsed: Plan = plan.parse().map_err(|e| format!("plan: {e}"))?;
            let node = encode(&parsed, values).map_err(|e| format!("encode: {e}"))?;
            let bytes = node.to_bytes().map_err(|e| format!("bytes: {e}"))?;
            let view = NodeView::parse(&bytes).map_err(|e| format!("parse: {e}"))?;
            let shape = Shape::of(&view).map_err(|e| format!("shape: {e}"))?;
            let k = generate(&shape).map_err(|e| format!("generate: {e}"))?;
            Ok(format!(
                "// {:?} {} params\n{}",
                k.kind, k.nparams, k.source
            ))
        })();
        let text = match out {
            Ok(s) => s,
            Err(e) => format!("error: {e}\n"),
        };
        let file = dir.join(format!("{i:04}-{name}.cu"));
        std::fs::write(&file, format!("// {plan}\n{text}")).unwrap_or_else(|e| panic!("{e}"));
        written += 1;
    }
    assert!(written > 0);
}
