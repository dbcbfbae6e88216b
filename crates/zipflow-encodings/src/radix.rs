//! Radix packing: values below a small base `B` that is not a power of two, `m` at a time as
//! the digits of one base-`B` number of `k` bits.
//!
//! Bit-packing stores a value below `B` in `ceil(log2 B)` bits: 2 bits for three values, where
//! `log2 3` = 1.585 would do. Here `m` values make one number `d0 + d1 B + d2 B^2 + ...` below
//! `B^m`, stored in `k = ceil(log2 B^m)` bits, with `m` (up to 32 bits a group) chosen for the
//! fewest bits per value: three values take 1.59 bits each (17 in 27 bits), five 2.33 (3 in 7
//! bits), six 2.6, seven 2.82 (11 in 31 bits). Dictionary codes of a three-valued flag (TPC-H
//! `l_returnflag`) pack at 1.59 bits instead of 2, close to their entropy, with no entropy
//! coder.
//!
//! A leaf with its own bit stream, not a child: a stream of groups `m` times shorter than the
//! values would be padded to whole 1024-value vectors by `bitpack`, which on a short chunk (or
//! a plan search's sample) costs more than the packing saves.
//!
//! Decoding is fully parallel: value `i` is digit `i % m` of group `i / m`, whose `k` bits
//! start at bit `k * (i / m)`.
//!
//! Node: meta = `[B: u8, m: u8, k: u8]`; buffer 0 = the groups, `k` bits each, least
//! significant bit first, in little-endian bytes, the last group padded with zero digits.

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use zipflow_core::{Error, Int, PType, Plan, Result, Values, match_ints};

/// `radix` / `radix(B)`.
pub struct Radix;

/// On-disk id of [`Radix`].
pub const ID: u16 = DESCRIPTOR.id;

/// Bits to store numbers below `n` (`n >= 2`).
fn bits_below(n: u64) -> u32 {
    64 - (n - 1).leading_zeros()
}

/// The digits per group `m` and group bits `k` for base `base` (2..=255): the fewest bits per
/// value with `k <= 32`, ties to the smaller `m`.
pub fn layout(base: u32) -> (u32, u32) {
    let mut best = (1, bits_below(u64::from(base)));
    let mut p = u64::from(base);
    for m in 2..=32u32 {
        p *= u64::from(base);
        let k = bits_below(p);
        if k > 32 {
            break;
        }
        // k / m < best.1 / best.0
        if u64::from(k) * u64::from(best.0) < u64::from(best.1) * u64::from(m) {
            best = (m, k);
        }
    }
    best
}

/// Packs `values` (each below `base`) as groups of `m` digits, `k` bits each.
fn pack<T: Int>(values: &[T], base: u32, m: u32, k: u32) -> Vec<u8> {
    let groups = values.len().div_ceil(m as usize);
    let mut out = vec![0u8; (groups * k as usize).div_ceil(8)];
    let mut bit = 0usize;
    for group in values.chunks(m as usize) {
        // The most significant digit first, so the first value ends as the lowest.
        let g = group
            .iter()
            .rev()
            .fold(0u64, |acc, v| acc * u64::from(base) + v.to_u64());
        for b in 0..k as usize {
            if (g >> b) & 1 == 1 {
                out[(bit + b) / 8] |= 1 << ((bit + b) % 8);
            }
        }
        bit += k as usize;
    }
    out
}

/// Group `j`'s `k` bits from `bytes` (bounds-checked by the caller: the group ends in it).
#[inline(always)]
fn group(bytes: &[u8], j: usize, k: u32) -> u64 {
    let bit = j * k as usize;
    let at = bit / 8;
    let mut w = [0u8; 8];
    let end = (at + 8).min(bytes.len());
    w[..end - at].copy_from_slice(&bytes[at..end]);
    (u64::from_le_bytes(w) >> (bit % 8)) & ((1u64 << k) - 1)
}

/// Unpacks `len` values with the base a constant (division by a constant is a multiply).
fn unpack_const<T: Int, const B: u64>(bytes: &[u8], len: usize, m: u32, k: u32, out: &mut Vec<T>) {
    unpack_with(bytes, len, B, m, k, out);
}

#[inline(always)]
fn unpack_with<T: Int>(bytes: &[u8], len: usize, base: u64, m: u32, k: u32, out: &mut Vec<T>) {
    out.clear();
    out.reserve(len);
    let m = m as usize;
    for j in 0..len.div_ceil(m) {
        let mut g = group(bytes, j, k);
        for _ in 0..m.min(len - j * m) {
            out.push(T::from_u64_wrapping(g % base));
            g /= base;
        }
    }
}

