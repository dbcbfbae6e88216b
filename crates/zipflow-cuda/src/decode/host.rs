//! The host's side of a column: each chunk's tree checked and its descriptor filled, the
//! chunks grouped by plan shape, the input buffer laid out, before anything reaches a GPU.

use super::{BATCH_CHUNKS, INPUT_ALIGN, offset_width, offsets_start, tunable};
use crate::codegen::strings::fits_narrow_stage;
use crate::codegen::{Kernel, KernelKind, SLOT_OUT, generate};
use crate::ops::Filler;
use crate::shape::Shape;
use std::collections::HashMap;
use std::ops::Range;
use zipflow_core::{Error, PType, Result, VECTOR_LEN};
use zipflow_encodings::NodeView;

/// Host-side state of one group while descriptors are filled.
pub(crate) struct HostGroup {
    pub(crate) kernel: Kernel,
    pub(crate) prm: Vec<u64>,
    pub(crate) work: Vec<u32>,
    pub(crate) expand_work: Vec<u32>,
    /// Whether every segment so far is short enough on average for the expansion with the
    /// smaller stage ([`fits_narrow_stage`]).
    pub(crate) narrow: bool,
}

/// A column laid out on the host: its groups' descriptors and work lists, where each tree
/// (and what the host derived from it) goes in the input buffer, and its batches.
pub(crate) struct HostColumn {
    pub(crate) groups: Vec<HostGroup>,
    by_key: HashMap<String, usize>,
    /// Input layout: each tree at an aligned offset, followed by what the host derived from
    /// it for the kernels (`ans` cumulative frequencies, tables).
    pub(crate) offsets: Vec<usize>,
    pub(crate) extras: Vec<(usize, Vec<u8>)>,
    /// Bytes of the input buffer.
    pub(crate) total: usize,
    /// Bytes of the strings of a byte-string column.
    data_total: u64,
    pub(crate) rows: usize,
    pub(crate) scratch_bytes: usize,
    /// Per batch: the bytes of the input it covers, and per group the range of work entries.
    pub(crate) batches: Vec<(Range<usize>, Vec<Range<usize>>)>,
    /// Bytes of the strings of a byte-string column, and the width of its offsets.
    pub(crate) string_bytes: usize,
    pub(crate) width: usize,
}

