//! Child streams recently split off by estimates.
//!
//! A plan search scores hundreds of plans on one small sample, and many of them start with
//! the same primitive (`dict(codes: ..., values: ...)` in every combination), so each would
//! split the same stream into the same children again. Estimates keep the last few splits of
//! small streams per thread, found by comparing the whole input (never by a hash alone, so a
//! hit is always the same stream).

use std::cell::RefCell;
use std::rc::Rc;

use zipflow_core::{Error, IntVec, Plan, Result, Values};

/// What a primitive makes of a stream before its children are encoded.
#[derive(Debug)]
pub struct Split {
    /// Bytes of the node itself: header, child entries, metadata and buffers.
    pub own: usize,
    /// The child streams, in slot order.
    pub children: Vec<Values>,
}

/// Largest stream kept: search samples are a few thousand values; whole chunks are not kept.
const MAX_LEN: usize = 1 << 14;
/// Splits kept per thread.
const ENTRIES: usize = 64;
/// Bytes of streams kept per thread (inputs copied and child streams), so a thread that
/// searched keeps little memory once it is done.
const BUDGET: usize = 8 << 20;

/// Which stream an entry split.
enum Key {
    /// A stream given from outside, kept as a copy (with its fingerprint) and compared whole.
    Content(u64, Values),
    /// Child `k` of another kept split, held here so its memory stays what it was: a stream
    /// at the same address and of the same length is that child, with no need to compare.
    Child(Rc<Split>, usize),
}

struct Entry {
    name: &'static str,
    params: Vec<i64>,
    key: Key,
    /// Bytes this entry holds: its input copy and its child streams.
    bytes: usize,
    split: Rc<Split>,
}

thread_local! {
    static SPLITS: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
}

/// Where a non-empty stream's values are, and how many bytes: its identity while its owner
/// lives.
fn place(v: &Values) -> Option<(*const u8, usize)> {
    match v {
        Values::Int(i) if !i.is_empty() => Some((i.as_bytes().as_ptr(), i.as_bytes().len())),
        _ => None,
    }
}

/// How primitive `name` with `plan`'s parameters splits `input`: from a recent identical call,
/// or by `split`.
pub(crate) fn split(
    name: &'static str,
    plan: &Plan,
    input: &Values,
    split: impl FnOnce() -> Result<Split>,
) -> Result<Rc<Split>> {
    let Values::Int(ints) = input else {
        return split().map(Rc::new);
    };
    if input.len() > MAX_LEN {
        return split().map(Rc::new);
    }
    let here = place(input);
    let (hit, key) = SPLITS.with_borrow(|s| {
        // Is `input` a child of a kept split? Then it is known by that, not by its bytes.
        let parent = here.and_then(|here| {
            s.iter().find_map(|e| {
                let k = e
                    .split
                    .children
                    .iter()
                    .position(|c| place(c) == Some(here) && c.ptype() == input.ptype())?;
                Some((Rc::clone(&e.split), k))
            })
        });
        let print = if parent.is_none() {
            fingerprint(input)
        } else {
            0
        };
        let same = |e: &&Entry| {
            let stream = match (&e.key, &parent) {
                (Key::Child(p, k), Some((q, j))) => Rc::ptr_eq(p, q) && k == j,
                (Key::Content(p, _), None) => *p == print,
                _ => false,
            };
            stream
                && e.name == name
                && (e.params.is_empty() && plan.params.is_empty() || e.params == plan.params)
                && match &e.key {
                    Key::Content(_, v) => v == input,
                    Key::Child(..) => true,
                }
        };
        let hit = s.iter().find(same).map(|e| Rc::clone(&e.split));
        let key = match parent {
            Some((p, k)) => Key::Child(p, k),
            None => Key::Content(print, Values::Int(ints.clone())),
        };
        (hit, key)
    });
    if let Some(found) = hit {
        return Ok(found);
    }
    let made = Rc::new(split()?);
    let bytes = made.children.iter().map(Values::plain_size).sum::<usize>()
        + match &key {
            Key::Content(_, v) => v.plain_size(),
            Key::Child(..) => 0,
        };
    SPLITS.with_borrow_mut(|s| {
        let mut held: usize = s.iter().map(|e| e.bytes).sum();
        while !s.is_empty() && (s.len() >= ENTRIES || held + bytes > BUDGET) {
            held -= s.remove(0).bytes;
        }
        s.push(Entry {
            name,
            params: plan.params.clone(),
            key,
            bytes,
            split: Rc::clone(&made),
        });
    });
    Ok(made)
}

/// [`split`] for a primitive of integers: an error naming it for any other stream, else the
/// split `make` makes of the integers.
pub(crate) fn split_ints(
    name: &'static str,
    plan: &Plan,
    input: &Values,
    make: impl FnOnce(&IntVec) -> Result<Split>,
) -> Option<Result<Rc<Split>>> {
    let Values::Int(v) = input else {
        return Some(Err(Error::plan(plan, format!("{name} needs integers"))));
    };
    Some(split(name, plan, input, || make(v)))
}

/// A cheap fingerprint of a stream's bytes (its length and 32 words spread over it): it tells
/// most different streams apart without reading them whole.
fn fingerprint(v: &Values) -> u64 {
    use std::hash::Hasher;
    let Values::Int(ints) = v else {
        return 0;
    };
    let bytes = ints.as_bytes();
    let mut h = rustc_hash::FxHasher::default();
    h.write_usize(bytes.len());
    let words = bytes.len() / 8;
    for k in 0..32.min(words) {
        let at = k * words / 32 * 8;
        h.write_u64(u64::from_le_bytes(
            bytes[at..at + 8].try_into().unwrap_or_default(),
        ));
    }
    for &b in &bytes[words * 8..] {
        h.write_u8(b);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipflow_core::IntVec;

    #[test]
    fn same_input_splits_once_and_different_inputs_or_params_do_not_collide() -> Result<()> {
        let a = Values::Int(IntVec::U16(vec![1, 2, 3]));
        let b = Values::Int(IntVec::U16(vec![1, 2, 4]));
        let p = Plan::new("test");
        let p7 = Plan::new("test").param(7);
        let mut calls = 0;
        let mut run = |plan: &Plan, v: &Values| {
            split("test", plan, v, || {
                calls += 1;
                Ok(Split {
                    own: 0,
                    children: vec![v.clone()],
                })
            })
        };
        assert_eq!(run(&p, &a)?.children[0], a);
        assert_eq!(run(&p, &a)?.children[0], a);
        assert_eq!(run(&p, &b)?.children[0], b);
        assert_eq!(run(&p7, &b)?.children[0], b);
        assert_eq!(calls, 3);
        Ok(())
    }
}