fn unpack<T: Int>(bytes: &[u8], len: usize, base: u32, m: u32, k: u32, out: &mut Vec<T>) {
    match base {
        3 => unpack_const::<T, 3>(bytes, len, m, k, out),
        5 => unpack_const::<T, 5>(bytes, len, m, k, out),
        6 => unpack_const::<T, 6>(bytes, len, m, k, out),
        7 => unpack_const::<T, 7>(bytes, len, m, k, out),
        _ => unpack_with(bytes, len, u64::from(base), m, k, out),
    }
}

/// The base for `values`: the plan's, or one more than the largest value. `Err` when a value
/// does not fit below the base or the base is outside 2..=255.
fn resolve_base<T: Int>(plan: &Plan, values: &[T]) -> Result<u32> {
    let max = values.iter().map(|v| v.to_u64()).max().unwrap_or(0);
    let base = match plan.params.first() {
        Some(&b) => b,
        None => i64::try_from(max.saturating_add(1).max(2)).unwrap_or(i64::MAX),
    };
    if !(2..=255).contains(&base) {
        return Err(Error::plan(
            plan,
            format!("radix base {base} is outside 2..=255 (values up to {max})"),
        ));
    }
    if max >= base as u64 {
        return Err(Error::plan(
            plan,
            format!("a value {max} does not fit below radix base {base}"),
        ));
    }
    Ok(base as u32)
}

/// A checked `radix` node: its layout, one zipflow writes, and its groups.
pub struct View<'a> {
    /// The base `B`.
    pub base: u32,
    /// Digits per group.
    pub m: u32,
    /// Bits per group.
    pub k: u32,
    /// The groups' bytes, exactly as many as `len` values need.
    pub groups: &'a [u8],
}

/// The base `node`'s metadata declares, not checked (for choosing a kernel compiled for it;
/// [`View::parse`] checks it).
pub fn declared_base(node: &NodeView<'_>) -> Option<u32> {
    node.meta.first().map(|&b| u32::from(b))
}

impl<'a> View<'a> {
    /// Checks a `radix` node: its meta is a layout zipflow writes and its buffer holds exactly
    /// the groups its values need.
    pub fn parse(node: &NodeView<'a>) -> Result<View<'a>> {
        node.expect_shape("radix", 1, 0)?;
        let mut meta = node.meta_reader();
        let base = u32::from(meta.u8("base")?);
        let m = u32::from(meta.u8("digits per group")?);
        let k = u32::from(meta.u8("bits per group")?);
        meta.finish("radix")?;
        if base < 2 || (m, k) != layout(base) {
            return Err(Error::corrupt(format!(
                "radix base {base} with {m} digits in {k} bits is not a layout zipflow writes"
            )));
        }
        let groups = node.buffer(0, "radix groups")?;
        let need = (node.len.div_ceil(m as usize) * k as usize).div_ceil(8);
        if groups.len() != need {
            return Err(Error::corrupt(format!(
                "radix groups take {} bytes, {} values need {need}",
                groups.len(),
                node.len
            )));
        }
        Ok(View { base, m, k, groups })
    }
}

impl Encoding for Radix {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_digits(),
            plan: "radix",
            minus: &[],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "radix needs integers"));
        };
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        let (base, m, k, bytes) = match_ints!(v, T, x => {
            let base = resolve_base::<T>(plan, x)?;
            let (m, k) = layout(base);
            (base, m, k, pack(x, base, m, k))
        });
        node.meta = vec![base as u8, m as u8, k as u8];
        node.buffers.push(bytes);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        let View { base, m, k, groups } = View::parse(node)?;
        let Values::Int(o) = out else {
            return Err(Error::corrupt("radix node for non-integer values"));
        };
        match_ints!(o, T, o => unpack(groups, node.len, base, m, k, o));
        Ok(())
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        node.meta
            .first()
            .map(|&b| vec![i64::from(b)])
            .unwrap_or_default()
    }
}

/// What `radix` is: its id, name, child slots, GPU decoding and part in the search.
///
/// The GPU decodes `radix` at full speed at the top of a numeric column's plan, or of a string
/// column's codes, counts or lengths (or under `for`s there), where each thread peels a
/// group's digits off one after the other. Elsewhere (a dictionary's codes, under `delta`)
/// every value would divide its group by a power of the base: `dict` over `radix` decoded
/// l_quantity at 2,393 GB/s on the H200, where bit-packed codes decode a dictionary at about
/// 3,000.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 19,
    name: "radix",
    slots: Slot::NONE,
    leaf_for_numbers: false,
    gpu: crate::GpuDecode {
        full_speed: crate::GpuPlace::Codes,
        ..crate::GpuDecode::parallel(Pattern::FullyParallel)
    },
    search: crate::Search::numeric(crate::Role::LongLeaf),
};