impl HostColumn {
    /// Lays out serialised node trees, one per chunk, all decoding to `ptype` (byte strings
    /// with each chunk's string bytes where the footer records them); `threads` gives a
    /// tuned shape's block size.
    pub(crate) fn plan(
        ptype: PType,
        trees: &[&[u8]],
        string_bytes: Option<&[u64]>,
        threads: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<HostColumn> {
        if let Some(s) = string_bytes
            && s.len() != trees.len()
        {
            return Err(Error::invalid(format!(
                "{} string byte counts for {} chunks",
                s.len(),
                trees.len()
            )));
        }
        let mut h = HostColumn {
            groups: Vec::new(),
            by_key: HashMap::new(),
            offsets: Vec::with_capacity(trees.len() + 1),
            extras: Vec::new(),
            total: 0,
            data_total: 0,
            rows: 0,
            scratch_bytes: 0,
            batches: Vec::new(),
            string_bytes: 0,
            width: 0,
        };
        for (b, batch) in trees.chunks(BATCH_CHUNKS).enumerate() {
            let first = b * BATCH_CHUNKS;
            let start_work: Vec<usize> = h.groups.iter().map(|g| g.work.len() / 2).collect();
            for (i, tree) in batch.iter().enumerate() {
                let c = first + i;
                h.add_chunk(c, tree, ptype, string_bytes.map(|s| s[c]), threads)?;
            }
            let bytes_end = h.total;
            let mut ranges: Vec<Range<usize>> = h
                .groups
                .iter()
                .enumerate()
                .map(|(gi, g)| start_work.get(gi).copied().unwrap_or(0)..g.work.len() / 2)
                .collect();
            ranges.truncate(h.groups.len());
            h.batches.push((
                h.offsets.get(first).copied().unwrap_or(h.total)..bytes_end,
                ranges,
            ));
        }
        h.string_bytes = usize::try_from(h.data_total)
            .map_err(|_| Error::unsupported("a string column larger than the address space"))?;
        h.width = offset_width(h.string_bytes);
        if ptype == PType::Bytes {
            // The offsets follow the strings' bytes; the first slot held the chunk's first
            // row until the width was known.
            let first = offsets_start(h.string_bytes) as u64;
            for g in &mut h.groups {
                let base = g.kernel.nodes[0].base;
                for d in g.prm.chunks_exact_mut(g.kernel.nparams) {
                    d[SLOT_OUT] = first + d[SLOT_OUT] * h.width as u64;
                    d[base + 3] = h.width as u64;
                }
            }
        }
        Ok(h)
    }

    /// The group of chunks of `shape`, its kernel generated with the first.
    fn group_of(&mut self, shape: &Shape, threads: &dyn Fn(&str) -> Option<u32>) -> Result<usize> {
        let key = shape.key();
        if let Some(&gi) = self.by_key.get(&key) {
            return Ok(gi);
        }
        let mut kernel = generate(shape)?;
        if tunable(&kernel)
            && let Some(t) = threads(&kernel.key)
        {
            kernel.threads = t;
        }
        self.groups.push(HostGroup {
            kernel,
            prm: Vec::new(),
            work: Vec::new(),
            expand_work: Vec::new(),
            narrow: true,
        });
        self.by_key.insert(key, self.groups.len() - 1);
        Ok(self.groups.len() - 1)
    }

    /// Checks chunk `c` (`tree`), fills its descriptor in its shape's group, and places it
    /// (and what the host derives from it) in the input buffer.
    fn add_chunk(
        &mut self,
        c: usize,
        tree: &[u8],
        ptype: PType,
        hint: Option<u64>,
        threads: &dyn Fn(&str) -> Option<u32>,
    ) -> Result<()> {
        self.offsets.push(self.total);
        let node = NodeView::parse(tree).map_err(|e| e.at_chunk(c as u32))?;
        if node.ptype != ptype {
            return Err(Error::corrupt(format!(
                "values tree holds {} values, the column is {ptype}",
                node.ptype
            ))
            .at_chunk(c as u32));
        }
        let shape = Shape::of(&node).map_err(|e| e.at_chunk(c as u32))?;
        let gi = self.group_of(&shape, threads)?;
        let total = self.total;
        let g = &mut self.groups[gi];
        let index = (g.prm.len() / g.kernel.nparams) as u32;
        let at = g.prm.len();
        g.prm.resize(at + g.kernel.nparams, 0);
        let extra_at = (total + tree.len()).next_multiple_of(16);
        let mut filler = Filler {
            base: tree.as_ptr() as usize,
            device_offset: total as u64,
            scratch: &mut self.scratch_bytes,
            kernel: &g.kernel,
            prm: &mut g.prm[at..],
            extra: Vec::new(),
            extra_at: extra_at as u64,
            string_bytes: None,
        };
        filler.prm[SLOT_OUT] = self.rows as u64;
        filler.fill(&node, 0).map_err(|e| e.at_chunk(c as u32))?;
        if ptype == PType::Bytes {
            let strings = StringChunk {
                node: &node,
                c,
                index,
                hint,
            };
            strings.fill(
                &mut filler,
                &mut g.narrow,
                &mut g.expand_work,
                &mut self.data_total,
            )?;
        }
        self.total = if filler.extra.is_empty() {
            (total + tree.len()).next_multiple_of(INPUT_ALIGN)
        } else {
            let end = extra_at + filler.extra.len();
            self.extras
                .push((extra_at, std::mem::take(&mut filler.extra)));
            end.next_multiple_of(INPUT_ALIGN)
        };
        match g.kernel.kind {
            KernelKind::Tile => {
                let step = crate::codegen::TILE_VECTORS as usize;
                for v in (0..node.len.div_ceil(VECTOR_LEN)).step_by(step) {
                    g.work.extend([index, v as u32]);
                }
            }
            KernelKind::Chunk => g.work.extend([index, 0]),
        }
        self.rows += node.len;
        Ok(())
    }
}

/// A byte-string chunk: its root `node`, its index `c` in the column and `index` in its
/// group, and the footer's count of its bytes.
struct StringChunk<'n, 'a> {
    node: &'n NodeView<'a>,
    c: usize,
    index: u32,
    hint: Option<u64>,
}

impl StringChunk<'_, '_> {
    /// Fills the string root's slots (where its bytes go, their number, its segment table)
    /// and the expansion's work list; `narrow` stays set while every segment fits the
    /// smaller stage.
    fn fill(
        &self,
        filler: &mut Filler<'_>,
        narrow: &mut bool,
        expand_work: &mut Vec<u32>,
        data_total: &mut u64,
    ) -> Result<()> {
        let (node, c, index, hint) = (self.node, self.c, self.index, self.hint);
        let kernel = filler.kernel;
        let n = match (filler.string_bytes, hint) {
            (Some(t), Some(h)) if t != h => {
                return Err(Error::corrupt(format!(
                    "chunk holds {t} bytes of strings, the footer says {h}"
                ))
                .at_chunk(c as u32));
            }
            (Some(t), _) | (None, Some(t)) => t,
            (None, None) => {
                return Err(Error::invalid(format!(
                    "decoding `{}` strings on the GPU needs each chunk's byte count",
                    node_name(node)
                ))
                .at_chunk(c as u32));
            }
        };
        if u32::try_from(n).is_err() {
            return Err(Error::unsupported(format!(
                "a chunk of {n} bytes of strings on the GPU (at most 2^32 - 1)"
            ))
            .at_chunk(c as u32));
        }
        let base = kernel.nodes[0].base;
        filler.prm[base + 1] = *data_total;
        filler.prm[base + 2] = n;
        *data_total += n;
        // The segment table: first token and byte of every segment, then totals.
        let segments = node.len.div_ceil(kernel.segment_rows as usize).max(1);
        filler.prm[base + 4] = *filler.scratch as u64;
        *filler.scratch += (segments + 1) * 8;
        // Built from the node's row index (the first kernel copies it), else
        // summed by the first kernel.
        filler.prm[base + 5] = u64::MAX;
        let table = segment_table(node, kernel, n).map_err(|e| e.at_chunk(c as u32))?;
        // The smaller stage, when every segment's strings (else the chunk's) are
        // short enough on average for a tile to fit it.
        *narrow &= match &table {
            Some(t) => (0..segments).all(|s| {
                let rows =
                    (node.len - s * kernel.segment_rows as usize).min(kernel.segment_rows as usize);
                fits_narrow_stage(rows as u64, u64::from(t[2 * s + 3] - t[2 * s + 1]))
            }),
            None => fits_narrow_stage(node.len as u64, n),
        };
        if let Some(table) = table {
            filler
                .extra
                .resize(filler.extra.len().next_multiple_of(8), 0);
            filler.prm[base + 5] = filler.extra_at + filler.extra.len() as u64;
            for v in table {
                filler.extra.extend_from_slice(&v.to_le_bytes());
            }
        }
        let per = kernel.segments_per_block.max(1) as usize;
        for s in (0..segments).step_by(per) {
            expand_work.extend([index, s as u32]);
        }
        Ok(())
    }
}

/// The segment table of a byte-string root of `bytes` bytes decoded by `kernel`: each
/// segment's first token and first byte, then the totals, from the node's row index when its
/// entries are the segments' starts (checked here to run forwards within the totals; the
/// expansion checks each segment against its rows). `None` when the first kernel must sum it.
/// Strings of one length have arithmetic positions that no kernel sums, so their index is
/// checked here against them instead.
pub(crate) fn segment_table(
    node: &NodeView<'_>,
    kernel: &Kernel,
    bytes: u64,
) -> Result<Option<Vec<u32>>> {
    let name = node_name(node);
    let (index, tokens) = crate::ops::row_index(kernel.nodes[0].op, node, name)?;
    let (ntok, total, rows) = (tokens as u64, bytes, node.len as u64);
    let bad = |row: u64, at: (u64, u64), last: (u64, u64)| {
        Error::corrupt(format!(
            "{name} row index puts row {row} at token {} and byte {}, after token {} and byte \
             {} (of {ntok} and {total})",
            at.0, at.1, last.0, last.1
        ))
    };
    if kernel.fixed_strings {
        if let Some(ix) = &index {
            for k in 0..ix.len() {
                let row = ((k + 1) * ix.step()) as u64;
                // Below 2^64: bytes and rows are below 2^32.
                if ix.byte(k) * rows != row * total {
                    return Err(bad(row, (ix.token(k), ix.byte(k)), (0, 0)));
                }
            }
        }
        return Ok(None);
    }
    let step = kernel.segment_rows as usize;
    let segments = node.len.div_ceil(step).max(1);
    if segments > 1 && index.is_none_or(|ix| ix.step() != step) {
        return Ok(None);
    }
    let mut table = vec![0u32; 2 * (segments + 1)];
    let mut last = (0u64, 0u64);
    for s in 1..=segments {
        let at = match &index {
            Some(ix) if s < segments => (ix.token(s - 1), ix.byte(s - 1)),
            _ => (ntok, total),
        };
        if at.0 < last.0 || at.1 < last.1 || at.0 > ntok || at.1 > total {
            return Err(bad((s * step) as u64, at, last));
        }
        // Below 2^32: the totals are (checked by the caller).
        table[2 * s] = at.0 as u32;
        table[2 * s + 1] = at.1 as u32;
        last = at;
    }
    Ok(Some(table))
}

/// A node's primitive name, for messages.
pub(crate) fn node_name(node: &NodeView<'_>) -> &'static str {
    zipflow_encodings::by_id(node.id).map_or("?", |e| e.name())
}
