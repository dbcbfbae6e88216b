//! Decimal scaling with patched exceptions (ALP-like): floats that came from decimal text become
//! small integers.
//!
//! A value `v` is stored as the integer `i = round(v * 10^E)` whenever `(i as f64) / 10^E`
//! gives back `v` bit for bit; for f32 the integer is an i32 and the value is
//! `((i as f64) / 10^E) as f32`. Division by an exact power of ten is correctly rounded, so a
//! value parsed from text with at most `E` decimals (a price such as `21168.23` at `E = 2`)
//! always round-trips. Everything else is an exception, kept as raw bits: -0.0, NaN (any
//! payload), ±inf, values beyond the integer type's range, values needing more decimals.
//!
//! The encoder checks each value with the decoder's own formula, so what it accepts decodes bit
//! for bit by construction. `E` is the plan's parameter (`float2int(2)`), or chosen on an evenly
//! spaced sample of at most 1024 values: the `E` (smallest on ties) minimising
//! `bits(max - min) * n + exceptions * 96`, the size the default child `for | bitpack` and the
//! exception lists would take.
//!
//! Output `i` depends only on integer `i`, but the exceptions are applied after, and where a
//! vector's exceptions start in their list depends on how many came before, as for `patch`:
//! a variable-size group per vector, hence [`Pattern::GroupParallel`].
//!
//! Node: meta = `[E: u8, exception_count: u32]`; buffer 0 = exception positions (u32, strictly
//! increasing); buffer 1 = exception bits (u64 for f64, u32 for f32); child 0 = the integers,
//! i64 for f64 and i32 for f32, where an exception's slot repeats the previous integer (or the
//! first one that is not an exception, or 0) so that it does not widen the child's range.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::patch::Exceptions;
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, PType, Plan, Result, Values};

/// `float2int` / `float2int(E)`.
pub struct FloatToInt;

/// On-disk id of [`FloatToInt`].
pub const ID: u16 = DESCRIPTOR.id;

/// `10^E` for `E` in `0..=18`. Every power of ten up to `10^22` is exact in an f64, so dividing
/// by one is a single correctly rounded operation, on the CPU and on the GPU alike.
pub const POW10: [f64; 19] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18,
];

/// Values the automatic choice of `E` looks at.
pub const SAMPLE_LEN: usize = 1024;

/// The automatic choice counts on a dictionary only where a sample of `n` values has at most
/// `n / DICT_SHARE` distinct integers.
const DICT_SHARE: u64 = 8;

/// Bits the automatic choice charges per exception: a u32 position and a u64 value.
const EXCEPTION_BITS: u64 = 96;

/// A float type `float2int` encodes, with the integer type its scaled values are stored as.
pub trait Decimal: Copy + Default + bytemuck::Pod + 'static {
    /// The scaled integers' type (i64 for f64, i32 for f32).
    type I: Int + IntVecOf;
    /// The raw bits' type, in which exceptions are stored.
    type Bits: Int;
    /// This type's [`PType`].
    const PTYPE: PType;
    /// The largest `E` allowed: beyond it no value with a fractional part fits the integer type.
    const MAX_EXPONENT: u8;
    /// The value encoded with `scale = 10^E`, if [`Decimal::decode`] gives it back bit for bit.
    fn encode(self, scale: f64) -> Option<Self::I>;
    /// The value that integer `i` stands for at `scale = 10^E`.
    fn decode(i: Self::I, scale: f64) -> Self;
    /// The raw bits.
    fn to_raw(self) -> Self::Bits;
    /// The value with raw bits `bits`.
    fn from_raw(bits: Self::Bits) -> Self;
}

impl Decimal for f64 {
    type I = i64;
    type Bits = u64;
    const PTYPE: PType = PType::F64;
    const MAX_EXPONENT: u8 = 18;
    #[inline(always)]
    fn encode(self, scale: f64) -> Option<i64> {
        // `as` saturates (NaN gives 0); the bit comparison below rejects whatever did not fit.
        let i = (self * scale).round() as i64;
        (Self::decode(i, scale).to_bits() == self.to_bits()).then_some(i)
    }
    #[inline(always)]
    fn decode(i: i64, scale: f64) -> f64 {
        i as f64 / scale
    }
    fn to_raw(self) -> u64 {
        self.to_bits()
    }
    fn from_raw(bits: u64) -> f64 {
        f64::from_bits(bits)
    }
}

