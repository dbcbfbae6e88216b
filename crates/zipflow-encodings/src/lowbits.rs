//! Low bits: each integer cut at bit `S` into its high bits and its low `S` bits, two child
//! streams with plans of their own, for streams whose low bits are mostly alike.
//!
//! The numbers it is for have a few significant bits followed by zeros, except now and then:
//! a sum of a few float32 values carried in a double has about 30 significant mantissa bits
//! and 20-odd zero bits below them, save a rounding carry that leaves `...0001` or
//! `...1111` in a fifth of the values. Shifting by the zero bits every value shares (what
//! `alprd` does) finds nothing there, and a patch of the exceptions costs a position and a
//! full value each. Cut at `S`, the high stream packs at its own width and the low stream,
//! a handful of distinct values most of them 0, takes a dictionary of a few bits a value
//! (`lowbits(high: bitpack, low: dict(codes: bitpack, values: plain))`).
//!
//! `S` is the plan's parameter (`lowbits(20)`), or chosen on a sample of 1,024 values to
//! minimise the high width plus the code bits of the low values' dictionary, over the cuts
//! at which at least half of the values have only zeros below (see [`best_shift`]). A stream
//! without such a cut (no `S` of 2 or more) is refused, so the search passes it by cheaply.
//!
//! Decoding is one pass, `high << S | low`: fully parallel, on the GPU too.
//!
//! Node: meta = `[S: u8]` (`S` below the type's width); child 0 (`high`) = the values' bits
//! shifted down by `S`; child 1 (`low`) = their low `S` bits; both the unsigned type of the
//! node's width, the node's length. A decoder keeps only the low `S` bits of a `low` value.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, bitpack, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, Values, match_ints};

/// `lowbits` / `lowbits(S)`.
pub struct LowBits;

/// On-disk id of [`LowBits`].
pub const ID: u16 = DESCRIPTOR.id;

/// Values the automatic choice of `S` looks at.
pub const SAMPLE_LEN: usize = 1024;

/// Distinct low values the automatic choice counts up to: past this many, a dictionary's
/// codes cost more than the cut saves.
const MAX_DISTINCT: usize = 256;

/// Header (16 B), two child-table entries and the one-byte meta, padded.
const NODE_OVERHEAD: usize = 32;

/// The cut the automatic choice makes for `values`, or `None` where no cut of 2 bits or more
/// leaves at least half of the values with only zeros below it. Among the cuts up to a few
/// bits past that median, the one with the fewest bits for `n` values: the high bits'
/// width plus the code width of the low values' dictionary, plus the dictionary's entries.
pub fn best_shift<T: Int>(values: &[T]) -> Option<u32> {
    let step = (values.len() / SAMPLE_LEN).max(1);
    let sample: Vec<u64> = values
        .iter()
        .step_by(step)
        .take(SAMPLE_LEN)
        .map(|v| v.to_u64())
        .collect();
    let n = sample.len();
    if n == 0 {
        return None;
    }
    // Trailing zeros: a zero value has every bit below any cut zero.
    let mut at_least = vec![0usize; T::BITS as usize + 1];
    for &v in &sample {
        at_least[v.trailing_zeros().min(T::BITS) as usize] += 1;
    }
    for z in (0..T::BITS as usize).rev() {
        at_least[z] += at_least[z + 1];
    }
    let median = (1..T::BITS)
        .rev()
        .find(|&s| 2 * at_least[s as usize] >= n)?;
    if median < 2 {
        return None;
    }
    let or = sample.iter().fold(0u64, |a, &v| a | v);
    let mut best: Option<(u64, u32)> = None;
    let mut lows = Vec::with_capacity(n);
    for s in 2..=(median + 4).min(T::BITS - 1) {
        let mask = (1u64 << s) - 1;
        lows.clear();
        lows.extend(sample.iter().map(|&v| v & mask));
        lows.sort_unstable();
        lows.dedup();
        if lows.len() > MAX_DISTINCT {
            break;
        }
        let code_bits = u64::from(usize::BITS - (lows.len() - 1).leading_zeros());
        let high_bits = u64::from(64 - (or >> s).leading_zeros());
        let cost = n as u64 * (high_bits + code_bits) + lows.len() as u64 * u64::from(s);
        if best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, s));
        }
    }
    best.map(|(_, s)| s)
}

/// The high and low streams of `values` cut at `s` (below `T::BITS`).
fn cut<T: Int>(values: &[T], s: u32) -> (Vec<T::U>, Vec<T::U>) {
    let mask = (1u64 << s) - 1;
    let high = values
        .iter()
        .map(|v| T::U::from_u64_wrapping(v.to_u64() >> s))
        .collect();
    let low = values
        .iter()
        .map(|v| T::U::from_u64_wrapping(v.to_u64() & mask))
        .collect();
    (high, low)
}

/// `high << s | low`, keeping only the low `s` bits of `low`, into `out`.
pub fn join<T: Int>(high: &[T::U], low: &[T::U], s: u32, out: &mut Vec<T>) {
    let mask = (1u64 << s) - 1;
    out.clear();
    out.extend(
        high.iter()
            .zip(low)
            .map(|(h, l)| T::from_u64_wrapping((h.to_u64() << s) | (l.to_u64() & mask))),
    );
}

