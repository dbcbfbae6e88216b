//! String dictionary: the distinct strings once, sorted bytewise, and one code per value.
//!
//! Node: no meta; child 0 = the codes as u32 (index into the dictionary), child 1 =
//! the dictionary as byte strings, each child encoded by its own sub-plan, e.g.
//! `strdict(codes: bitpack, dict: plain(bytes: fsst))`; buffer 0, optional, is a
//! [`crate::rowindex`] of the rows' first bytes. Codes follow the sorted order, so a
//! range predicate on the strings is a range on the codes.
//!
//! Decoding computes every output offset from the dictionary's lengths first (checking each
//! code), then copies: strings of at most 16 bytes with one unaligned 16-byte store from a
//! padded copy of the dictionary, longer ones with a plain copy.

use crate::node::{EncodedNode, NodeView};
use crate::rowindex::RowIndex;
use crate::{Encoding, Pattern, Scratch, Slot, encode_child, expect_child};
use rustc_hash::FxHashMap;
use zipflow_core::values::ByteStrings;
use zipflow_core::{Error, IntVec, PType, Plan, Result, Values};

/// `strdict`.
pub struct StrDict;

/// On-disk id of [`StrDict`].
pub const ID: u16 = DESCRIPTOR.id;

/// Most bytes one decoded chunk of strings may hold.
pub const MAX_DECODED_BYTES: u64 = 1 << 32;

/// Dictionaries of up to this many entries are copied into padded slots (one fixed-size
/// store a string) however few codes read them; larger ones only when they have no more
/// entries than codes.
const SHORT_SLOT_ENTRIES: usize = 4096;

/// The sorted distinct strings of `b` and each value's code.
pub fn build(b: &ByteStrings) -> Result<(ByteStrings, Vec<u32>)> {
    let mut index: FxHashMap<&[u8], u32> = FxHashMap::default();
    let mut first: Vec<&[u8]> = Vec::new();
    let mut codes = Vec::with_capacity(b.len());
    for w in b.offsets.windows(2) {
        let s = &b.data[w[0] as usize..w[1] as usize];
        let next = first.len();
        let code = *index.entry(s).or_insert_with(|| {
            first.push(s);
            next as u32
        });
        codes.push(code);
    }
    if u32::try_from(first.len()).is_err() {
        return Err(Error::unsupported("more than 2^32 distinct strings"));
    }
    // Sort the distinct strings and renumber the codes to follow that order.
    let mut order: Vec<u32> = (0..first.len() as u32).collect();
    order.sort_unstable_by_key(|&i| first[i as usize]);
    let dict = renumber(&first, &order, &mut codes);
    Ok((dict, codes))
}

/// Lays out the dictionary of `distinct` entries in `order` and rewrites each code (an index
/// into `distinct`) to its entry's position in that order.
pub(crate) fn renumber(distinct: &[&[u8]], order: &[u32], codes: &mut [u32]) -> ByteStrings {
    let mut rank = vec![0u32; distinct.len()];
    let mut dict = ByteStrings::default();
    dict.offsets.reserve(order.len() + 1);
    dict.offsets.push(0);
    for (r, &i) in order.iter().enumerate() {
        rank[i as usize] = r as u32;
        dict.data.extend_from_slice(distinct[i as usize]);
        dict.offsets.push(dict.data.len() as u64);
    }
    for c in codes {
        *c = rank[*c as usize];
    }
    dict
}

impl Encoding for StrDict {
    fn descriptor(&self) -> &'static crate::Descriptor {
        &DESCRIPTOR
    }
    fn child_shape(&self, slot: &str, shape: crate::Shape) -> crate::Shape {
        // One dictionary entry per distinct string; one code per string.
        if slot == "dict" {
            shape.per(shape.distinct)
        } else {
            shape.numbers()
        }
    }
    fn calibration(&self) -> Vec<crate::Calibration> {
        vec![crate::Calibration {
            stream: crate::selection::flag_strings(),
            plan: "strdict(codes: plain, dict: plain)",
            minus: &[(crate::selection::RAW, 1.0)],
        }]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype == PType::Bytes
    }

    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode> {
        let Values::Bytes(b) = input else {
            return Err(Error::plan(plan, "`strdict` encodes byte strings only"));
        };
        let (dict, codes) = build(b)?;
        let mut node = EncodedNode::new(ID, PType::Bytes, b.len())?;
        node.buffers
            .extend(crate::rowindex::build(&b.offsets, None));
        node.children.push(encode_child(
            plan,
            self,
            "codes",
            &Values::Int(IntVec::U32(codes)),
        )?);
        node.children
            .push(encode_child(plan, self, "dict", &Values::Bytes(dict))?);
        Ok(node)
    }

    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
        let index = View::parse(node)?.index;
        let Values::Bytes(out) = out else {
            return Err(Error::corrupt("strdict decodes byte strings only"));
        };
        let codes = scratch.decode(&node.children[0])?;
        let dict = match scratch.decode(&node.children[1]) {
            Ok(d) => d,
            Err(e) => {
                scratch.give(codes);
                return Err(e);
            }
        };
        let result = match (&codes, &dict) {
            (Values::Int(IntVec::U32(codes)), Values::Bytes(dict)) => gather(codes, dict, out)
                .and_then(|()| match index {
                    Some(index) => index.verify("strdict", &out.offsets, None),
                    None => Ok(()),
                }),
            _ => Err(Error::corrupt("strdict children have the wrong types")),
        };
        scratch.give(codes);
        scratch.give(dict);
        result
    }
}

