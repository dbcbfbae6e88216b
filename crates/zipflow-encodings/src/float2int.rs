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
//! Output `i` depends only on integer `i` (plus a short exception list applied after), hence
//! [`Pattern::FullyParallel`].
//!
//! Node: meta = `[E: u8, exception_count: u32]`; buffer 0 = exception positions (u32, strictly
//! increasing); buffer 1 = exception bits (u64 for f64, u32 for f32); child 0 = the integers,
//! i64 for f64 and i32 for f32, where an exception's slot repeats the previous integer (or the
//! first one that is not an exception, or 0) so that it does not widen the child's range.

use crate::node::{EncodedNode, NodeView};
use crate::patch::{read_exceptions, read_meta, read_positions};
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, PType, Plan, Result, Values};

/// `float2int` / `float2int(E)`.
pub struct FloatToInt;

/// On-disk id of [`FloatToInt`].
pub const ID: u16 = 10;

/// `10^E` for `E` in `0..=18`. Every power of ten up to `10^22` is exact in an f64, so dividing
/// by one is a single correctly rounded operation, on the CPU and on the GPU alike.
pub const POW10: [f64; 19] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18,
];

/// Values the automatic choice of `E` looks at.
pub const SAMPLE_LEN: usize = 1024;

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
/// [`SAMPLE_LEN`] values, the smallest `E` minimising `bits(max - min) * n + exceptions * 96`.
pub fn choose_exponent<F: Decimal>(values: &[F]) -> u8 {
    let n = values.len().min(SAMPLE_LEN);
    let sample: Vec<F> = (0..n)
        .map(|k| values[(k as u64 * values.len() as u64 / n as u64) as usize])
        .collect();
    let mut best = (u64::MAX, 0u8);
    for e in 0..=F::MAX_EXPONENT {
        let scale = POW10[usize::from(e)];
        let (mut min, mut max, mut exceptions) = (i128::MAX, i128::MIN, 0u64);
        for v in &sample {
            match v.encode(scale) {
                Some(i) => {
                    min = min.min(i.to_i128());
                    max = max.max(i.to_i128());
                }
                None => exceptions += 1,
            }
        }
        let range_bits = if min <= max {
            u64::from(128 - (max - min).leading_zeros())
        } else {
            0
        };
        let cost = range_bits * n as u64 + exceptions * EXCEPTION_BITS;
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
    let child = Values::Int(F::I::wrap(ints));
    node.children.push(encode_child(plan, enc, "", &child)?);
    Ok(node)
}

fn decode_typed<F: Decimal>(
    node: &NodeView<'_>,
    out: &mut Vec<F>,
    scratch: &mut Scratch,
) -> Result<()> {
    let (e, count) = read_meta(node, "float2int", "exponent")?;
    if e > F::MAX_EXPONENT {
        return Err(Error::corrupt(format!(
            "float2int exponent {e} exceeds {} for {} values",
            F::MAX_EXPONENT,
            F::PTYPE
        )));
    }
    let mut position_copy = Vec::new();
    let positions = read_positions(node, count, &mut position_copy)?;
    let mut exception_copy = Vec::new();
    let exceptions = read_exceptions::<F::Bits>(node, count, &mut exception_copy)?;
    expect_child(node, 0, "scaled integers", F::I::PTYPE, Some(node.len))?;
    let decoded = scratch.decode(&node.children[0])?;
    let scale = POW10[usize::from(e)];
    let result = match &decoded {
        Values::Int(iv) => match F::I::slice(iv) {
            Some(ints) => {
                out.clear();
                out.resize(ints.len(), F::default());
                decode_into(ints, scale, out);
                Ok(())
            }
            None => Err(Error::corrupt("float2int integers have the wrong type")),
        },
        _ => Err(Error::corrupt("float2int integers are not integers")),
    };
    scratch.give(decoded);
    result?;
    for (&p, &bits) in positions.iter().zip(exceptions) {
        // `read_positions` checked every position against `node.len`, the child's length,
        // which `out` now holds.
        out[p as usize] = F::from_raw(bits);
    }
    Ok(())
}

impl Encoding for FloatToInt {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "float2int"
    }
    fn pattern(&self) -> Pattern {
        Pattern::FullyParallel
    }
    fn slots(&self) -> &'static [Slot] {
        &[Slot {
            name: "",
            default: "for | bitpack",
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

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        node.expect_shape("float2int", 2, 1)?;
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