/// The cut `plan` states, or the automatic one for `v`.
fn shift_of<T: Int>(plan: &Plan, v: &[T]) -> Result<u32> {
    match plan.params.as_slice() {
        [] => best_shift(v).ok_or_else(|| {
            Error::plan(
                plan,
                "lowbits finds no cut below which most values are zero",
            )
        }),
        [s] if (1..i64::from(T::BITS)).contains(s) => Ok(*s as u32),
        [s] => Err(Error::plan(
            plan,
            format!("lowbits cut {s} is not in 1..{} for these values", T::BITS),
        )),
        _ => Err(Error::plan(plan, "lowbits takes one parameter, the cut")),
    }
}

/// The cut and the two child streams of `input`.
fn shell(plan: &Plan, input: &Values) -> Result<(u32, Values, Values)> {
    let Values::Int(v) = input else {
        return Err(Error::plan(plan, "lowbits needs integers"));
    };
    match_ints!(v, T, x => {
        let s = shift_of(plan, x)?;
        let (high, low) = cut(x, s);
        Ok((
            s,
            Values::Int(<<T as Int>::U as IntVecOf>::wrap(high)),
            Values::Int(<<T as Int>::U as IntVecOf>::wrap(low)),
        ))
    })
}

/// A `lowbits` node, parsed and checked once.
#[derive(Debug, Clone, Copy)]
pub struct View<'n, 'a> {
    /// The cut: bits in the low stream, `1..` the type's width.
    pub shift: u32,
    /// The high bits: the node's unsigned type and length.
    pub high: &'n NodeView<'a>,
    /// The low bits: the node's unsigned type and length.
    pub low: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape, cut and children.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        node.expect_shape("lowbits", 0, 2)?;
        let mut meta = node.meta_reader();
        let shift = u32::from(meta.u8("lowbits cut")?);
        meta.finish("lowbits")?;
        let bits = (node.ptype.byte_width() * 8) as u32;
        if !node.ptype.is_int() || shift == 0 || shift >= bits {
            return Err(Error::corrupt(format!(
                "lowbits node cutting {} values at bit {shift}",
                node.ptype
            )));
        }
        let u = bitpack::unsigned_of(node.ptype);
        expect_child(node, 0, "lowbits high", u, Some(node.len))?;
        expect_child(node, 1, "lowbits low", u, Some(node.len))?;
        Ok(View {
            shift,
            high: &node.children[0],
            low: &node.children[1],
        })
    }
}

impl Encoding for LowBits {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_cut(),
            plan: "lowbits(20, high: plain, low: plain)",
            minus: &[(crate::selection::RAW, 2.0)],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let (s, high, low) = shell(plan, input)?;
        let mut node = EncodedNode::new(ID, input.ptype(), input.len())?;
        node.meta = vec![s as u8];
        node.children.push(encode_child(plan, self, "high", &high)?);
        node.children.push(encode_child(plan, self, "low", &low)?);
        Ok(node)
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        Some(crate::memo::split("lowbits", plan, input, || {
            let (_, high, low) = shell(plan, input)?;
            Ok(Split {
                own: NODE_OVERHEAD,
                children: vec![high, low],
            })
        }))
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let view = View::parse(node)?;
        let high = scratch.decode(view.high)?;
        let low = scratch.decode(view.low)?;
        let result = match (&high, &low, out) {
            (Values::Int(h), Values::Int(l), Values::Int(o)) => match_ints!(o, T, o => {
                match (
                    <<T as Int>::U as IntVecOf>::slice(h),
                    <<T as Int>::U as IntVecOf>::slice(l),
                ) {
                    (Some(h), Some(l)) => {
                        join(h, l, view.shift, o);
                        Ok(())
                    }
                    _ => Err(Error::corrupt("lowbits children have the wrong type")),
                }
            }),
            _ => Err(Error::corrupt(
                "lowbits children or output are not integers",
            )),
        };
        scratch.give(high);
        scratch.give(low);
        result
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        View::parse(node)
            .map(|v| vec![i64::from(v.shift)])
            .unwrap_or_default()
    }

    fn child_shape(&self, _slot: &str, shape: crate::Shape) -> crate::Shape {
        shape.numbers()
    }
}

/// What `lowbits` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 23,
    name: "lowbits",
    slots: &[
        Slot {
            name: "high",
            default: "bitpack",
        },
        Slot {
            name: "low",
            default: "dict",
        },
    ],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::FullyParallel),
    search: crate::Search::numeric(crate::Role::Inner {
        side_streams: false,
    }),
};

