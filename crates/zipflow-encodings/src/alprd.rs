//! Real doubles split at a bit position (ALP-RD): for floats that are not decimals (results of
//! arithmetic, measurements, float32 values widened), whose low mantissa bits look random but
//! whose high bits (sign, exponent, first mantissa bits) take few values.
//!
//! Each value's bits are cut at bit `R`: the `left` child holds the bits above (at most 16,
//! so `R >= 48` for f64 and `R >= 16` for f32), the `right` child the `R` bits below. The
//! left parts of a column are a handful of distinct values, which a dictionary codes in a few
//! bits (the default `dict`); the right parts are bit-packed at `R` bits. Where ALP-RD keeps
//! an eight-entry dictionary with patched exceptions inside the primitive, here the `left`
//! child is a plan like any other, so the search picks `dict`, `rle`, `patch` or an entropy
//! coder there as the data asks.
//!
//! Every value round-trips bit for bit (NaN payloads, -0.0, infinities, subnormals): nothing
//! is an exception. Decoding is one shift and OR per value, so it runs anywhere
//! ([`Pattern::FullyParallel`]).
//!
//! Low bits that are zero in every value are not stored: the right parts are shifted down by
//! `S`, the trailing zero bits they all share (a float32 value widened to a double has 29 of
//! them), so `right` holds `R - S` significant bits.
//!
//! `R` is the plan's parameter (`alprd(52)`), or chosen on an evenly spaced sample of at most
//! [`SAMPLE_LEN`] values: the `R` minimising `(R - S) * n + left_bits(R)`, where `left_bits`
//! prices a dictionary of the distinct left parts (code bits per value plus 16 per entry).
//!
//! Node: meta = `[R: u8]`, or `[R: u8, S: u8]` with `1 <= S < R` when the right parts share
//! `S` trailing zero bits; child 0 (`left`) = `u16`, the bits above `R`; child 1 (`right`) =
//! the bits below `R`, shifted down by `S`, as `u64` for f64 and `u32` for f32 (decoding
//! shifts them back up and keeps the `R` bits below the left part).

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values};

/// `alprd` / `alprd(R)`.
pub struct AlpRd;

/// On-disk id of [`AlpRd`].
pub const ID: u16 = DESCRIPTOR.id;

/// Values the automatic choice of `R` looks at.
pub const SAMPLE_LEN: usize = 1024;

/// Widest left part: it is stored as u16.
pub const MAX_LEFT_BITS: u32 = 16;

/// Header (16 B), two child-table entries and the one-byte meta, padded.
const NODE_OVERHEAD: usize = 32;

/// The bit patterns of a float type, as the split sees them.
fn bits_of(values: &Values) -> Option<(Vec<u64>, u32)> {
    match values {
        Values::F64(v) => Some((v.iter().map(|x| x.to_bits()).collect(), 64)),
        Values::F32(v) => Some((v.iter().map(|x| u64::from(x.to_bits())).collect(), 32)),
        _ => None,
    }
}

/// The smallest `R` allowed for values `width` bits wide.
pub fn min_right(width: u32) -> u32 {
    width - MAX_LEFT_BITS
}

/// The `R` the automatic choice picks for values of `width` bits (see the module docs).
pub fn choose_right(bits: &[u64], width: u32) -> u32 {
    let n = bits.len().min(SAMPLE_LEN);
    if n == 0 {
        return width - 1;
    }
    let sample: Vec<u64> = (0..n)
        .map(|k| bits[(k as u64 * bits.len() as u64 / n as u64) as usize])
        .collect();
    let mut best = (u64::MAX, width - 1);
    for r in min_right(width)..width {
        let mut left: Vec<u64> = sample.iter().map(|b| b >> r).collect();
        left.sort_unstable();
        left.dedup();
        let distinct = left.len() as u64;
        let code = u64::from(64 - (distinct - 1).leading_zeros());
        let stored = r - shared_zeros(&sample, r);
        let cost = (u64::from(stored) + code) * n as u64 + distinct * 16;
        if cost < best.0 {
            best = (cost, r);
        }
    }
    best.1
}

