//! Dictionary: the distinct values, sorted, and one code per value indexing them.
//!
//! The dictionary is sorted (strictly increasing in the stream's type) so that a range
//! predicate can be mapped to a range of codes and evaluated without decoding. Codes are the
//! narrowest unsigned type that indexes the dictionary: u8 up to 256 entries, u16 up to
//! 65536, u32 beyond.
//!
//! Decoding checks every code against the dictionary length once, then gathers without bounds
//! checks. With a `bitpack` codes child (the default) the two are fused: each 1024-code vector
//! is unpacked into a stack buffer, checked, and gathered straight into the output, so the
//! codes are never materialised as a whole; when the bit width cannot express a code past the
//! dictionary's end, the check is skipped altogether.
//!
//! Node: no meta; child 0 (`codes`) = the codes, u8/u16/u32 by the dictionary length;
//! child 1 (`values`) = the dictionary, same type as the stream.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot, bitpack, encode_child, expect_child};
use fastlanes::BitPacking;
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, IntVec, PType, Plan, Result, VECTOR_LEN, Values, match_ints};

/// `dict(codes: P, values: Q)`.
pub struct Dict;

/// On-disk id of [`Dict`].
pub const ID: u16 = DESCRIPTOR.id;

/// Header (16 B) plus two child-table entries; no meta.
const NODE_OVERHEAD: usize = 24;

/// The code type for a dictionary of `len` entries.
pub fn code_type(len: usize) -> PType {
    if len <= 1 << 8 {
        PType::U8
    } else if len <= 1 << 16 {
        PType::U16
    } else {
        PType::U32
    }
}

/// The sorted distinct values of `values`.
pub fn dictionary<T: Int>(values: &[T]) -> Vec<T> {
    let mut dict = values.to_vec();
    dict.sort_unstable();
    dict.dedup();
    dict
}

/// The code of each value in `dict`, which must hold every value (as [`dictionary`] builds
/// it) and have at most as many entries as `C` can index.
pub fn codes<T: Int, C: Int>(values: &[T], dict: &[T]) -> Vec<C> {
    if T::BITS <= 16 {
        // Every value of a narrow type indexes a table directly: no search per value.
        let mask = (1u64 << T::BITS) - 1;
        let mut table = vec![0u16; 1 << T::BITS];
        for (i, d) in dict.iter().enumerate() {
            // A dictionary of a 16-bit type has at most 2^16 entries.
            table[(d.to_u64() & mask) as usize] = i as u16;
        }
        return values
            .iter()
            .map(|v| C::from_u64_wrapping(u64::from(table[(v.to_u64() & mask) as usize])))
            .collect();
    }
    values
        .iter()
        .map(|v| {
            let (Ok(i) | Err(i)) = dict.binary_search(v);
            C::from_u64_wrapping(i as u64)
        })
        .collect()
}

impl Encoding for Dict {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn child_shape(&self, slot: &str, shape: crate::Shape) -> crate::Shape {
        // One entry per distinct value; one code per value.
        if slot == "values" {
            shape.per(shape.distinct)
        } else {
            shape.numbers()
        }
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_few(),
            plan: "dict(codes: plain, values: plain)",
            minus: &[(crate::selection::RAW, 1.0)],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Int(v) = input else {
            return Err(Error::plan(plan, "dict needs integers"));
        };
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        let (codes, dict) = split(v);
        node.children
            .push(encode_child(plan, self, "codes", &codes)?);
        node.children
            .push(encode_child(plan, self, "values", &dict)?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let view = View::parse(node)?;
        let dict = scratch.decode(view.values)?;
        let result = decode_with(view.codes, &dict, node.len, out, scratch);
        scratch.give(dict);
        result
    }