/// 33 significant bits over 20 low bits that are mostly zero, now and then 1 or all ones.
fn calibration_cut() -> Values {
    let mut rnd = crate::selection::xorshift(0x9b05_688c_2b3e_6c1f);
    let v: Vec<u64> = (0..crate::selection::CALIBRATION_LEN)
        .map(|_| {
            let high = rnd() >> 31;
            let low = match rnd() % 5 {
                0 => 1,
                1 => (1 << 20) - 1,
                _ => 0,
            };
            (high << 20) | low
        })
        .collect();
    Values::Int(IntVec::U64(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{decode_bytes, encode};
    use proptest::prelude::*;

    /// Values with `zeros` low bits zero in most, a rounding carry in some.
    fn carried<T: Int>(r: &mut impl FnMut() -> u64, n: usize, zeros: u32) -> Vec<T> {
        (0..n)
            .map(|_| {
                let high = r() >> (64 - (T::BITS - zeros).min(40));
                let low = match r() % 5 {
                    0 => 1,
                    1 => (1u64 << zeros) - 1,
                    _ => 0,
                };
                T::from_u64_wrapping((high << zeros) | low)
            })
            .collect()
    }

    struct EdgeCases;

    impl IntCases for EdgeCases {
        fn cases<T: Int>() -> Vec<Vec<T>> {
            let mut r = random(23);
            let mut cases = edge_lengths(&mut r, T::MAX);
            cases.extend([
                random_ints(&mut r, 3000),
                vec![T::MAX; 2000],
                [T::MIN, T::MAX, T::ZERO, T::MAX, T::MIN].repeat(300),
                carried::<T>(&mut r, 5000, T::BITS / 2),
            ]);
            cases
        }
    }

    #[test]
    fn round_trips_edge_cases() -> Result<()> {
        round_trip_every_int_type::<EdgeCases>(&[
            "lowbits(1)",
            "lowbits(3, high: for | bitpack, low: bitpack)",
            "lowbits(7, high: plain, low: dict(codes: bitpack, values: plain))",
            "lowbits(4, high: delta | zigzag | bitpack, low: rle)",
        ])
    }

    #[test]
    fn finds_the_cut_of_a_rounding_carry() -> Result<()> {
        let mut r = random(7);
        let v = carried::<u64>(&mut r, 20_000, 20);
        assert_eq!(best_shift(&v), Some(20));
        let values = Values::Int(IntVec::U64(v));
        let cut = encode(&plan("lowbits"), &values)?.to_bytes()?;
        let packed = encode(&plan("bitpack"), &values)?.to_bytes()?;
        assert_eq!(decode_bytes(&cut)?, values);
        // 40 + 2 bits a value against 60.
        assert!(
            cut.len() * 10 < packed.len() * 8,
            "{} vs {}",
            cut.len(),
            packed.len()
        );
        let d = described(&cut)?;
        assert!(
            d.starts_with("lowbits(20, high: bitpack(40), low: dict("),
            "{d}"
        );
        Ok(())
    }

    #[test]
    fn refuses_a_stream_without_a_cut() {
        let mut r = random(3);
        let v = Values::Int(IntVec::U32(random_ints(&mut r, 4000)));
        assert!(matches!(
            encode(&plan("lowbits"), &v),
            Err(Error::Plan { .. })
        ));
        for p in ["lowbits(0)", "lowbits(32)", "lowbits(1, 2)"] {
            assert!(
                matches!(encode(&plan(p), &v), Err(Error::Plan { .. })),
                "{p}"
            );
        }
        assert!(matches!(
            encode(&plan("lowbits(3)"), &Values::F64(vec![1.0])),
            Err(Error::Plan { .. })
        ));
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() -> Result<()> {
        let mut r = random(5);
        let v = Values::Int(IntVec::I64(carried::<i64>(&mut r, 3000, 12)));
        for p in [
            "lowbits",
            "lowbits(12, high: for | bitpack, low: dict(codes: ans, values: plain))",
        ] {
            check_corruption(p, &encode(&plan(p), &v)?, 9)?;
        }
        for s in [0u8, 64, 200] {
            let mut node = encode(&plan("lowbits(12)"), &v)?;
            node.meta = vec![s];
            assert!(decode_bytes(&node.to_bytes()?).is_err(), "cut {s}");
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip_u64(v in prop::collection::vec(any::<u64>(), 0..3000), s in 1i64..64) {
            round_trip(&plan(&format!("lowbits({s})")), &Values::Int(IntVec::U64(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn round_trip_i16(v in prop::collection::vec(any::<i16>(), 0..3000), s in 1i64..16) {
            let p = format!("lowbits({s}, high: for | bitpack, low: dict(codes: bitpack, values: plain))");
            round_trip(&plan(&p), &Values::Int(IntVec::I16(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn automatic_cut_round_trips(seed in any::<u64>(), zeros in 2u32..30, n in 1usize..5000) {
            let mut r = random(seed);
            let v = Values::Int(IntVec::U64(carried::<u64>(&mut r, n, zeros)));
            match encode(&plan("lowbits"), &v) {
                Ok(node) => prop_assert_eq!(decode_bytes(&node.to_bytes()
                    .map_err(|e| TestCaseError::fail(e.to_string()))?)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?, v),
                Err(Error::Plan { .. }) => {}
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            }
        }
    }
}