/// `S` for a split at `r`: the trailing zero bits that the parts of `bits` below `r` all
/// share, at most `r - 1` (0 when every part is zero).
pub fn shared_zeros(bits: &[u64], r: u32) -> u32 {
    let mask = (1u64 << r) - 1;
    let any = bits.iter().fold(0u64, |acc, b| acc | (b & mask));
    if any == 0 {
        0
    } else {
        any.trailing_zeros().min(r - 1)
    }
}

fn resolve_right(plan: &Plan, bits: &[u64], width: u32) -> Result<u32> {
    match plan.params.first() {
        None => Ok(choose_right(bits, width)),
        Some(&r) if (i64::from(min_right(width))..i64::from(width)).contains(&r) => Ok(r as u32),
        Some(&r) => Err(Error::plan(
            plan,
            format!(
                "alprd's split {r} is outside {}..={} for {width}-bit floats (the left part \
                 is at most {MAX_LEFT_BITS} bits, the right part at least one)",
                min_right(width),
                width - 1
            ),
        )),
    }
}

/// The node without its children, and its `left` and `right` streams.
fn shell(plan: &Plan, input: &Values) -> Result<(EncodedNode, Values, Values)> {
    let Some((bits, width)) = bits_of(input) else {
        return Err(Error::plan(plan, "alprd needs f32 or f64 values"));
    };
    let mut node = EncodedNode::new(ID, input.ptype(), bits.len())?;
    let r = resolve_right(plan, &bits, width)?;
    let shift = shared_zeros(&bits, r);
    let mask = (1u64 << r) - 1;
    let left: Vec<u16> = bits.iter().map(|b| (b >> r) as u16).collect();
    let right = if width == 64 {
        IntVec::U64(bits.iter().map(|b| (b & mask) >> shift).collect())
    } else {
        IntVec::U32(bits.iter().map(|b| ((b & mask) >> shift) as u32).collect())
    };
    node.meta = if shift == 0 {
        vec![r as u8]
    } else {
        vec![r as u8, shift as u8]
    };
    Ok((node, Values::Int(IntVec::U16(left)), Values::Int(right)))
}

/// An `alprd` node, parsed and checked once.
#[derive(Debug, Clone, Copy)]
pub struct View<'n, 'a> {
    /// `R`: the bits of the right part.
    pub right_bits: u32,
    /// `S`: the trailing zero bits of every right part, not stored (`0..R`).
    pub shift: u32,
    /// The bits above `R`: u16, the node's length.
    pub left: &'n NodeView<'a>,
    /// The bits below `R`: u64 for f64, u32 for f32, the node's length.
    pub right: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape, metadata and children.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        node.expect_shape("alprd", 0, 2)?;
        let mut meta = node.meta_reader();
        let r = u32::from(meta.u8("alprd split")?);
        let shift = match node.meta.len() {
            1 => 0,
            _ => u32::from(meta.u8("alprd shift")?),
        };
        meta.finish("alprd")?;
        let (width, right) = match node.ptype {
            PType::F64 => (64, PType::U64),
            PType::F32 => (32, PType::U32),
            p => return Err(Error::corrupt(format!("alprd node claims {p} values"))),
        };
        if !(min_right(width)..width).contains(&r) {
            return Err(Error::corrupt(format!(
                "alprd split {r} is outside {}..={} for {} values",
                min_right(width),
                width - 1,
                node.ptype
            )));
        }
        if node.meta.len() > 1 && !(1..r).contains(&shift) {
            return Err(Error::corrupt(format!(
                "alprd shift {shift} is outside 1..{r}"
            )));
        }
        expect_child(node, 0, "alprd left parts", PType::U16, Some(node.len))?;
        expect_child(node, 1, "alprd right parts", right, Some(node.len))?;
        Ok(View {
            right_bits: r,
            shift,
            left: &node.children[0],
            right: &node.children[1],
        })
    }
}

/// Joins `left` and `right` (shifted up by `shift`) at bit `r` into `out` (same length): bits
/// of the shifted right part at or above `r` are ignored, so a damaged stream gives wrong
/// values, never a panic. `shift < r`.
pub fn join(left: &[u16], right: &[u64], r: u32, shift: u32, out: &mut [f64]) {
    let mask = (1u64 << r) - 1;
    for ((o, &l), &x) in out.iter_mut().zip(left).zip(right) {
        *o = f64::from_bits((u64::from(l) << r) | ((x << shift) & mask));
    }
}

