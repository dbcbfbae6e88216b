//! GPU encoding of text checked byte for byte against the CPU encoder: `chardict16`, and
//! `chartable` with one- and two-tier tables, one table or many, on edge-case sizes, every byte
//! value, random bytes and a few MB of English-like text; the CPU decoder then decodes the
//! GPU's node back to the input.
//!
//! Without a GPU these tests print that they skipped and pass; with `ZIPFLOW_REQUIRE_GPU=1`
//! a missing GPU fails them.

mod common;
use common::{gpu, rng};

use zipflow_core::{IntVec, Plan, Result, Values};
use zipflow_cuda::Gpu;
use zipflow_cuda::encode::{TableChoice, TextCoder, encode_text, encode_text_on_device};
use zipflow_encodings::{EncodedNode, NodeView, chardict, decode_bytes, encode};

/// English-like text: words from a fixed list drawn by a seeded generator, some commas and
/// line breaks.
fn text(seed: u64, n: usize) -> Vec<u8> {
    const WORDS: &[&str] = &[
        "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be",
        "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at", "which", "but",
        "have", "an", "had", "they", "you", "were", "their", "one", "all", "We", "Mr.", "Pickwick",
        "quoth", "zephyr", "jumbled", "Oxford", "mixed", "\n",
    ];
    let mut r = rng(seed);
    let mut t = Vec::with_capacity(n + 16);
    while t.len() < n {
        t.extend_from_slice(WORDS[(r() % WORDS.len() as u64) as usize].as_bytes());
        t.push(if r().is_multiple_of(11) { b',' } else { b' ' });
    }
    t.truncate(n);
    t
}

fn random(seed: u64, n: usize) -> Vec<u8> {
    let mut r = rng(seed);
    (0..n).map(|_| r() as u8).collect()
}

/// Digits, text and noise in runs of a few 1024-byte blocks: several tables pay off.
fn mixed(seed: u64, n: usize) -> Vec<u8> {
    let mut r = rng(seed);
    let t = text(seed, n);
    let mut out = Vec::with_capacity(n + 5 * 1024);
    while out.len() < n {
        let run = (1 + r() % 5) as usize * 1024;
        match r() % 3 {
            0 => out.extend((0..run).map(|_| b"0123456789,\n"[(r() % 12) as usize])),
            1 => out.extend_from_slice(&t[..run.min(t.len())]),
            _ => out.extend((0..run).map(|_| r() as u8)),
        }
    }
    out.truncate(n);
    out
}

/// Labelled inputs: edge sizes around a chunk, sizes that are not multiples of 4 or 8, every
/// byte value, chunks whose boundaries fall on word boundaries (all spaces: 5120 bits a
/// chunk) and off them, random bytes and text.
fn cases() -> Vec<(String, Vec<u8>)> {
    let mut cases = vec![
        ("empty".to_string(), Vec::new()),
        ("one coded byte".into(), b"e".to_vec()),
        ("one escaped byte".into(), vec![0xff]),
        ("every byte value".into(), (0..=255u8).collect()),
        (
            "every byte value, cycled".into(),
            (0..=255u8).cycle().take(3 * 1024 + 7).collect(),
        ),
        ("spaces".into(), vec![b' '; 4096 + 3]),
        ("escapes".into(), vec![b'Z'; 2049]),
    ];
    for n in [
        1, 2, 3, 5, 7, 31, 33, 1023, 1024, 1025, 2047, 4093, 8190, 8197, 65_537,
    ] {
        cases.push((format!("text of {n}"), text(n as u64, n)));
        cases.push((format!("random {n}"), random(n as u64, n)));
    }
    cases.push(("mixed 300001".into(), mixed(5, 300_001)));
    cases
}

fn cpu_node(plan: &str, data: &[u8]) -> Result<EncodedNode> {
    let plan: Plan = plan.parse()?;
    encode(&plan, &Values::Int(IntVec::U8(data.to_vec())))
}

/// The coder that gives `node`'s layout: the CPU's table choice for `chartable`.
fn coder_of(node: &EncodedNode) -> Result<TextCoder> {
    if node.id == chardict::ID {
        return Ok(TextCoder::CharDict16);
    }
    let bytes = node.to_bytes()?;
    Ok(TextCoder::CharTable(TableChoice::of_node(
        &NodeView::parse(&bytes)?,
    )?))
}

/// Panics with where `got` and `want` first differ.
fn assert_same(label: &str, got: &EncodedNode, want: &EncodedNode) {
    if got == want {
        return;
    }
    let first = |a: &[u8], b: &[u8]| a.iter().zip(b).position(|(x, y)| x != y);
    let buf = |n: &EncodedNode, i: usize| n.buffers.get(i).cloned().unwrap_or_default();
    panic!(
        "{label}: the GPU's node differs from the CPU's: meta {:?} vs {:?}; stream of {} vs {} \
         bytes, first difference at byte {:?}; index of {} vs {} bytes, first difference at \
         byte {:?}",
        got.meta,
        want.meta,
        buf(got, 0).len(),
        buf(want, 0).len(),
        first(&buf(got, 0), &buf(want, 0)),
        buf(got, 1).len(),
        buf(want, 1).len(),
        first(&buf(got, 1), &buf(want, 1)),
    );
}