/// A checked `strdict` node: its shape, metadata and children.
pub struct View<'a> {
    /// The node's row index, if it has one.
    pub index: Option<RowIndex<'a>>,
}

impl<'a> View<'a> {
    /// Checks a `strdict` node and reads its row index.
    pub fn parse(node: &NodeView<'a>) -> Result<View<'a>> {
        node.expect_shape("strdict", node.buffers.len().min(1), 2)?;
        node.meta_reader().finish("strdict")?;
        expect_child(node, 0, "codes", PType::U32, Some(node.len))?;
        expect_child(node, 1, "dict", PType::Bytes, None)?;
        Ok(View {
            index: RowIndex::of(node, "strdict", false)?,
        })
    }
}

/// `out[i] = dict[codes[i]]`, every code checked.
pub fn gather(codes: &[u32], dict: &ByteStrings, out: &mut ByteStrings) -> Result<()> {
    let n = dict.len();
    let lens: Vec<u64> = dict.offsets.windows(2).map(|w| w[1] - w[0]).collect();
    out.offsets.clear();
    out.offsets.reserve(codes.len() + 1);
    out.offsets.push(0);
    let mut end = 0u64;
    for &c in codes {
        let Some(&l) = lens.get(c as usize) else {
            return Err(Error::corrupt(format!(
                "string code {c} outside a dictionary of {n}"
            )));
        };
        end += l;
        out.offsets.push(end);
    }
    if end > MAX_DECODED_BYTES {
        return Err(Error::corrupt(format!(
            "strings decode to {end} bytes, more than the {MAX_DECODED_BYTES} a chunk may hold"
        )));
    }
    let total = end as usize;
    out.data.clear();
    let longest = lens.iter().copied().max().unwrap_or(0) as usize;
    // A padded copy of the dictionary pays off when it is not much larger than the output.
    let padded = |slot: usize| longest <= slot && n <= codes.len().max(SHORT_SLOT_ENTRIES);
    if padded(16) {
        gather_padded::<16>(codes, dict, &out.offsets, total, &mut out.data);
    } else if padded(32) {
        gather_padded::<32>(codes, dict, &out.offsets, total, &mut out.data);
    } else if padded(64) {
        gather_padded::<64>(codes, dict, &out.offsets, total, &mut out.data);
    } else {
        out.data.reserve(total);
        for &c in codes {
            let (s, e) = (
                dict.offsets[c as usize] as usize,
                dict.offsets[c as usize + 1] as usize,
            );
            out.data.extend_from_slice(&dict.data[s..e]);
        }
    }
    Ok(())
}

/// Writes each string `dict[codes[i]]` at `starts[i]` of `data` (cleared, `total` bytes once
/// written) with one `S`-byte copy from a padded slot of the dictionary: every entry has at
/// most `S` bytes, and the copy's bytes past the string are overwritten by the next ones (or
/// lie past `total`). Codes must have been checked, and `starts` must be the strings' offsets
/// (a prefix sum of their lengths ending at `total`).
fn gather_padded<const S: usize>(
    codes: &[u32],
    dict: &ByteStrings,
    starts: &[u64],
    total: usize,
    data: &mut Vec<u8>,
) {
    let mut slots = vec![[0u8; S]; dict.len()];
    for (slot, w) in slots.iter_mut().zip(dict.offsets.windows(2)) {
        let s = &dict.data[w[0] as usize..w[1] as usize];
        slot[..s.len()].copy_from_slice(s);
    }
    data.reserve(total + S);
    let base = data.as_mut_ptr();
    for (&c, &start) in codes.iter().zip(starts) {
        let slot = &slots[c as usize];
        // SAFETY: `start` is an offset below `total` (offsets are a prefix sum of the
        // lengths ending at `total`), and the allocation holds `total + S` bytes, so the
        // S-byte store stays inside it; the source is an S-byte array.
        unsafe {
            std::ptr::copy_nonoverlapping(slot.as_ptr(), base.add(start as usize), S);
        }
    }
    // SAFETY: every byte below `total` was written: each string's bytes are stored at its
    // offset, and the offsets tile 0..total with the strings' lengths.
    unsafe { data.set_len(total) };
}

/// What `strdict` is: its id, name, child slots, GPU decoding and part in the search.
pub const DESCRIPTOR: crate::Descriptor = crate::Descriptor {
    id: 11,
    name: "strdict",
    slots: &[
        Slot {
            name: "codes",
            default: "bitpack",
        },
        Slot {
            name: "dict",
            default: "plain",
        },
    ],
    leaf_for_numbers: false,
    gpu: crate::GpuDecode {
        children: crate::ChildPlace::Segments(&["codes"]),
        ..crate::GpuDecode::parallel(Pattern::GroupParallel)
    },
    search: crate::Search {
        role: crate::Role::Skip,
        string_root: true,
        uniform: false,
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{plan, random, round_trip};

    fn strings(items: &[&[u8]]) -> Values {
        let mut b = ByteStrings::default();
        b.offsets.push(0);
        for s in items {
            b.data.extend_from_slice(s);
            b.offsets.push(b.data.len() as u64);
        }
        Values::Bytes(b)
    }

    #[test]
    fn round_trips_edge_cases() -> Result<()> {
        let long = vec![b'x'; 40];
        let cases: Vec<Vec<&[u8]>> = vec![
            vec![],
            vec![b""],
            vec![b"", b"", b""],
            vec![b"a", b"b", b"a"],
            vec![b"exactly sixteen!", b"seventeen bytes!!", b"s"],
            vec![&long, b"short", &long],
            vec![&[0, 255, 128], &[0], b"", &[0, 255, 128]],
        ];
        for items in cases {
            let v = strings(&items);
            for p in [
                "strdict",
                "strdict(codes: for | bitpack, dict: plain(lengths: bitpack))",
                "strdict(codes: rle(values: bitpack, runs: bitpack))",
            ] {
                round_trip(&plan(p), &v)?;
            }
        }
        Ok(())
    }

    #[test]
    fn codes_follow_sorted_order() -> Result<()> {
        let v = strings(&[b"pear", b"apple", b"fig", b"apple"]);
        let Values::Bytes(b) = &v else { unreachable!() };
        let (dict, codes) = build(b)?;
        assert_eq!(dict.get(0), Some(&b"apple"[..]));
        assert_eq!(dict.get(2), Some(&b"pear"[..]));
        assert_eq!(codes, vec![2, 0, 1, 0]);
        Ok(())
    }

    #[test]
    fn random_low_cardinality() -> Result<()> {
        let mut r = random(7);
        let words: Vec<Vec<u8>> = (0..37)
            .map(|i| (0..(i % 23)).map(|_| (r() % 256) as u8).collect())
            .collect();
        let items: Vec<&[u8]> = (0..5000).map(|_| &words[(r() % 37) as usize][..]).collect();
        let v = strings(&items);
        let bytes = round_trip(&plan("strdict"), &v)?;
        assert!(bytes.len() < v.plain_size() / 4);
        Ok(())
    }

    #[test]
    fn every_slot_size_and_the_unpadded_copy_gather_the_same() -> Result<()> {
        // Longest entries on each side of the 16, 32 and 64-byte slots; dictionaries smaller
        // and larger than the codes (and than the padded copy's entry limit).
        let mut r = random(11);
        for longest in [1usize, 15, 16, 17, 31, 32, 33, 63, 64, 65, 200] {
            for (entries, rows) in [(3usize, 1000usize), (50, 20), (5000, 100), (5000, 9000)] {
                let dict: Vec<Vec<u8>> = (0..entries)
                    .map(|i| {
                        let len = if i == 0 {
                            longest
                        } else {
                            (r() as usize) % (longest + 1)
                        };
                        (0..len).map(|_| (r() % 256) as u8).collect()
                    })
                    .collect();
                let Values::Bytes(d) = strings(&dict.iter().map(Vec::as_slice).collect::<Vec<_>>())
                else {
                    unreachable!()
                };
                let codes: Vec<u32> = (0..rows).map(|_| (r() % entries as u64) as u32).collect();
                let mut out = ByteStrings {
                    offsets: vec![7],
                    data: vec![1, 2, 3],
                };
                gather(&codes, &d, &mut out)?;
                let want: Vec<&[u8]> = codes.iter().map(|&c| &dict[c as usize][..]).collect();
                let Values::Bytes(want) = strings(&want) else {
                    unreachable!()
                };
                assert_eq!(
                    out, want,
                    "longest {longest}, {entries} entries, {rows} rows"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn bad_codes_are_errors() -> Result<()> {
        let b = ByteStrings {
            offsets: vec![0, 1, 3],
            data: b"abc".to_vec(),
        };
        let mut out = ByteStrings::default();
        assert!(gather(&[0, 1, 2], &b, &mut out).is_err());
        gather(&[1, 0, 1], &b, &mut out)?;
        assert_eq!(out.data, b"bcabc");
        assert_eq!(out.offsets, vec![0, 2, 3, 5]);
        Ok(())
    }
}