impl Decimal for f32 {
    type I = i32;
    type Bits = u32;
    const PTYPE: PType = PType::F32;
    const MAX_EXPONENT: u8 = 9;
    #[inline(always)]
    fn encode(self, scale: f64) -> Option<i32> {
        let i = (f64::from(self) * scale).round() as i32;
        (Self::decode(i, scale).to_bits() == self.to_bits()).then_some(i)
    }
    #[inline(always)]
    fn decode(i: i32, scale: f64) -> f32 {
        (f64::from(i) / scale) as f32
    }
    fn to_raw(self) -> u32 {
        self.to_bits()
    }
    fn from_raw(bits: u32) -> f32 {
        f32::from_bits(bits)
    }
}

/// `values` encoded at exponent `e` (at most `F::MAX_EXPONENT`): exception positions, exception
/// bits, and the integers with exception slots filled so they do not widen the range.
/// `values.len()` must fit in a u32 (callers build the node first, which checks it).
pub fn split<F: Decimal>(values: &[F], e: u8) -> (Vec<u32>, Vec<F::Bits>, Vec<F::I>) {
    let scale = POW10[usize::from(e)];
    let mut positions = Vec::new();
    let mut exceptions = Vec::new();
    let mut ints = Vec::with_capacity(values.len());
    let mut previous: Option<F::I> = None;
    for (&v, k) in values.iter().zip(0u32..) {
        match v.encode(scale) {
            Some(i) => {
                if previous.is_none() {
                    // Everything before the first encodable value is an exception; give those
                    // slots this value rather than 0.
                    ints.fill(i);
                }
                previous = Some(i);
                ints.push(i);
            }
            None => {
                positions.push(k);
                exceptions.push(v.to_raw());
                ints.push(previous.unwrap_or(F::I::ZERO));
            }
        }
    }
    (positions, exceptions, ints)
}

/// The exponent the automatic choice picks for `values`: on an evenly spaced sample of at most
/// [`SAMPLE_LEN`] values, the smallest `E` minimising `bits * n + exceptions * 96`, where
/// `bits` is the cheaper of `bits(max - min)` (`for | bitpack`) and, when the sample has few
/// distinct integers, a dictionary's code width plus its values' share (a handful of values
/// with many decimals, such as shares `0.0221239`, would otherwise stay exceptions at a small
/// `E`).
pub fn choose_exponent<F: Decimal>(values: &[F]) -> u8 {
    let n = values.len().min(SAMPLE_LEN);
    let sample: Vec<F> = (0..n)
        .map(|k| values[(k as u64 * values.len() as u64 / n as u64) as usize])
        .collect();
    let mut best = (u64::MAX, 0u8);
    for e in 0..=F::MAX_EXPONENT {
        let scale = POW10[usize::from(e)];
        let (mut min, mut max, mut exceptions) = (i128::MAX, i128::MIN, 0u64);
        let mut ints: Vec<i128> = Vec::with_capacity(n);
        for v in &sample {
            match v.encode(scale) {
                Some(i) => {
                    min = min.min(i.to_i128());
                    max = max.max(i.to_i128());
                    ints.push(i.to_i128());
                }
                None => exceptions += 1,
            }
        }
        let range_bits = if min <= max {
            u64::from(128 - (max - min).leading_zeros())
        } else {
            0
        };
        ints.sort_unstable();
        ints.dedup();
        let distinct = ints.len() as u64;
        // A sample's distinct count says little of the stream's unless it is small.
        let bits = if distinct > 0 && distinct * DICT_SHARE <= n as u64 {
            let code = u64::from(64 - (distinct - 1).leading_zeros());
            range_bits.min(code + (distinct * 64).div_ceil(n as u64))
        } else {
            range_bits
        };
        let cost = bits * n as u64 + exceptions * EXCEPTION_BITS;
        if cost < best.0 {
            best = (cost, e);
        }
    }
    best.1
}

