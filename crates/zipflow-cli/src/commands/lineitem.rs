//! TPC-H lineitem as a stream of batches, and a check of a written file against it.
//!
//! `zipflow tpch` never holds the table: it generates it a few parts at a time, compresses
//! as it goes, and for verification generates it again (the generator is deterministic) and
//! compares it with the file row group by row group. Memory is then a few parts of
//! generated rows and one decoded row group, whatever the scale factor.

use anyhow::{Result, bail};
use arrow::array::ArrayRef;
use arrow::record_batch::RecordBatch;
use rayon::prelude::*;
use std::collections::VecDeque;
use tpchgen::generators::LineItemGenerator;
use tpchgen_arrow::LineItemArrow;
use zipflow_encodings::Scratch;
use zipflow_format::ZfFile;

/// Rows of Arrow batches the generator hands out.
const BATCH_ROWS: usize = 64 * 1024;

/// Parts per unit of scale factor: about 94,000 rows (45 MB of Arrow arrays) a part.
const PARTS_PER_SF: f64 = 64.0;

/// Lineitem at one scale factor, in order, generated a window of parts at a time (the parts
/// of a window in parallel).
pub struct Lineitem {
    sf: f64,
    parts: i32,
    next_part: i32,
    window: i32,
    ready: VecDeque<RecordBatch>,
    failed: bool,
}

impl Lineitem {
    /// The table at `sf`; at most one window of parts (one per thread) is held at a time.
    pub fn new(sf: f64) -> Lineitem {
        let parts = (sf * PARTS_PER_SF).ceil().clamp(1.0, 1_000_000.0) as i32;
        Lineitem {
            sf,
            parts,
            next_part: 1,
            window: i32::try_from(rayon::current_num_threads())
                .unwrap_or(1)
                .max(1),
            ready: VecDeque::new(),
            failed: false,
        }
    }

    /// Generates the next window of parts.
    fn refill(&mut self) -> Result<()> {
        let first = self.next_part;
        let last = (first + self.window - 1).min(self.parts);
        let (sf, parts) = (self.sf, self.parts);
        let generated = (first..=last)
            .into_par_iter()
            .map(|part| {
                LineItemArrow::new(LineItemGenerator::new(sf, part, parts))
                    .with_batch_size(BATCH_ROWS)
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("generating lineitem parts {first}..={last}: {e}"))?;
        self.ready.extend(generated.into_iter().flatten());
        self.next_part = last + 1;
        Ok(())
    }
}

impl Iterator for Lineitem {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Result<RecordBatch>> {
        while self.ready.is_empty() && self.next_part <= self.parts && !self.failed {
            if let Err(e) = self.refill() {
                self.failed = true;
                return Some(Err(e));
            }
        }
        self.ready.pop_front().map(Ok)
    }
}

/// Compares a written file with the batches it was written from, fed in order: each row
/// group is decoded once (its columns in parallel) and compared with the rows it covers.
pub struct Verifier<'a> {
    zf: &'a ZfFile,
    /// The next row group to decode.
    next_chunk: usize,
    /// The decoded row group, one array per column, and how many of its rows were compared.
    current: Vec<ArrayRef>,
    used: usize,
}

impl<'a> Verifier<'a> {
    /// A verifier at the file's first row.
    pub fn new(zf: &'a ZfFile) -> Verifier<'a> {
        Verifier {
            zf,
            next_chunk: 0,
            current: Vec::new(),
            used: 0,
        }
    }

    fn decode_next(&mut self) -> Result<()> {
        let i = self.next_chunk;
        if i >= self.zf.num_chunks() {
            bail!(
                "{}: more rows went in than the file's {} rows",
                self.zf.path().display(),
                self.zf.num_rows()
            );
        }
        self.current = (0..self.zf.columns().len())
            .into_par_iter()
            .map(|c| Ok(self.zf.read_array(c, i, &mut Scratch::default())?))
            .collect::<Result<Vec<_>>>()?;
        self.next_chunk += 1;
        self.used = 0;
        Ok(())
    }

    /// Compares the next `batch.num_rows()` rows of the file with `batch`.
    pub fn check(&mut self, batch: &RecordBatch) -> Result<()> {
        let mut done = 0;
        while done < batch.num_rows() {
            if self.used == self.current.first().map_or(0, |a| a.len()) {
                self.decode_next()?;
            }
            let available = self.current.first().map_or(0, |a| a.len()) - self.used;
            let n = available.min(batch.num_rows() - done);
            let chunk = self.next_chunk - 1;
            let (used, current) = (self.used, &self.current);
            let schema = batch.schema();
            (0..current.len()).into_par_iter().try_for_each(|c| {
                if current[c].slice(used, n).as_ref() != batch.column(c).slice(done, n).as_ref() {
                    bail!(
                        "{}: round trip mismatch in column `{}`, chunk {chunk}, rows {} to {}",
                        self.zf.path().display(),
                        schema.field(c).name(),
                        used,
                        used + n
                    );
                }
                Ok(())
            })?;
            self.used += n;
            done += n;
        }
        Ok(())
    }

    /// Fails unless every row of the file was compared.
    pub fn finish(self) -> Result<()> {
        let seen = self.zf.num_chunks().min(self.next_chunk);
        let rest = self.current.first().map_or(0, |a| a.len()) - self.used;
        if seen < self.zf.num_chunks() || rest > 0 {
            bail!(
                "{}: the file holds more rows than went in (row group {} of {} not reached)",
                self.zf.path().display(),
                seen,
                self.zf.num_chunks()
            );
        }
        Ok(())
    }
}
