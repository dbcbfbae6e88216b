//! Above: store each value's difference from the value one row earlier, for a stream that is
//! a row-major image (a raster band) of a known width. With the horizontal `delta` after it,
//! `above(W) | delta`, the stored number is `x - left - above + above_left`: the residual of
//! the planar gradient predictor, the 2-D predictor of lossless image coders, which leaves
//! small signed numbers for a `zigzag | ans` or `zigzag | bitpack` below.
//!
//! Differences wrap in the stream's own type, so every input round-trips whatever its range.
//! The first `W` values (the chunk's first row) are kept as they are. Decoding adds each row
//! to the one below it, a whole row at a time: the additions of a row do not depend on each
//! other, so they run as wide SIMD adds, at memory speed. The width is a plan parameter,
//! `above(1933)`; the selector never tries this primitive on its own (it cannot know a
//! stream's width), raster writers put it in their plans.
//!
//! Node: meta = `[width: u32]` (1 or more); child 0 = the differences as the same type:
//! `d[i] = v[i]` for `i < width`, `d[i] = v[i] - v[i - width]` (wrapping) after.

use crate::memo::Split;
use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Scratch, Slot, encode_child, expect_child};
use std::rc::Rc;
use zipflow_core::values::IntVecOf;
use zipflow_core::{Error, Int, PType, Plan, Result, Values, match_ints};

/// `above`.
pub struct Above;

/// On-disk id of [`Above`].
pub const ID: u16 = DESCRIPTOR.id;

/// Header (16 B) plus one child-table entry, padded to 8, plus the 4-byte width padded to 8.
const NODE_OVERHEAD: usize = 24 + 8;

/// The differences from the value `width` positions earlier; the first `width` values as
/// they are.
pub fn differences<T: Int>(values: &[T], width: usize) -> Vec<T> {
    let head = width.min(values.len());
    let mut out = Vec::with_capacity(values.len());
    out.extend_from_slice(&values[..head]);
    out.extend(
        values[head..]
            .iter()
            .zip(values)
            .map(|(v, up)| v.wrapping_sub(*up)),
    );
    out
}

/// Turns differences from the row above back into values, in place: each row, from the
/// second on, gets the (already restored) row above added to it.
pub fn restore<T: Int>(values: &mut [T], width: usize) {
    let mut start = width;
    while start < values.len() {
        let (done, rest) = values.split_at_mut(start);
        let above = &done[start - width..];
        let len = width.min(rest.len());
        let row = &mut rest[..len];
        for (v, up) in row.iter_mut().zip(above) {
            *v = v.wrapping_add(*up);
        }
        start += width;
    }
}

/// The width `plan` states: its one parameter, `1..=u32::MAX`.
fn width_of(plan: &Plan) -> Result<usize> {
    match plan.params.as_slice() {
        [w] if (1..=i64::from(u32::MAX)).contains(w) => Ok(*w as usize),
        [w] => Err(Error::plan(
            plan,
            format!("above's row width {w} is outside 1..={}", u32::MAX),
        )),
        _ => Err(Error::plan(
            plan,
            "above needs the row width in values, e.g. `above(1933) | delta | zigzag | ans`",
        )),
    }
}

/// An `above` node, parsed and checked once: its width and its differences child.
#[derive(Debug, Clone, Copy)]
pub struct View<'n, 'a> {
    /// Values per row, at least 1.
    pub width: usize,
    /// The differences: the stream's type, the node's length.
    pub differences: &'n NodeView<'a>,
}

impl<'n, 'a> View<'n, 'a> {
    /// Checks `node`'s shape, metadata and child.
    pub fn parse(node: &'n NodeView<'a>) -> Result<View<'n, 'a>> {
        node.expect_shape("above", 0, 1)?;
        let mut meta = node.meta_reader();
        let width = meta.u32("above width")?;
        meta.finish("above")?;
        if width == 0 {
            return Err(Error::corrupt("above node with a row width of 0"));
        }
        expect_child(node, 0, "differences", node.ptype, Some(node.len))?;
        Ok(View {
            width: width as usize,
            differences: &node.children[0],
        })
    }
}

impl Encoding for Above {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: calibration_image(),
            plan: "above(256) | plain",
            minus: &[(crate::selection::RAW, 1.0)],
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
            return Err(Error::plan(plan, "above needs integers"));
        };
        let width = width_of(plan)?;
        let mut node = EncodedNode::new(ID, v.ptype(), v.len())?;
        node.meta = (width as u32).to_le_bytes().to_vec();
        let child = match_ints!(v, T, x => Values::Int(T::wrap(differences(x, width))));
        node.children.push(encode_child(plan, self, "", &child)?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let View {
            width,
            differences: child,
        } = View::parse(node)?;
        // The child has the output's type and length (checked above): it decodes straight
        // into `out`, and the rows are then restored in place.
        crate::decode(child, out, scratch)?;
        let Values::Int(o) = out else {
            return Err(Error::corrupt("above differences are not integers"));
        };
        match_ints!(o, T, o => restore(o, width));
        Ok(())
    }

    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        View::parse(node)
            .map(|v| vec![v.width as i64])
            .unwrap_or_default()
    }

    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        // The node adds a fixed overhead to its child.
        crate::memo::split_ints("above", plan, input, |v| {
            let width = width_of(plan)?;
            Ok(Split {
                own: NODE_OVERHEAD,
                children: vec![match_ints!(v, T, x => Values::Int(T::wrap(differences(x, width))))],
            })
        })
    }
}

/// What `above` is: its id, name, child slot, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 22,
    name: "above",
    slots: &[Slot {
        name: "",
        default: "delta | zigzag | bitpack",
    }],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode::cpu_only(),
    search: crate::Search::SKIP,
};