    fn extrapolate_split(
        &self,
        split: &Split,
        scale: f64,
        distinct: f64,
    ) -> Option<Vec<(Values, f64)>> {
        match &split.children[..] {
            [codes, dict] => Some(extrapolated(codes, dict, scale, distinct)),
            _ => None,
        }
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        // A fixed overhead on top of the children.
        crate::memo::split_ints("dict", plan, input, |v| {
            let (codes, dict) = split(v);
            Ok(Split {
                own: NODE_OVERHEAD,
                children: vec![codes, dict],
            })
        })
    }
}

/// A sample's codes and dictionary standing for a whole stream with `distinct` times as many
/// distinct values (at most `scale` times the sample's length, at least the sample's): each
/// code spread over the larger dictionary, in the code type that indexes it, so that a codes
/// plan is judged at the width it will have; the dictionary grows by the same factor.
fn extrapolated(codes: &Values, dict: &Values, scale: f64, distinct: f64) -> Vec<(Values, f64)> {
    let d = dict.len().max(1) as f64;
    let full = (d * distinct).min(codes.len() as f64 * scale).max(d);
    let grow = full / d;
    let Values::Int(c) = codes else {
        return vec![(codes.clone(), scale), (dict.clone(), grow)];
    };
    let spread: Vec<u64> =
        match_ints!(c, T, x => x.iter().map(|&v| (v.to_u64() as f64 * grow) as u64).collect());
    let wide: IntVec = match code_type(full.ceil() as usize) {
        PType::U8 => IntVec::U8(spread.iter().map(|&x| x as u8).collect()),
        PType::U16 => IntVec::U16(spread.iter().map(|&x| x as u16).collect()),
        _ => IntVec::U32(spread.iter().map(|&x| x as u32).collect()),
    };
    vec![(Values::Int(wide), scale), (dict.clone(), grow)]
}

/// The codes and dictionary streams of `v`.
fn split(v: &IntVec) -> (Values, Values) {
    match_ints!(v, T, x => {
        let dict = dictionary(x);
        let codes = match code_type(dict.len()) {
            PType::U8 => IntVec::U8(codes(x, &dict)),
            PType::U16 => IntVec::U16(codes(x, &dict)),
            _ => IntVec::U32(codes(x, &dict)),
        };
        (Values::Int(codes), Values::Int(T::wrap(dict)))
    })
}

/// A `dict` node, parsed and checked once: its codes and its dictionary.
#[derive(Debug, Clone, Copy)]
pub struct View<'n, 'a> {
    /// One code per value: u8, u16 or u32 by the dictionary's length
    /// ([`code_type`]), the node's length.
    pub codes: &'n NodeView<'a>,
    /// The dictionary: the node's type, at most as many entries as values.
    pub values: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape and children.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        node.expect_shape("dict", 0, 2)?;
        node.meta_reader().finish("dict")?;
        expect_child(node, 1, "values", node.ptype, None)?;
        let entries = node.children[1].len;
        expect_child(node, 0, "codes", code_type(entries), Some(node.len))?;
        // The encoder never stores a value the stream lacks; checking it first keeps a hostile
        // header from making us decode a huge dictionary.
        if entries > node.len {
            return Err(Error::corrupt(format!(
                "dictionary of {entries} values for a stream of {}",
                node.len
            )));
        }
        Ok(View {
            codes: &node.children[0],
            values: &node.children[1],
        })
    }
}

/// Checks the decoded dictionary and decodes the codes child through it into `out`.
fn decode_with(
    codes: &NodeView<'_>,
    dict: &Values,
    len: usize,
    out: &mut Values,
    scratch: &mut Scratch,
) -> Result<()> {
    let (Values::Int(dict), Values::Int(out)) = (dict, out) else {
        return Err(Error::corrupt("dictionary values are not integers"));
    };
    match_ints!(out, T, o => {
        let Some(dict) = T::slice(dict) else {
            return Err(Error::corrupt("dictionary values have the wrong type"));
        };
        // Sorted order is what lets predicates run on codes; a dictionary without it is
        // corrupt even though it would decode.
        if !dict.windows(2).all(|w| w[0] < w[1]) {
            return Err(Error::corrupt("dictionary values are not strictly increasing"));
        }
        match codes.ptype {
            PType::U8 => gather::<T, u8>(codes, dict, len, o, scratch),
            PType::U16 => gather::<T, u16>(codes, dict, len, o, scratch),
            PType::U32 => gather::<T, u32>(codes, dict, len, o, scratch),
            p => Err(Error::corrupt(format!("dictionary codes of type {p}"))),
        }
    })
}