/// Digits below 3, the small values `radix` is for.
fn calibration_digits() -> zipflow_core::Values {
    let mut rnd = crate::selection::xorshift(0x9b05_688c_2b3e_6c1f);
    zipflow_core::Values::Int(zipflow_core::IntVec::U8(
        (0..crate::selection::CALIBRATION_LEN)
            .map(|_| (rnd() % 3) as u8)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::testing::*;
    use zipflow_core::IntVec;
    use zipflow_core::values::IntVecOf;

    #[test]
    fn layouts_take_the_fewest_bits_per_value() {
        assert_eq!(layout(2), (1, 1));
        assert_eq!(layout(3), (17, 27));
        assert_eq!(layout(4), (1, 2));
        assert_eq!(layout(5), (3, 7));
        assert_eq!(layout(6), (5, 13));
        assert_eq!(layout(7), (11, 31));
        for b in 2..=255u32 {
            let (m, k) = layout(b);
            // The group holds every m-digit number, within 32 bits.
            assert!(u128::from(b).pow(m) <= 1u128 << k && k <= 32, "base {b}");
            assert!(k <= m * bits_below(u64::from(b)), "base {b}");
        }
    }

    struct EdgeLengths;

    impl IntCheck for EdgeLengths {
        fn check<T: IntVecOf>(&self) -> Result<()> {
            let mut r = random(u64::from(T::BITS));
            for base in [2u64, 3, 5, 6, 7, 10, 100, 127] {
                if base > T::MAX.to_u64().min(255) {
                    continue;
                }
                let m = layout(base as u32).0 as usize;
                for n in [0, 1, m - 1, m, m + 1, 1023, 1024, 1025, 3000] {
                    let v: Vec<T> = (0..n).map(|_| T::from_u64_wrapping(r() % base)).collect();
                    let values = Values::Int(T::wrap(v));
                    round_trip(&plan("radix"), &values)?;
                    round_trip(&plan(&format!("radix({base})")), &values)?;
                }
            }
            Ok(())
        }
    }

    #[test]
    fn round_trips_every_int_type() -> Result<()> {
        for_every_int_type(&EdgeLengths)
    }

    #[test]
    fn three_values_take_one_point_six_bits() -> Result<()> {
        let mut r = random(3);
        let v: Vec<u8> = (0..65_536).map(|_| (r() % 3) as u8).collect();
        let values = Values::Int(IntVec::U8(v));
        let radix = round_trip_bits("radix", &values)?;
        let packed = round_trip_bits("bitpack", &values)?;
        let bits = radix.len() as f64 * 8.0 / 65_536.0;
        assert!(bits < 1.6, "{bits} bits per value");
        assert!(radix.len() * 5 < packed.len() * 4 + 64);
        // A search sample of 2,048 values packs as densely, but for the node's header.
        let sample = Values::Int(IntVec::U8((0..2048).map(|i| (i % 3) as u8).collect()));
        let bytes = round_trip_bits("radix", &sample)?;
        assert!(
            (bytes.len() - 64) * 8 < 2048 * 16 / 10,
            "{} bytes",
            bytes.len()
        );
        Ok(())
    }

    #[test]
    fn plan_and_corruption_errors() -> Result<()> {
        let v = Values::Int(IntVec::I32(vec![0, 1, 2, 1, 0]));
        assert!(encode(&plan("radix(2)"), &v).is_err());
        assert!(encode(&plan("radix(1)"), &v).is_err());
        assert!(encode(&plan("radix(256)"), &v).is_err());
        let neg = Values::Int(IntVec::I32(vec![0, -1]));
        assert!(encode(&plan("radix"), &neg).is_err());
        let wide = Values::Int(IntVec::U32(vec![0, 300]));
        assert!(encode(&plan("radix"), &wide).is_err());
        let values = Values::Int(IntVec::U16((0..3000).map(|i| i % 3).collect()));
        let p = "radix(3)";
        let good = encode(&plan(p), &values)?;
        check_corruption(p, &good, 3)?;
        let e = corrupted(&good, |n| n.meta[0] = 1)?;
        assert!(e.contains("not a layout"), "{e}");
        let e = corrupted(&good, |n| n.meta[1] = 6)?;
        assert!(e.contains("not a layout"), "{e}");
        // Base 5 packs 3 digits in 7 bits: the buffer no longer lines up.
        let e = corrupted(&good, |n| {
            n.meta = vec![5, 3, 7];
        })?;
        assert!(e.contains("3000 values need 875"), "{e}");
        Ok(())
    }
}