/// A smooth 256-wide image: rows that differ from the row above by a little.
fn calibration_image() -> zipflow_core::Values {
    let mut rnd = crate::selection::xorshift(0x5be0_cd19_137e_2179);
    crate::selection::ints(
        (0..crate::selection::CALIBRATION_LEN as i64)
            .map(|i| 1000 + (i % 256) * 3 + (i / 256) * 2 + (rnd() % 5) as i64)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use crate::{decode_bytes, encode};
    use proptest::prelude::*;
    use zipflow_core::IntVec;

    struct EdgeCases;

    impl IntCases for EdgeCases {
        fn cases<T: Int>() -> Vec<Vec<T>> {
            let mut r = random(11);
            let mut cases = edge_lengths(&mut r, T::MAX);
            cases.extend([
                random_ints(&mut r, 5000),
                vec![T::from_u64_wrapping(42); 3000],
                [T::MIN, T::MAX, T::ZERO, T::MAX, T::MIN, T::MIN].repeat(400),
                (0..4100)
                    .map(|i| T::from_u64_wrapping(i % 37 + i / 37))
                    .collect(),
            ]);
            cases
        }
    }

    #[test]
    fn round_trips_edge_cases() -> Result<()> {
        round_trip_every_int_type::<EdgeCases>(&[
            "above(1)",
            "above(7)",
            "above(37)",
            "above(4096)",
            "above(37) | delta | zigzag | bitpack",
            "above(100000) | plain",
        ])
    }

    #[test]
    fn a_smooth_image_becomes_small_residuals() -> Result<()> {
        // A plane with a slope in both directions: every gradient residual is 0 but the
        // first row's and column's.
        let (w, h) = (300usize, 200usize);
        let v: Vec<u16> = (0..w * h)
            .map(|i| (1000 + 3 * (i % w) + 5 * (i / w)) as u16)
            .collect();
        let values = Values::Int(IntVec::U16(v));
        let bytes = decodes_back("above(300) | delta | zigzag | ans", &values)?;
        // Every row but the first stores zeros: far below a bit per pixel.
        assert!(bytes < w * h / 8, "{bytes} bytes");
        Ok(())
    }

    /// Encodes `values` by `p` and checks that they decode back; the encoded size. (The
    /// entropy coder's estimate is close, not exact, so `round_trip` does not fit it.)
    fn decodes_back(p: &str, values: &Values) -> Result<usize> {
        let bytes = encode(&plan(p), values)?.to_bytes()?;
        assert_eq!(&decode_bytes(&bytes)?, values, "plan `{p}`");
        Ok(bytes.len())
    }

    #[test]
    fn round_trips_with_an_entropy_coder() -> Result<()> {
        let mut r = random(13);
        let v: Vec<i16> = (0..70_000)
            .map(|i| (i % 211) as i16 * 3 - (i / 211) as i16 + (r() % 7) as i16)
            .collect();
        let values = Values::Int(IntVec::I16(v));
        for p in [
            "above(211) | delta | zigzag | ans",
            "above(1) | zigzag | ans",
        ] {
            decodes_back(p, &values)?;
        }
        Ok(())
    }

    #[test]
    fn needs_a_width() {
        let v = Values::Int(IntVec::U16(vec![1, 2, 3]));
        for p in ["above", "above(0)", "above(-3)", "above(5000000000)"] {
            let e = encode(&plan(p), &v);
            assert!(matches!(e, Err(Error::Plan { .. })), "{p}: {e:?}");
        }
        assert!(matches!(
            encode(&plan("above(3)"), &Values::F64(vec![1.0])),
            Err(Error::Plan { .. })
        ));
    }

    #[test]
    fn describe_states_the_width() -> Result<()> {
        let v: Vec<u32> = (0..100).map(|i| i * 3).collect();
        let bytes = round_trip(&plan("above(10) | plain"), &Values::Int(IntVec::U32(v)))?;
        assert_eq!(described(&bytes)?, "above(10) | plain");
        Ok(())
    }

    #[test]
    fn corruption_is_an_error_not_a_panic() -> Result<()> {
        let mut r = random(5);
        let v: Vec<i32> = (0..3000).map(|i| i % 50 + (r() % 9) as i32).collect();
        let v = Values::Int(IntVec::I32(v));
        for p in [
            "above(50)",
            "above(50) | delta | zigzag | ans",
            "above(7) | plain",
        ] {
            check_corruption(p, &encode(&plan(p), &v)?, 7)?;
        }
        let mut node = encode(&plan("above(50) | plain"), &v)?;
        node.meta = 0u32.to_le_bytes().to_vec();
        assert!(decode_bytes(&node.to_bytes()?).is_err());
        Ok(())
    }

    proptest! {
        #[test]
        fn round_trip_u16(v in prop::collection::vec(any::<u16>(), 0..3000),
                          w in 1i64..400,
                          p in prop::sample::select(vec![
                              "plain", "delta | zigzag | bitpack", "for | bitpack",
                          ])) {
            let p = format!("above({w}) | {p}");
            round_trip(&plan(&p), &Values::Int(IntVec::U16(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn round_trip_u16_entropy_coded(v in prop::collection::vec(any::<u16>(), 0..3000),
                                        w in 1i64..400) {
            let p = format!("above({w}) | delta | zigzag | ans");
            decodes_back(&p, &Values::Int(IntVec::U16(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }

        #[test]
        fn round_trip_i64(v in prop::collection::vec(any::<i64>(), 0..2000), w in 1i64..3000) {
            let p = format!("above({w})");
            round_trip(&plan(&p), &Values::Int(IntVec::I64(v)))
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        }
    }
}