/// Encodes `data` on the GPU as the CPU's `plan` node would be, compares, and decodes it on
/// the CPU. Returns the coder.
fn check(gpu: &Gpu, label: &str, plan: &str, data: &[u8]) -> Result<TextCoder> {
    let want = cpu_node(plan, data)?;
    let coder = coder_of(&want)?;
    let done = encode_text(gpu, data, &coder)?;
    let label = format!("{label} ({plan}, {} bytes)", data.len());
    assert_same(&label, &done.node, &want);
    let t = done.times;
    assert!(t.kernel_ms >= 0.0 && t.upload_ms >= 0.0 && t.download_ms >= 0.0);
    let back = decode_bytes(&done.node.to_bytes()?)?;
    assert!(
        back == Values::Int(IntVec::U8(data.to_vec())),
        "{label}: the CPU decodes the GPU's node to other bytes"
    );
    Ok(coder)
}

#[test]
fn chardict16_equals_the_cpu_encoder() -> Result<()> {
    let Some(gpu) = gpu("chardict16_equals_the_cpu_encoder") else {
        return Ok(());
    };
    for (label, data) in cases() {
        check(&gpu, &label, "chardict16", &data)?;
    }
    Ok(())
}

#[test]
fn chardict16_equals_the_cpu_encoder_on_megabytes_of_text() -> Result<()> {
    let Some(gpu) = gpu("chardict16_equals_the_cpu_encoder_on_megabytes_of_text") else {
        return Ok(());
    };
    for n in [4 << 20, (3 << 20) + 5] {
        check(&gpu, "text", "chardict16", &text(n as u64, n))?;
    }
    check(&gpu, "random", "chardict16", &random(11, (1 << 20) + 1))?;
    Ok(())
}

#[test]
fn chartable_equals_the_cpu_encoder() -> Result<()> {
    let Some(gpu) = gpu("chartable_equals_the_cpu_encoder") else {
        return Ok(());
    };
    let (mut one_tier, mut two_tiers, mut several) = (false, false, false);
    let mut inputs = cases();
    inputs.push((
        "four letters".into(),
        text(1, 9000)
            .iter()
            .map(|c| b"acgt"[usize::from(c % 4)])
            .collect(),
    ));
    inputs.push(("text of 2 MB".into(), text(2, (2 << 20) + 3)));
    for (label, data) in &inputs {
        for plan in ["chartable(1)", "chartable(4)", "chartable(16)"] {
            if let TextCoder::CharTable(choice) = check(&gpu, label, plan, data)? {
                one_tier |= choice.codes().iter().any(|c| c.index_bits().1.is_none());
                two_tiers |= choice.codes().iter().any(|c| c.index_bits().1.is_some());
                several |= choice.codes().len() > 1;
            }
        }
    }
    assert!(
        one_tier && two_tiers && several,
        "{one_tier} {two_tiers} {several}"
    );
    Ok(())
}

#[test]
fn chartable_with_a_given_table_equals_the_cpu_encoder() -> Result<()> {
    let Some(gpu) = gpu("chartable_with_a_given_table_equals_the_cpu_encoder") else {
        return Ok(());
    };
    // A table the caller gives for every block: `chartable(1)`'s node when it is the table
    // that training picks.
    let data: Vec<u8> = text(8, 50_000);
    let want = cpu_node("chartable(1)", &data)?;
    let TextCoder::CharTable(choice) = coder_of(&want)? else {
        panic!("not a chartable node");
    };
    let single = TableChoice::single(choice.codes()[0].clone(), data.len());
    assert_eq!(single, choice);
    let done = encode_text(&gpu, &data, &TextCoder::CharTable(single))?;
    assert_same("a given table", &done.node, &want);
    Ok(())
}

#[test]
fn device_resident_input_encodes_in_place() -> Result<()> {
    let Some(gpu) = gpu("device_resident_input_encodes_in_place") else {
        return Ok(());
    };
    let data = mixed(21, 200_003);
    let input = gpu
        .stream()
        .clone_htod(&data)
        .map_err(|e| zipflow_core::Error::external("upload", e))?;
    for plan in ["chardict16", "chartable(8)"] {
        let want = cpu_node(plan, &data)?;
        let coder = coder_of(&want)?;
        let done = encode_text_on_device(&gpu, &input, &coder)?;
        assert_same(plan, &done.node, &want);
        assert_eq!(done.times.upload_ms, 0.0);
        // Again, from the same buffers: nothing of the first run leaks into the second.
        let again = encode_text_on_device(&gpu, &input, &coder)?;
        assert_same(plan, &again.node, &want);
    }
    Ok(())
}