/// Converts `ints` at `scale` into `out` (same length). Branch-free over slices, so the
/// compiler can vectorise it.
pub fn decode_into<F: Decimal>(ints: &[F::I], scale: f64, out: &mut [F]) {
    for (o, &i) in out.iter_mut().zip(ints) {
        *o = F::decode(i, scale);
    }
}

fn resolve_exponent<F: Decimal>(plan: &Plan, values: &[F]) -> Result<u8> {
    match plan.params.first() {
        None => Ok(choose_exponent(values)),
        Some(&e) if (0..=i64::from(F::MAX_EXPONENT)).contains(&e) => Ok(e as u8),
        Some(&e) => Err(Error::plan(
            plan,
            format!(
                "exponent {e} is outside 0..={} for {} values",
                F::MAX_EXPONENT,
                F::PTYPE
            ),
        )),
    }
}

fn encode_typed<F: Decimal>(enc: &FloatToInt, plan: &Plan, values: &[F]) -> Result<EncodedNode> {
    let (mut node, child) = shell(plan, values)?;
    node.children.push(encode_child(plan, enc, "", &child)?);
    Ok(node)
}

/// The node without its child, and the integers its child encodes.
fn shell<F: Decimal>(plan: &Plan, values: &[F]) -> Result<(EncodedNode, Values)> {
    // Built first: it rejects streams whose positions would not fit in a u32.
    let mut node = EncodedNode::new(ID, F::PTYPE, values.len())?;
    let e = resolve_exponent(plan, values)?;
    let (positions, exceptions, ints) = split(values, e);
    let count = u32::try_from(positions.len())
        .map_err(|_| Error::unsupported("more than 2^32 - 1 exceptions"))?;
    node.meta = vec![e];
    node.meta.extend_from_slice(&count.to_le_bytes());
    node.buffers.push(bytemuck::cast_slice(&positions).to_vec());
    node.buffers
        .push(bytemuck::cast_slice(&exceptions).to_vec());
    Ok((node, Values::Int(F::I::wrap(ints))))
}

/// A `float2int` node, parsed and checked once.
#[derive(Debug, Clone)]
pub struct View<'n, 'a> {
    /// The exponent `E`: values are the integers divided by `10^E`.
    pub exponent: u8,
    /// The exceptions, kept as raw bits (u64 for f64, u32 for f32).
    pub exceptions: Exceptions<'a>,
    /// The scaled integers: i64 for f64, i32 for f32, the node's length.
    pub integers: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape, metadata, buffers and child.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        let (exponent, exceptions) = Exceptions::parse(node, "float2int", "exponent")?;
        let (max, ints) = match node.ptype {
            PType::F64 => (<f64 as Decimal>::MAX_EXPONENT, PType::I64),
            PType::F32 => (<f32 as Decimal>::MAX_EXPONENT, PType::I32),
            p => return Err(Error::corrupt(format!("float2int node claims {p} values"))),
        };
        if exponent > max {
            return Err(Error::corrupt(format!(
                "float2int exponent {exponent} exceeds {max} for {} values",
                node.ptype
            )));
        }
        expect_child(node, 0, "scaled integers", ints, Some(node.len))?;
        Ok(View {
            exponent,
            exceptions,
            integers: &node.children[0],
        })
    }
}

fn decode_typed<F: Decimal>(
    node: &NodeView<'_>,
    out: &mut Vec<F>,
    scratch: &mut Scratch,
) -> Result<()> {
    let view = View::parse(node)?;
    if node.ptype != F::PTYPE {
        return Err(Error::corrupt("float2int node read as another float type"));
    }
    let mut exception_copy = Vec::new();
    let exceptions = view.exceptions.values_as::<F::Bits>(&mut exception_copy)?;
    let decoded = scratch.decode(view.integers)?;
    let scale = POW10[usize::from(view.exponent)];
    let result = match &decoded {
        Values::Int(iv) => match F::I::slice(iv) {
            Some(ints) => {
                crate::resize_for_overwrite(out, ints.len(), F::default());
                decode_into(ints, scale, out);
                Ok(())
            }
            None => Err(Error::corrupt("float2int integers have the wrong type")),
        },
        _ => Err(Error::corrupt("float2int integers are not integers")),
    };
    scratch.give(decoded);
    result?;
    for (&p, &bits) in view.exceptions.positions.iter().zip(exceptions) {
        // `View::parse` checked every position against `node.len`, the child's length,
        // which `out` now holds.
        out[p as usize] = F::from_raw(bits);
    }
    Ok(())
}