/// [`join`] for f32.
pub fn join32(left: &[u16], right: &[u32], r: u32, shift: u32, out: &mut [f32]) {
    let mask = (1u32 << r) - 1;
    for ((o, &l), &x) in out.iter_mut().zip(left).zip(right) {
        *o = f32::from_bits((u32::from(l) << r) | ((x << shift) & mask));
    }
}

impl Encoding for AlpRd {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_measured(),
            plan: "alprd(50, left: plain, right: plain)",
            minus: &[(crate::selection::RAW, 2.0)],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_float()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let (mut node, left, right) = shell(plan, input)?;
        node.children.push(encode_child(plan, self, "left", &left)?);
        node.children
            .push(encode_child(plan, self, "right", &right)?);
        Ok(node)
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        Some(crate::memo::split("alprd", plan, input, || {
            let (_, left, right) = shell(plan, input)?;
            Ok(Split {
                own: NODE_OVERHEAD,
                children: vec![left, right],
            })
        }))
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let view = View::parse(node)?;
        let left = scratch.decode(view.left)?;
        let right = scratch.decode(view.right)?;
        let (r, shift) = (view.right_bits, view.shift);
        let result = match (&left, &right, out) {
            (Values::Int(IntVec::U16(l)), Values::Int(IntVec::U64(x)), Values::F64(o))
                if node.ptype == PType::F64 =>
            {
                crate::resize_for_overwrite(o, l.len(), 0.0);
                join(l, x, r, shift, o);
                Ok(())
            }
            (Values::Int(IntVec::U16(l)), Values::Int(IntVec::U32(x)), Values::F32(o))
                if node.ptype == PType::F32 =>
            {
                crate::resize_for_overwrite(o, l.len(), 0.0);
                join32(l, x, r, shift, o);
                Ok(())
            }
            _ => Err(Error::corrupt("alprd children or output of the wrong type")),
        };
        scratch.give(left);
        scratch.give(right);
        result
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        node.meta
            .first()
            .map(|&r| vec![i64::from(r)])
            .unwrap_or_default()
    }

    fn child_shape(&self, _slot: &str, shape: crate::Shape) -> crate::Shape {
        shape.numbers()
    }
}

/// What `alprd` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 21,
    name: "alprd",
    slots: &[
        Slot {
            name: "left",
            default: "dict",
        },
        Slot {
            name: "right",
            default: "bitpack",
        },
    ],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::FullyParallel),
    search: crate::Search::numeric(crate::Role::TypeChange),
};