fn out_of_range(code: u64, entries: usize) -> Error {
    Error::corrupt(format!(
        "dictionary code {code} out of range for {entries} values"
    ))
}

/// Decodes `C`-typed codes and looks each up in `dict`, into `out` (replacing its contents).
fn gather<T: Int, C: Int + BitPacking + IntVecOf>(
    codes: &NodeView<'_>,
    dict: &[T],
    len: usize,
    out: &mut Vec<T>,
    scratch: &mut Scratch,
) -> Result<()> {
    if codes.id == bitpack::ID {
        return gather_packed::<T, C>(codes, dict, len, out);
    }
    let decoded = scratch.decode(codes)?;
    let result = match &decoded {
        Values::Int(iv) => match C::slice(iv) {
            Some(c) => {
                let max = c.iter().copied().max().map_or(0, Int::to_u64);
                if !c.is_empty() && max >= dict.len() as u64 {
                    Err(out_of_range(max, dict.len()))
                } else {
                    out.clear();
                    out.reserve(c.len());
                    // SAFETY: every code is at most `max`, checked above to be below
                    // `dict.len()`.
                    out.extend(
                        c.iter()
                            .map(|&c| unsafe { *dict.get_unchecked(c.to_u64() as usize) }),
                    );
                    Ok(())
                }
            }
            None => Err(Error::corrupt("dictionary codes have the wrong type")),
        },
        _ => Err(Error::corrupt("dictionary codes are not integers")),
    };
    scratch.give(decoded);
    result
}

/// Looks up each vector of bit-packed `codes` in `dict` into `buf` and hands it to `f`.
fn lookup_runs<T: Int, C: Int + BitPacking>(
    codes: &NodeView<'_>,
    dict: &[T],
    buf: &mut [T; VECTOR_LEN],
    f: &mut impl FnMut(&mut [T]) -> Result<()>,
) -> Result<()> {
    for_each_code_vector::<C>(codes, dict.len(), |_, c| {
        let out = &mut buf[..c.len()];
        for (o, &c) in out.iter_mut().zip(c) {
            // SAFETY: `for_each_code_vector` checked every code against `dict.len()`.
            *o = unsafe { *dict.get_unchecked(c.to_u64() as usize) };
        }
        f(out)
    })
}

/// [`gather`] for a `bitpack` codes child, fused: each vector of codes is unpacked into a
/// stack buffer, checked, and looked up straight into the output.
fn gather_packed<T: Int, C: Int + BitPacking>(
    codes: &NodeView<'_>,
    dict: &[T],
    len: usize,
    out: &mut Vec<T>,
) -> Result<()> {
    if codes.len != len {
        return Err(Error::corrupt("dictionary codes of the wrong length"));
    }
    crate::resize_for_overwrite(out, len, T::ZERO);
    for_each_code_vector::<C>(codes, dict.len(), |i, vector| {
        let dst = &mut out[i * VECTOR_LEN..i * VECTOR_LEN + vector.len()];
        for (o, &c) in dst.iter_mut().zip(vector) {
            // SAFETY: `for_each_code_vector` checked every code against `dict.len()`.
            *o = unsafe { *dict.get_unchecked(c.to_u64() as usize) };
        }
        Ok(())
    })
}

