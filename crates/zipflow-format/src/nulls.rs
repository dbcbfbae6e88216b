//! Null slots left out of a chunk's values tree (format version 3): a chunk with nulls stores
//! only its valid values, in row order, and its validity places them, as Parquet stores only
//! defined values. A null slot would otherwise hold a filler that the validity already
//! describes, and on a column of half nulls the values tree would pay for that twice.
//!
//! Reading puts the values back at their rows ([`expand`]); each null slot holds the previous
//! valid value (the type's zero before the first; an empty string), as version 2 files stored
//! them. A chunk is compacted exactly when its values tree holds fewer values than it has
//! rows, which its validity then accounts for: version 2 trees hold one value per row.

use crate::file::Validity;
use zipflow_core::values::{ByteStrings, IntVecOf};
use zipflow_core::{Error, Result, Values, match_ints};

/// The values of `values` at valid rows, in order.
pub fn compact(values: &Values, validity: &[bool]) -> Values {
    fn keep<T: Copy>(v: &[T], validity: &[bool]) -> Vec<T> {
        v.iter()
            .zip(validity)
            .filter(|&(_, &ok)| ok)
            .map(|(&x, _)| x)
            .collect()
    }
    match values {
        Values::Int(v) => Values::Int(match_ints!(v, T, x => T::wrap(keep(x, validity)))),
        Values::F32(v) => Values::F32(keep(v, validity)),
        Values::F64(v) => Values::F64(keep(v, validity)),
        Values::Bytes(b) => {
            let mut out = ByteStrings {
                offsets: vec![0],
                data: Vec::new(),
            };
            for (i, _) in validity.iter().enumerate().filter(|&(_, &ok)| ok) {
                out.data.extend_from_slice(b.get(i).unwrap_or_default());
                out.offsets.push(out.data.len() as u64);
            }
            Values::Bytes(out)
        }
    }
}