/// Measurements with full mantissas: a random walk of products, as sensors and models give.
fn calibration_measured() -> Values {
    let mut rnd = crate::selection::xorshift(0x3c6e_f372_fe94_f82b);
    let mut x = 20.0f64;
    Values::F64(
        (0..crate::selection::CALIBRATION_LEN)
            .map(|_| {
                x *= 1.0 + ((rnd() % 2001) as f64 - 1000.0) * 1e-6;
                x
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use proptest::prelude::*;

    fn measured(n: usize) -> Vec<f64> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                10.0 + (x % 1_000_000) as f64 / 100_003.0
            })
            .collect()
    }

    fn specials() -> Vec<f64> {
        vec![
            -0.0,
            0.0,
            f64::NAN,
            f64::from_bits(0x7ff8_0000_0000_0001),
            f64::from_bits(0xfff0_0000_0000_0001),
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::from_bits(1),
            f64::MIN_POSITIVE / 3.0,
            f64::MAX,
            f64::MIN,
            0.1 + 0.2,
        ]
    }

    #[test]
    fn measurements_take_fewer_bits_than_plain() -> Result<()> {
        let v = measured(10_000);
        let bytes = round_trip_bits("alprd", &Values::F64(v.clone()))?;
        // Values in [10, 20): one exponent, 52 random mantissa bits and a left part of none
        // (bit-packed in whole 1024-value vectors).
        assert!(bytes.len() < 10_240 * 53 / 8, "{} bytes", bytes.len());
        let r = choose_right(&v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), 64);
        assert!((48..64).contains(&r), "R = {r}");
        Ok(())
    }

    #[test]
    fn every_split_and_special_round_trips() -> Result<()> {
        let mut v = measured(3000);
        v.splice(1000..1000, specials());
        for r in 48..64 {
            round_trip_bits(&format!("alprd({r})"), &Values::F64(v.clone()))?;
            round_trip_bits(
                &format!("alprd({r}, left: plain, right: for | bitpack)"),
                &Values::F64(v.clone()),
            )?;
        }
        let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
        for r in 16..32 {
            round_trip_bits(&format!("alprd({r})"), &Values::F32(f.clone()))?;
        }
        for n in [0, 1, 2, 1023, 1024, 1025] {
            round_trip_bits("alprd", &Values::F64(measured(n)))?;
            round_trip_bits("alprd", &Values::F32(vec![-0.0; n]))?;
        }
        Ok(())
    }

    #[test]
    fn widened_floats_do_not_store_their_zero_bits() -> Result<()> {
        // float32 measurements widened to doubles: the 29 low mantissa bits are zero.
        let v: Vec<f64> = measured(10_000)
            .iter()
            .map(|&x| f64::from(x as f32))
            .collect();
        let bits: Vec<u64> = v.iter().map(|x| x.to_bits()).collect();
        let r = choose_right(&bits, 64);
        assert_eq!(shared_zeros(&bits, r), 29.min(r - 1));
        let node = crate::encode(&"alprd".parse()?, &Values::F64(v.clone()))?;
        assert_eq!(node.meta, vec![r as u8, 29]);
        let bytes = round_trip_bits("alprd", &Values::F64(v.clone()))?;
        // At most 24 significant right bits a value (and a few bits of left codes).
        assert!(bytes.len() < 10_240 * 27 / 8, "{} bytes", bytes.len());
        // Every split, with and without zero bits to drop, specials mixed in.
        let mut w = v;
        w.splice(500..500, [0.0, -0.0, 1.0, 0.5, f64::INFINITY]);
        for r in 48..64 {
            round_trip_bits(&format!("alprd({r})"), &Values::F64(w.clone()))?;
        }
        let f: Vec<f32> = (0..3000).map(|i| (i % 97) as f32 * 0.25).collect();
        for r in 16..32 {
            round_trip_bits(&format!("alprd({r})"), &Values::F32(f.clone()))?;
        }
        Ok(())
    }

    #[test]
    fn a_damaged_shift_is_an_error() -> Result<()> {
        let v: Vec<f64> = measured(100).iter().map(|&x| f64::from(x as f32)).collect();
        let good = crate::encode(&"alprd(52)".parse()?, &Values::F64(v))?;
        for shift in [0u8, 52, 200] {
            let mut node = good.clone();
            node.meta[1] = shift;
            assert!(
                crate::decode_bytes(&node.to_bytes()?).is_err(),
                "shift {shift}"
            );
        }
        let mut node = good;
        node.meta.push(0);
        assert!(crate::decode_bytes(&node.to_bytes()?).is_err());
        Ok(())
    }

    #[test]
    fn refuses_splits_out_of_range() -> Result<()> {
        let v = Values::F64(measured(10));
        for r in [0, 47, 64, 100] {
            assert!(crate::encode(&format!("alprd({r})").parse()?, &v).is_err());
        }
        let f = Values::F32(vec![1.0; 10]);
        assert!(crate::encode(&"alprd(15)".parse()?, &f).is_err());
        let i = Values::Int(IntVec::I64(vec![1; 10]));
        assert!(crate::encode(&"alprd".parse()?, &i).is_err());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn any_bits_round_trip(
            bits in proptest::collection::vec(any::<u64>(), 0..3000),
            r in 48u32..64,
        ) {
            let fail = |e: Error| TestCaseError::fail(e.to_string());
            let v: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b)).collect();
            round_trip_bits(&format!("alprd({r})"), &Values::F64(v)).map_err(fail)?;
            let f: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b as u32)).collect();
            round_trip_bits("alprd", &Values::F32(f)).map_err(fail)?;
        }
    }
}
