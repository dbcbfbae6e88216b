//! The helpers every primitive's unit tests share: parsing plans, checked round trips,
//! deterministic random data, running a check for each integer type, and corrupting encoded
//! nodes.

use crate::node::{EncodedNode, NodeView};
use crate::{Scratch, decode_bytes, describe, encode};
use std::marker::PhantomData;
use zipflow_core::values::{ByteStrings, IntVecOf};
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, Values};

/// Parses `s`, panicking with the parse error.
pub(crate) fn plan(s: &str) -> Plan {
    s.parse().unwrap_or_else(|e| panic!("{e}"))
}

/// Encodes `values` by `p` and requires the bytes to decode back to `values`, the estimate to
/// be exact, and the resolved plan to re-encode to the same bytes. Returns the bytes.
pub(crate) fn round_trip(p: &Plan, values: &Values) -> Result<Vec<u8>> {
    let node = encode(p, values)?;
    let bytes = node.to_bytes()?;
    assert_eq!(bytes.len(), node.size());
    assert_eq!(&decode_bytes(&bytes)?, values, "plan `{p}`");
    // Decoders fully define their output even in reused, dirty buffers.
    let (mut out, mut scratch) = (dirty(values.ptype()), Scratch::default());
    for v in [
        IntVec::U8(vec![0xa5; 3000]),
        IntVec::U16(vec![0xa5a5; 3000]),
        IntVec::U32(vec![0xa5a5_a5a5; 3000]),
        IntVec::U64(vec![u64::MAX; 3000]),
        IntVec::I8(vec![-91; 3000]),
        IntVec::I16(vec![-23131; 3000]),
        IntVec::I32(vec![-1; 3000]),
        IntVec::I64(vec![-1; 3000]),
    ] {
        scratch.give(Values::Int(v));
    }
    scratch.give(dirty(PType::Bytes));
    scratch.give(dirty(PType::F64));
    scratch.give(dirty(PType::F32));
    crate::decode(&NodeView::parse(&bytes)?, &mut out, &mut scratch)?;
    assert_eq!(&out, values, "plan `{p}` into used buffers");
    assert_eq!(
        crate::estimate(p, values)?,
        node.size(),
        "estimate, plan `{p}`"
    );
    // The resolved plan re-encodes to the same bytes.
    let resolved = describe(&NodeView::parse(&bytes)?)?;
    assert_eq!(
        encode(&resolved, values)?.to_bytes()?,
        bytes,
        "plan `{resolved}`"
    );
    Ok(bytes)
}

/// A stream of `ptype` full of values no decoder should leave behind.
fn dirty(ptype: PType) -> Values {
    match ptype {
        PType::F32 => Values::F32(vec![f32::NAN; 3000]),
        PType::F64 => Values::F64(vec![-1.5; 3000]),
        PType::Bytes => Values::Bytes(ByteStrings {
            offsets: (0..3001).map(|i| i * 3).collect(),
            data: vec![b'z'; 9000],
        }),
        p => {
            let mut v = Values::empty(p);
            if let Values::Int(iv) = &mut v {
                *iv = match p {
                    PType::U8 => IntVec::U8(vec![0x5a; 3000]),
                    PType::U16 => IntVec::U16(vec![0x5a5a; 3000]),
                    PType::U32 => IntVec::U32(vec![0x5a5a_5a5a; 3000]),
                    PType::U64 => IntVec::U64(vec![7; 3000]),
                    PType::I8 => IntVec::I8(vec![90; 3000]),
                    PType::I16 => IntVec::I16(vec![23130; 3000]),
                    PType::I32 => IntVec::I32(vec![-7; 3000]),
                    _ => IntVec::I64(vec![-7; 3000]),
                };
            }
            v
        }
    }
}

/// Encodes, serialises and decodes `values` by `plan`, requiring a bit-exact round trip (so NaN
/// payloads and `-0.0` count). Returns the bytes.
pub(crate) fn round_trip_bits(plan: &str, values: &Values) -> Result<Vec<u8>> {
    let bytes = encode(&plan.parse()?, values)?.to_bytes()?;
    let back = decode_bytes(&bytes)?;
    if !back.bit_eq(values) {
        return Err(Error::invalid(format!(
            "`{plan}` did not round-trip {} {} values",
            values.len(),
            values.ptype()
        )));
    }
    Ok(bytes)
}

/// The plan a serialised node tree was encoded with, as text.
pub(crate) fn described(bytes: &[u8]) -> Result<String> {
    Ok(describe(&NodeView::parse(bytes)?)?.to_string())
}