/// Unpacks a `bitpack` codes child a vector at a time into a stack buffer and hands `f` the
/// vector's index and its codes (the stream's part of it), each checked to index a
/// dictionary of `entries` values.
fn for_each_code_vector<C: Int + BitPacking>(
    codes: &NodeView<'_>,
    entries: usize,
    mut f: impl FnMut(usize, &[C]) -> Result<()>,
) -> Result<()> {
    let mut copy = Vec::new();
    let p = bitpack::view::<C>(codes, &mut copy)?;
    let len = codes.len;
    if len > 0 && entries == 0 {
        return Err(out_of_range(0, 0));
    }
    // The largest code `width` bits can hold; if it indexes the dictionary, so does every code.
    let widest = if p.width == 0 {
        0
    } else {
        u64::MAX >> (64 - p.width)
    };
    let check = widest >= entries as u64;
    let mut buf = [C::ZERO; VECTOR_LEN];
    if p.width == 0 {
        for (i, start) in (0..len).step_by(VECTOR_LEN).enumerate() {
            f(i, &buf[..VECTOR_LEN.min(len - start)])?;
        }
        return Ok(());
    }
    let per_vector = VECTOR_LEN * p.width / C::BITS as usize;
    for (i, src) in p.words.chunks_exact(per_vector).enumerate() {
        // SAFETY: `bitpack::view` checked `width <= C::BITS` and that `words` holds exactly
        // `vectors(len)` vectors of `per_vector` words; `buf` is one 1024-value vector.
        unsafe { C::unchecked_unpack(p.width, src, &mut buf) };
        // Only the first codes of the last vector are the stream's; its padding is neither
        // checked nor used.
        let vector = &buf[..VECTOR_LEN.min(len - i * VECTOR_LEN)];
        if check {
            let max = vector.iter().copied().max().map_or(0, Int::to_u64);
            if max >= entries as u64 {
                return Err(out_of_range(max, entries));
            }
        }
        f(i, vector)?;
    }
    Ok(())
}

/// Streams a `dict` node whose codes are bit-packed, a vector at a time (see
/// [`crate::runs::for_each_run`]); other codes are decoded whole, as [`Dict::decode`] does.
pub(crate) fn for_each_run<T: Int + IntVecOf>(
    node: &NodeView<'_>,
    scratch: &mut Scratch,
    mut f: impl FnMut(&mut [T]) -> Result<()>,
) -> Result<()> {
    let codes = View::parse(node)?.codes;
    if codes.id != bitpack::ID {
        let mut out = Values::Int(T::wrap(Vec::new()));
        Dict.decode(node, &mut out, scratch)?;
        return match &mut out {
            Values::Int(v) => T::slice_mut(v).map_or_else(
                || Err(Error::corrupt("decoded values of the wrong type")),
                |v| f(v),
            ),
            _ => Err(Error::corrupt("decoded values are not integers")),
        };
    }
    let decoded = scratch.decode(&node.children[1])?;
    let result = (|| {
        let Values::Int(d) = &decoded else {
            return Err(Error::corrupt("dictionary values are not integers"));
        };
        let Some(d) = T::slice(d) else {
            return Err(Error::corrupt("dictionary values have the wrong type"));
        };
        if !d.windows(2).all(|w| w[0] < w[1]) {
            return Err(Error::corrupt(
                "dictionary values are not strictly increasing",
            ));
        }
        let mut buf = [T::ZERO; VECTOR_LEN];
        match codes.ptype {
            PType::U8 => lookup_runs::<T, u8>(codes, d, &mut buf, &mut f),
            PType::U16 => lookup_runs::<T, u16>(codes, d, &mut buf, &mut f),
            PType::U32 => lookup_runs::<T, u32>(codes, d, &mut buf, &mut f),
            p => Err(Error::corrupt(format!("dictionary codes of type {p}"))),
        }
    })();
    scratch.give(decoded);
    result
}

/// What `dict` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 7,
    name: "dict",
    slots: &[
        Slot {
            name: "codes",
            default: "bitpack",
        },
        Slot {
            name: "values",
            default: "for | bitpack",
        },
    ],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::parallel(Pattern::FullyParallel),
    search: crate::Search::numeric(crate::Role::Inner {
        side_streams: false,
    }),
};