impl Encoding for FloatToInt {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_cents(),
            plan: "float2int | plain",
            minus: &[(crate::selection::RAW, 1.0)],
        }]
    }
    fn max_params(&self) -> usize {
        1
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_float()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        match input {
            Values::F64(v) => encode_typed(self, plan, v),
            Values::F32(v) => encode_typed(self, plan, v),
            _ => Err(Error::plan(plan, "float2int needs f32 or f64 values")),
        }
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        Some(crate::memo::split("float2int", plan, input, || {
            let (node, child) = match input {
                Values::F64(v) => shell(plan, v)?,
                Values::F32(v) => shell(plan, v)?,
                _ => return Err(Error::plan(plan, "float2int needs f32 or f64 values")),
            };
            Ok(Split {
                own: node.size_with_children(1),
                children: vec![child],
            })
        }))
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        match out {
            Values::F64(o) => decode_typed(node, o, scratch),
            Values::F32(o) => decode_typed(node, o, scratch),
            _ => Err(Error::corrupt("float2int node for non-float values")),
        }
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        node.meta
            .first()
            .map(|&e| vec![i64::from(e)])
            .unwrap_or_default()
    }
}

/// What `float2int` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 10,
    name: "float2int",
    slots: &[Slot {
        name: "",
        default: "for | bitpack",
    }],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::GroupParallel),
    search: crate::Search::numeric(crate::Role::TypeChange),
};