/// `values`, one per valid row of `validity`, placed at their rows in place (no buffer
/// besides the one they are in, which grows to the rows); a null slot holds the previous
/// valid value (zero before the first), or an empty string. Strings keep their bytes as they
/// are (in row order already): only the offsets move.
pub fn expand(values: &mut Values, validity: &Validity) -> Result<()> {
    let valid: usize = validity.iter().map(|&ok| usize::from(ok)).sum();
    if values.len() != valid {
        return Err(Error::corrupt(format!(
            "values tree holds {} values for {valid} valid rows",
            values.len()
        )));
    }
    // One pass backwards, in place: row i takes the last valid value at or before it, which
    // is value k - 1 for k the valid rows in 0..=i (k - 1 <= i, so it has not moved yet). A
    // null row thus repeats the value before it. Blocks of rows all valid (the usual case)
    // or all null are one copy or one fill; the rest go row by row without branches, since
    // nulls scattered at random would defeat the branch predictor.
    fn place<T: Copy + Default>(v: &mut Vec<T>, validity: &[bool]) {
        const BLOCK: usize = 64;
        let mut k = v.len();
        v.resize(validity.len(), T::default());
        let first = validity.iter().position(|&ok| ok).unwrap_or(validity.len());
        let mut end = validity.len();
        while end > first {
            let start = end.saturating_sub(BLOCK).max(first);
            let block = &validity[start..end];
            let valid = block.iter().filter(|&&ok| ok).count();
            if valid == block.len() {
                v.copy_within(k - valid..k, start);
            } else if valid == 0 {
                let last = v[k - 1];
                v[start..end].fill(last);
            } else {
                let mut j = k;
                for i in (start..end).rev() {
                    v[i] = v[j - 1];
                    j -= usize::from(validity[i]);
                }
            }
            k -= valid;
            end = start;
        }
        v[..first].fill(T::default());
    }
    match values {
        Values::Int(v) => match_ints!(v, T, x => place(x, validity)),
        Values::F32(v) => place(v, validity),
        Values::F64(v) => place(v, validity),
        Values::Bytes(b) => {
            // Row i ends at offsets[i + 1]: the same backwards and forwards passes, over ends.
            let mut ends = b.offsets.split_off(1);
            let start = b.offsets.first().copied().unwrap_or(0);
            place(&mut ends, validity);
            // Before the first valid row, a null slot ends where the bytes start.
            let first = validity.iter().position(|&ok| ok).unwrap_or(validity.len());
            ends[..first].fill(start);
            b.offsets.truncate(1);
            b.offsets.append(&mut ends);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipflow_core::IntVec;

    #[test]
    fn compact_then_expand_keeps_every_valid_value() -> Result<()> {
        let validity = vec![false, true, true, false, false, true, false];
        let ints = Values::Int(IntVec::I32(vec![9, 1, 2, 9, 9, 3, 9]));
        let c = compact(&ints, &validity);
        assert!(c.bit_eq(&Values::Int(IntVec::I32(vec![1, 2, 3]))));
        let mut back = c;
        expand(&mut back, &validity)?;
        assert!(back.bit_eq(&Values::Int(IntVec::I32(vec![0, 1, 2, 2, 2, 3, 3]))));
        let floats = Values::F64(vec![0.0, -0.0, f64::NAN, 0.0, 0.0, 1.5, 0.0]);
        let mut back = compact(&floats, &validity);
        expand(&mut back, &validity)?;
        let Values::F64(b) = back else {
            return Err(Error::invalid("not f64"));
        };
        assert_eq!(b[1].to_bits(), (-0.0f64).to_bits());
        assert!(b[2].is_nan() && b[3].is_nan() && b[4].is_nan());
        assert_eq!(b[5], 1.5);
        let strings = Values::Bytes(ByteStrings {
            offsets: vec![0, 0, 2, 5, 5, 5, 6, 6],
            data: b"abcdef".to_vec(),
        });
        let c = compact(&strings, &validity);
        assert_eq!(c.len(), 3);
        let mut c = c;
        expand(&mut c, &validity)?;
        let Values::Bytes(back) = c else {
            return Err(Error::invalid("not bytes"));
        };
        assert_eq!(back.offsets, vec![0, 0, 2, 5, 5, 5, 6, 6]);
        assert_eq!(back.data, b"abcdef".to_vec());
        Ok(())
    }

    #[test]
    fn a_tree_of_the_wrong_length_is_an_error() {
        let validity = vec![true, false, true];
        let ints = Values::Int(IntVec::U8(vec![1, 2, 3]));
        assert!(expand(&mut ints.clone(), &validity).is_err());
        let mut none = Values::F32(vec![]);
        assert!(expand(&mut none, &vec![false; 4]).is_ok());
        assert!(none.bit_eq(&Values::F32(vec![0.0; 4])));
    }

    proptest::proptest! {
        /// Against the plain rule (each row the last valid value at or before it, zero
        /// before the first), on validity made of runs so that whole blocks are all valid,
        /// all null or mixed.
        #[test]
        fn expand_places_each_value_as_the_plain_rule_does(
            runs in proptest::collection::vec((proptest::bool::ANY, 1usize..200), 0..20),
            mixed in proptest::collection::vec(proptest::bool::ANY, 0..300),
        ) {
            let mut validity: Vec<bool> = runs
                .iter()
                .flat_map(|&(ok, n)| std::iter::repeat_n(ok, n))
                .collect();
            validity.extend(&mixed);
            let valid = validity.iter().filter(|&&ok| ok).count();
            let values: Vec<i64> = (1..=valid as i64).collect();
            let mut want = Vec::with_capacity(validity.len());
            let (mut last, mut next) = (0, values.iter());
            for &ok in &validity {
                if ok {
                    last = *next.next().unwrap_or(&0);
                }
                want.push(last);
            }
            let mut got = Values::Int(IntVec::I64(values));
            expand(&mut got, &validity).map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
            proptest::prop_assert!(got.bit_eq(&Values::Int(IntVec::I64(want))));
        }
    }
}