/// A deterministic generator (splitmix64), so failures reproduce.
pub(crate) fn random(seed: u64) -> impl FnMut() -> u64 {
    let mut s = seed;
    move || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// `n` values of `T` drawn from `r`, over the type's whole range.
pub(crate) fn random_ints<T: Int>(r: &mut impl FnMut() -> u64, n: usize) -> Vec<T> {
    (0..n).map(|_| T::from_u64_wrapping(r())).collect()
}

/// The edge cases that open every primitive's list: no values, the single value `one`, then
/// random values from `r` one short of, exactly and one past a 1024-value vector.
pub(crate) fn edge_lengths<T: Int>(r: &mut impl FnMut() -> u64, one: T) -> Vec<Vec<T>> {
    vec![
        vec![],
        vec![one],
        random_ints(r, 1023),
        random_ints(r, 1024),
        random_ints(r, 1025),
    ]
}

/// A check written once over the integer type, run for each by [`for_every_int_type`].
pub(crate) trait IntCheck {
    /// Runs the check on `T` values.
    fn check<T: IntVecOf>(&self) -> Result<()>;
}

/// Runs `c`'s check for each of the eight integer types.
pub(crate) fn for_every_int_type(c: &impl IntCheck) -> Result<()> {
    c.check::<u8>()?;
    c.check::<i8>()?;
    c.check::<u16>()?;
    c.check::<i16>()?;
    c.check::<u32>()?;
    c.check::<i32>()?;
    c.check::<u64>()?;
    c.check::<i64>()
}

/// Test streams written once over the integer type.
pub(crate) trait IntCases {
    /// The streams, as `T` values.
    fn cases<T: Int>() -> Vec<Vec<T>>;
}

/// [`round_trip`]s each of `C`'s streams of every integer type by each of `plans`.
pub(crate) fn round_trip_every_int_type<C: IntCases>(plans: &[&str]) -> Result<()> {
    struct RoundTrips<'a, C>(&'a [&'a str], PhantomData<C>);
    impl<C: IntCases> IntCheck for RoundTrips<'_, C> {
        fn check<T: IntVecOf>(&self) -> Result<()> {
            let cases: Vec<Values> = C::cases::<T>()
                .into_iter()
                .map(|case| Values::Int(T::wrap(case)))
                .collect();
            for p in self.0 {
                for values in &cases {
                    round_trip(&plan(p), values)?;
                }
            }
            Ok(())
        }
    }
    for_every_int_type(&RoundTrips::<C>(plans, PhantomData))
}

/// `values` as little-endian bytes, as a node's buffer stores them.
pub(crate) fn u32_bytes(values: &[u32]) -> Vec<u8> {
    bytemuck::cast_slice::<u32, u8>(values).to_vec()
}

/// The error decoding `node` gives; an error itself if `node` decodes.
pub(crate) fn decode_err(node: &EncodedNode) -> Result<String> {
    match decode_bytes(&node.to_bytes()?) {
        Ok(_) => Err(Error::invalid("corrupt node decoded")),
        Err(e) => Ok(e.to_string()),
    }
}

/// The error decoding a copy of `good` changed by `edit` gives; an error itself if it decodes.
pub(crate) fn corrupted(good: &EncodedNode, edit: impl FnOnce(&mut EncodedNode)) -> Result<String> {
    let mut node = good.clone();
    edit(&mut node);
    decode_err(&node)
}

/// The error decoding `values` encoded by plan `p` and changed by `edit` gives; an error itself
/// if it decodes.
pub(crate) fn corrupt(
    p: &str,
    values: &Values,
    edit: impl FnOnce(&mut EncodedNode),
) -> Result<String> {
    corrupted(&encode(&plan(p), values)?, edit)
}

/// Requires `node`, encoded by plan `p`, to decode, every proper prefix of its bytes to fail
/// to, and a flip of every `flip_step`-th bit to give an error, not a panic, or values as many
/// as the header then states.
pub(crate) fn check_corruption(p: &str, node: &EncodedNode, flip_step: usize) -> Result<()> {
    let bytes = node.to_bytes()?;
    decode_bytes(&bytes)?;
    for n in 0..bytes.len() {
        assert!(decode_bytes(&bytes[..n]).is_err(), "plan `{p}`, prefix {n}");
    }
    for i in (0..bytes.len() * 8).step_by(flip_step) {
        let mut b = bytes.clone();
        b[i / 8] ^= 1 << (i % 8);
        if let Ok(v) = decode_bytes(&b) {
            assert_eq!(v.len(), NodeView::parse(&b)?.len, "plan `{p}`, bit {i}");
        }
    }
    Ok(())
}

/// `i % 8` with `outlier` at the first, middle and last positions.
pub(crate) fn with_outliers<T: Int>(n: usize, outlier: T) -> Vec<T> {
    let mut v: Vec<T> = (0..n as u64).map(|i| T::from_u64_wrapping(i % 8)).collect();
    for p in [0, n / 2, n.saturating_sub(1)] {
        if let Some(x) = v.get_mut(p) {
            *x = outlier;
        }
    }
    v
}

/// The exception count (meta bytes 1..5, after the width) of the first node with encoding id
/// `id` down the first children of a serialised tree (`patch`, `hipatch`).
pub(crate) fn exception_count(bytes: &[u8], id: u16) -> Result<u32> {
    fn find<'a>(node: &'a NodeView<'a>, id: u16) -> Option<&'a NodeView<'a>> {
        if node.id == id {
            Some(node)
        } else {
            node.children.first().and_then(|c| find(c, id))
        }
    }
    let root = NodeView::parse(bytes)?;
    let node = find(&root, id).ok_or_else(|| Error::invalid(format!("no node of id {id}")))?;
    let b = node
        .meta
        .get(1..5)
        .ok_or_else(|| Error::invalid("short meta"))?;
    Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}