/// Prices in cents, as decimals with two digits.
fn calibration_cents() -> zipflow_core::Values {
    let mut rnd = crate::selection::xorshift(0xbb67_ae85_84ca_a73b);
    zipflow_core::Values::F64(
        (0..crate::selection::CALIBRATION_LEN)
            .map(|_| (rnd() % 10_000_000) as f64 / 100.0)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode;
    use crate::testing::*;
    use proptest::prelude::*;
    use zipflow_core::IntVec;

    /// `(E, exception count)` of the root node.
    fn header(bytes: &[u8]) -> Result<(u8, u32)> {
        let node = NodeView::parse(bytes)?;
        let b = node
            .meta
            .get(..5)
            .ok_or_else(|| Error::invalid("short meta"))?;
        Ok((b[0], u32::from_le_bytes([b[1], b[2], b[3], b[4]])))
    }

    fn parse<F: std::str::FromStr>(s: &str) -> Result<F> {
        s.parse()
            .map_err(|_| Error::invalid(format!("`{s}` is not a number")))
    }

    /// Prices with two decimals, as parsed from text, starting with 21168.23 and 0.07.
    fn prices<F: std::str::FromStr>(n: usize) -> Result<Vec<F>> {
        let mut v = Vec::with_capacity(n);
        for k in 0..n {
            let text = match k {
                0 => "21168.23".to_string(),
                1 => "0.07".to_string(),
                _ => format!("{}.{:02}", (k * 7919) % 100_000, (k * 31) % 100),
            };
            v.push(parse(&text)?);
        }
        Ok(v)
    }

    fn specials_f64() -> Vec<f64> {
        vec![
            -0.0,
            f64::NAN,
            f64::from_bits(0x7ff8_0000_0000_0001),
            f64::from_bits(0xfff0_0000_0000_0001),
            f64::from_bits(0x7ff0_dead_beef_0000),
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::from_bits(1),
            f64::MIN_POSITIVE / 3.0,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::MIN,
            1e300,
            -1e300,
            0.1 + 0.2,
            std::f64::consts::PI,
        ]
    }

    fn specials_f32() -> Vec<f32> {
        vec![
            -0.0,
            f32::NAN,
            f32::from_bits(0x7fc0_0001),
            f32::from_bits(0xff80_0001),
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::from_bits(1),
            f32::MIN_POSITIVE,
            f32::MAX,
            f32::MIN,
            1e30,
            std::f32::consts::PI,
        ]
    }

    #[test]
    fn prices_have_no_exceptions_at_two_decimals() -> Result<()> {
        let v = prices::<f64>(5000)?;
        let ints: Vec<i64> = v.iter().map(|&x| (x * 100.0).round() as i64).collect();
        let range =
            ints.iter().max().copied().unwrap_or(0) - ints.iter().min().copied().unwrap_or(0);
        let width = 64 - range.leading_zeros();
        let bytes = round_trip_bits("float2int | for | bitpack", &Values::F64(v))?;
        assert_eq!(header(&bytes)?, (2, 0));
        assert_eq!(
            described(&bytes)?,
            format!("float2int(2) | for | bitpack({width})")
        );
        assert!(bytes.len() < 5000 * 4, "{} bytes", bytes.len());
        Ok(())
    }

    #[test]
    fn automatic_exponent() -> Result<()> {
        assert_eq!(choose_exponent::<f64>(&[]), 0);
        assert_eq!(choose_exponent(&[1.0f64, 2.0, 3.0, 4.0]), 0);
        assert_eq!(choose_exponent(&[1.5f64, 2.25, 3.0, -4.75]), 2);
        assert_eq!(choose_exponent(&prices::<f64>(10_000)?), 2);
        assert_eq!(choose_exponent(&prices::<f32>(3000)?), 2);
        let tenths: Vec<f64> = (0..3000).map(|k| k as f64 / 10.0).collect();
        assert_eq!(choose_exponent(&tenths), 1);
        // A few shares with seven decimals among many zeros and ones: a dictionary of the
        // scaled shares beats keeping them as exceptions at E = 0.
        let shares = [0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0221239, 0.1442925, 0.0, 0.0];
        let shares: Vec<f64> = (0..3000).map(|k| shares[k % shares.len()]).collect();
        assert_eq!(choose_exponent(&shares), 7);
        // Nothing encodes: every E costs the same, the smallest wins.
        assert_eq!(choose_exponent(&[f64::NAN; 100]), 0);
        Ok(())
    }

    #[test]
    fn specials_are_exceptions() -> Result<()> {
        let specials = specials_f64();
        let mut v = prices::<f64>(3000)?;
        v.splice(1000..1000, specials.iter().copied());
        // Every special is an exception at E = 2; 0.1 + 0.2 and pi because they need more
        // decimals.
        let bytes = round_trip_bits("float2int(2) | for | bitpack", &Values::F64(v.clone()))?;
        assert_eq!(header(&bytes)?, (2, specials.len() as u32));
        for e in 0..=18 {
            round_trip_bits(
                &format!("float2int({e}) | for | bitpack"),
                &Values::F64(v.clone()),
            )?;
        }
        round_trip_bits("float2int", &Values::F64(v))?;
        Ok(())
    }

    #[test]
    fn edge_lengths_and_outliers_at_the_ends() -> Result<()> {
        for n in [0, 1, 2, 1023, 1024, 1025, 3000] {
            let mut v = prices::<f64>(n)?;
            if let Some(x) = v.first_mut() {
                *x = f64::from_bits(0x7ff8_0000_0000_0001);
            }
            if let Some(x) = v.last_mut() {
                *x = -0.0;
            }
            let bytes = round_trip_bits("float2int(2) | for | bitpack", &Values::F64(v.clone()))?;
            assert_eq!(header(&bytes)?.1, n.min(2) as u32, "n={n}");
            round_trip_bits("float2int | for | bitpack", &Values::F64(v))?;
            // No exceptions.
            let bytes = round_trip_bits("float2int | for | bitpack", &Values::F64(prices(n)?))?;
            assert_eq!(header(&bytes)?.1, 0, "n={n}");
            // All exceptions.
            let nans = Values::F64(vec![f64::from_bits(0xfff0_0000_0000_0001); n]);
            let bytes = round_trip_bits("float2int | for | bitpack", &nans)?;
            assert_eq!(header(&bytes)?.1, n as u32);
            let bytes = round_trip_bits("float2int", &Values::F32(vec![-0.0; n]))?;
            assert_eq!(header(&bytes)?.1, n as u32);
            let mut v = prices::<f32>(n)?;
            if let Some(x) = v.first_mut() {
                *x = f32::from_bits(0x7fc0_0001);
            }
            if let Some(x) = v.last_mut() {
                *x = f32::NEG_INFINITY;
            }
            round_trip_bits("float2int | for | bitpack", &Values::F32(v))?;
        }
        Ok(())
    }

    #[test]
    fn range_limits() -> Result<()> {
        let two63 = 9_223_372_036_854_775_808.0f64;
        let v = vec![
            two63,
            -two63,
            two63 * 2.0,
            9_007_199_254_740_993.0,
            1e18,
            -1e18,
            123_456_789.125,
            0.5,
            -0.5,
            1.5e-18,
        ];
        for e in 0..=18 {
            round_trip_bits(
                &format!("float2int({e}) | for | bitpack"),
                &Values::F64(v.clone()),
            )?;
        }
        let v = vec![
            2_147_483_648.0f32,
            -2_147_483_648.0,
            1e10,
            0.5,
            16_777_217.0,
        ];
        for e in 0..=9 {
            round_trip_bits(
                &format!("float2int({e}) | for | bitpack"),
                &Values::F32(v.clone()),
            )?;
        }
        Ok(())
    }

    #[test]
    fn f32_values() -> Result<()> {
        let mut v = prices::<f32>(2000)?;
        let bytes = round_trip_bits("float2int(2) | for | bitpack", &Values::F32(v.clone()))?;
        // Prices up to 100 000 have at most 7 significant digits, exact in an f32's 24 bits.
        assert_eq!(header(&bytes)?, (2, 0));
        assert!(described(&bytes)?.starts_with("float2int(2) | for | bitpack("));
        let specials = specials_f32();
        v.splice(100..100, specials.iter().copied());
        let bytes = round_trip_bits("float2int(2) | for | bitpack", &Values::F32(v.clone()))?;
        // Every special is an exception at E = 2, pi because it needs more decimals.
        assert_eq!(header(&bytes)?.1, specials.len() as u32);
        for e in 0..=9 {
            round_trip_bits(
                &format!("float2int({e}) | for | bitpack"),
                &Values::F32(v.clone()),
            )?;
        }
        Ok(())
    }

    #[test]
    fn exception_slots_repeat_the_previous_integer() {
        let v = [f64::NAN, 1.5, f64::INFINITY, 2.5, -0.0];
        let (positions, bits, ints) = split(&v, 1);
        assert_eq!(positions, vec![0, 2, 4]);
        assert_eq!(
            bits,
            vec![
                f64::NAN.to_bits(),
                f64::INFINITY.to_bits(),
                (-0.0f64).to_bits()
            ]
        );
        assert_eq!(ints, vec![15, 15, 15, 25, 25]);
        let (_, _, ints) = split(&[f64::NAN; 3], 1);
        assert_eq!(ints, vec![0, 0, 0]);
    }

    #[test]
    fn plan_errors() -> Result<()> {
        let f64s = Values::F64(vec![1.5]);
        let f32s = Values::F32(vec![1.5]);
        for (plan, values) in [
            ("float2int(19)", &f64s),
            ("float2int(-1)", &f64s),
            ("float2int(10)", &f32s),
            ("float2int(1, 2)", &f64s),
            ("float2int(2)", &Values::Int(IntVec::I64(vec![1]))),
            ("float2int(2) | bitpack(3)", &f64s),
        ] {
            assert!(encode(&plan.parse()?, values).is_err(), "{plan}");
        }
        round_trip_bits("float2int(18)", &f64s)?;
        round_trip_bits("float2int(9)", &f32s)?;
        round_trip_bits("float2int(1) | zigzag | bitpack", &f64s)?;
        Ok(())
    }

    const SAMPLE_PLAN: &str = "float2int(2) | for | bitpack";

    fn sample_node() -> Result<EncodedNode> {
        let mut v = prices::<f64>(100)?;
        v[0] = f64::NAN;
        v[40] = -0.0;
        v[99] = f64::INFINITY;
        encode(&SAMPLE_PLAN.parse()?, &Values::F64(v))
    }

    #[test]
    fn every_truncation_is_an_error_and_bit_flips_never_panic() -> Result<()> {
        check_corruption(SAMPLE_PLAN, &sample_node()?, 1)
    }

    #[test]
    fn corrupt_exceptions_are_reported() -> Result<()> {
        let good = sample_node()?;

        assert!(
            corrupted(&good, |n| n.buffers[0] = u32_bytes(&[0, 40, 40]))?
                .contains("not after the previous one")
        );
        assert!(
            corrupted(&good, |n| n.buffers[0] = u32_bytes(&[0, 40, 100]))?
                .contains("past the end of 100 values")
        );
        assert!(
            corrupted(&good, |n| n.buffers[0] = u32_bytes(&[0, 40, 99, 99]))?
                .contains("metadata says 3")
        );
        assert!(corrupted(&good, |n| n.buffers[1].truncate(16))?.contains("metadata says 3"));
        assert!(corrupted(&good, |n| n.buffers[1].truncate(17))?.contains("not a multiple of 8"));
        assert!(
            corrupted(&good, |n| n.meta[1..5]
                .copy_from_slice(&u32::MAX.to_le_bytes()))?
            .contains("among 100 values")
        );
        assert!(corrupted(&good, |n| n.meta[0] = 19)?.contains("exponent 19 exceeds 18"));
        assert!(corrupted(&good, |n| n.meta.truncate(3))?.contains("metadata too short"));
        assert!(corrupted(&good, |n| n.children.clear())?.contains("expected 2 and 1"));

        let narrow = encode(&"bitpack".parse()?, &Values::Int(IntVec::I32(vec![0; 100])))?;
        assert!(corrupted(&good, |n| n.children[0] = narrow)?.contains("expected i64"));
        let long = encode(&"bitpack".parse()?, &Values::Int(IntVec::I64(vec![0; 101])))?;
        assert!(corrupted(&good, |n| n.children[0] = long)?.contains("more than its parent's 100"));

        // An f32 node may not claim an f64 exponent.
        let f32s = encode(&"float2int(2)".parse()?, &Values::F32(vec![1.25; 10]))?;
        assert!(corrupted(&f32s, |n| n.meta[0] = 10)?.contains("exponent 10 exceeds 9"));
        Ok(())
    }

    fn decimal_or_bits() -> impl Strategy<Value = f64> {
        prop_oneof![
            (-10_000_000i64..10_000_000).prop_map(|i| i as f64 / 100.0),
            any::<u64>().prop_map(f64::from_bits),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn f64_round_trips(
            v in prop_oneof![
                prop::collection::vec(any::<u64>().prop_map(f64::from_bits), 0..2100),
                prop::collection::vec(decimal_or_bits(), 0..2100),
            ],
            e in 0..=18u8,
        ) {
            let values = Values::F64(v);
            for plan in [
                "float2int | for | bitpack".to_string(),
                format!("float2int({e}) | for | bitpack"),
            ] {
                round_trip_bits(&plan, &values).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }

        #[test]
        fn f32_round_trips(
            v in prop_oneof![
                prop::collection::vec(any::<u32>().prop_map(f32::from_bits), 0..2100),
                prop::collection::vec(any::<f32>(), 0..2100),
                prop::collection::vec(
                    (-1_000_000i32..1_000_000).prop_map(|i| (f64::from(i) / 1000.0) as f32),
                    0..2100,
                ),
            ],
            e in 0..=9u8,
        ) {
            let values = Values::F32(v);
            for plan in [
                "float2int | for | bitpack".to_string(),
                format!("float2int({e}) | for | bitpack"),
            ] {
                round_trip_bits(&plan, &values).map_err(|e| TestCaseError::fail(e.to_string()))?;
            }
        }
    }
}