/// Four distinct values, one of them wide.
fn calibration_few() -> zipflow_core::Values {
    let mut rnd = crate::selection::xorshift(0x6a09_e667_f3bc_c908);
    crate::selection::ints(
        (0..crate::selection::CALIBRATION_LEN)
            .map(|_| [3i64, 77, 1 << 40, -5][(rnd() % 4) as usize])
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{decode_bytes, encode};
    use proptest::prelude::*;

    struct EdgeCases;

    impl IntCases for EdgeCases {
        fn cases<T: Int>() -> Vec<Vec<T>> {
            let mut r = random(13);
            let mut cases = edge_lengths(&mut r, T::MAX);
            cases.extend([
                // Enough distinct values for u16 codes where the type has them, u32 for 32 and
                // 64 bits.
                random_ints(&mut r, 70_000),
                vec![T::from_u64_wrapping(5); 2000],
                [T::MIN, T::MAX, T::ZERO, T::MAX, T::MIN].repeat(500),
            ]);
            let few: Vec<T> = random_ints(&mut r, 6);
            cases.push((0..5000).map(|i| few[(i * i) % 6]).collect());
            let mut runs = Vec::new();
            for n in [1usize, 700, 3, 2500, 1] {
                runs.extend(std::iter::repeat_n(T::from_u64_wrapping(n as u64 * 977), n));
            }
            cases.push(runs);
            let mut sorted = random_ints(&mut r, 3000);
            sorted.sort_unstable();
            cases.push(sorted);
            cases
        }
    }

    #[test]
    fn round_trips_edge_cases() -> Result<()> {
        round_trip_every_int_type::<EdgeCases>(&[
            "dict",
            "dict(codes: plain, values: plain)",
            "dict(codes: for | bitpack)",
            "dict(values: delta)",
        ])
    }

    #[test]
    fn mixes_of_extremes() -> Result<()> {
        let v = vec![i64::MIN, i64::MAX, 0, -1, i64::MIN, 1, i64::MAX];
        round_trip(&plan("dict"), &Values::Int(IntVec::I64(v)))?;
        let v = vec![u64::MAX, 0, u64::MAX, 1, u64::MAX - 1];
        round_trip(&plan("dict"), &Values::Int(IntVec::U64(v)))?;
        Ok(())
    }

    #[test]
    fn code_type_follows_dictionary_size() -> Result<()> {
        for (distinct, ptype) in [
            (1, PType::U8),
            (256, PType::U8),
            (257, PType::U16),
            (65536, PType::U16),
            (65537, PType::U32),
        ] {
            let v: Vec<i64> = (0..distinct as i64).map(|i| i * 3 - 1000).rev().collect();
            let bytes = round_trip(&plan("dict"), &Values::Int(IntVec::I64(v)))?;
            assert_eq!(
                NodeView::parse(&bytes)?.children[0].ptype,
                ptype,
                "{distinct}"
            );
        }
        Ok(())
    }

    #[test]
    fn dictionary_is_sorted() -> Result<()> {
        let v = Values::Int(IntVec::I32(vec![5, -3, 5, 100, -3, 0]));
        let node = encode(&plan("dict(codes: plain, values: plain)"), &v)?;
        let sorted: Vec<u8> = [-3i32, 0, 5, 100]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        assert_eq!(node.children[1].buffers[0], sorted);
        assert_eq!(node.children[0].buffers[0], vec![2, 0, 2, 3, 0, 1]);
        Ok(())
    }

    #[test]
    fn describe_fills_in_defaults() -> Result<()> {
        let v: Vec<u32> = (0..3000).map(|i| 1000 + (i % 5) * 10).collect();
        let bytes = round_trip(&plan("dict"), &Values::Int(IntVec::U32(v)))?;
        // 5 codes (3 bits); values 1000..=1040 minus 1000 (6 bits).
        assert_eq!(
            described(&bytes)?,
            "dict(codes: bitpack(3), values: for | bitpack(6))"
        );
        Ok(())
    }

    #[test]
    fn rejects_non_integers() {
        let e = encode(&plan("dict"), &Values::F64(vec![1.0]));
        assert!(matches!(e, Err(Error::Plan { .. })));
    }

    #[test]
    fn checks_codes_and_dictionary() -> Result<()> {
        let v = Values::Int(IntVec::U16((0..3000).map(|i| (i % 5) * 10).collect()));
        // A code past the end, through the generic and the fused path: codes are 3 bits, so
        // 7 fits the packing but not the 5-value dictionary.
        let e = corrupt("dict(codes: plain)", &v, |n| {
            n.children[0].buffers[0][2000] = 5
        })?;
        assert!(e.contains("code 5 out of range for 5"), "{e}");
        let e = corrupt("dict", &v, |n| n.children[0].buffers[0][300] = 0xff)?;
        assert!(e.contains("out of range for 5"), "{e}");
        // An unsorted dictionary.
        let e = corrupt("dict(values: plain)", &v, |n| {
            n.children[1].buffers[0].swap(0, 2);
        })?;
        assert!(e.contains("strictly increasing"), "{e}");
        // Codes of the wrong width for the dictionary size, and the wrong count.
        let e = corrupt("dict(codes: plain)", &v, |n| {
            n.children[0].ptype = PType::U16
        })?;
        assert!(e.contains("expected u8"), "{e}");
        let e = corrupt("dict", &v, |n| n.len += 1)?;
        assert!(e.contains("codes child holds"), "{e}");
        // A dictionary larger than the stream.
        let e = corrupt(
            "dict(codes: plain, values: plain)",
            &Values::Int(IntVec::U16(vec![1, 2, 3])),
            |n| {
                n.len = 2;
                n.children[0].len = 2;
                n.children[0].buffers[0].pop();
            },
        )?;
        assert!(e.contains("more than its parent"), "{e}");
        Ok(())
    }

    #[test]
    fn fused_path_ignores_padding_but_not_codes() -> Result<()> {
        // 1030 values over 3 entries (2 bits): 1 full vector and 6 values of a padded one.
        let v: Vec<u16> = (0..1030).map(|i| (i % 3) * 7).collect();
        let mut node = encode(&plan("dict"), &Values::Int(IntVec::U16(v.clone())))?;
        // Set every bit of the last vector's packed words: the 6 real codes become 3, out of
        // range.
        let packed = &mut node.children[0].buffers[0];
        let n = packed.len();
        packed[n - 256..].fill(0xff);
        assert!(decode_bytes(&node.to_bytes()?).is_err());
        // Out-of-range codes in the padding alone are not the stream's and do not matter.
        let mut codes: Vec<u8> = (0..1030).map(|i| (i % 3) as u8).collect();
        codes.resize(2048, 3);
        node.children[0].buffers[0] = bitpack::pack(&codes, 2);
        assert_eq!(
            decode_bytes(&node.to_bytes()?)?,
            Values::Int(IntVec::U16(v))
        );
        Ok(())
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() -> Result<()> {
        let mut r = random(9);
        let v: Vec<i64> = (0..2500)
            .map(|_| (r() % 40) as i64 * 1_000_003 - 7)
            .collect();
        let v = Values::Int(IntVec::I64(v));
        for p in [
            "dict",
            "dict(codes: plain, values: plain)",
            "dict(codes: for | bitpack)",
        ] {
            check_corruption(p, &encode(&plan(p), &v)?, 5)?;
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip_i64(v in prop::collection::vec(any::<i64>(), 0..3000),
                          distinct in 1u64..600,
                          p in prop::sample::select(vec![
                              "dict", "dict(codes: plain, values: plain)",
                              "dict(codes: for | bitpack, values: delta | zigzag | bitpack)",
                          ])) {
            let v: Vec<i64> = v.into_iter().map(|x| x % distinct as i64 * 12_345_678_901).collect();
            round_trip(&plan(p), &Values::Int(IntVec::I64(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn round_trip_u16(v in prop::collection::vec(any::<u16>(), 0..3000),
                          p in prop::sample::select(vec![
                              "dict", "dict(codes: plain, values: plain)",
                              "dict(codes: bitpack, values: rle)",
                          ])) {
            round_trip(&plan(p), &Values::Int(IntVec::U16(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}
