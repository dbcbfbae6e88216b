//! The container: header, chunk payloads, footer, trailer.
//!
//! This module knows encodings only through their serialised node trees and plan text; it
//! stores and checks bytes, and [`ZfFile::read_chunk`] hands the validated bytes to
//! [`zipflow_encodings::decode`]. `docs/format.md` draws every byte.
//!
//! ```text
//! "ZIPFLOW1" | version u16 | 0 x 6 | payload, pad to 8 | ... | footer, pad to 8
//!            | footer_len u64 | footer_xxh3 u64 | "ZFEND001"
//! ```
//!
//! From version 4 on the footer is stored as one Zstandard frame of its layout: plan texts,
//! statistics and the Arrow schema repeat from column to column and compress 3-4x, which is
//! a tenth of a small table's file.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arrow::datatypes::{Schema, SchemaRef};
use xxhash_rust::xxh3::xxh3_64;
use zipflow_core::stats::ChunkStats;
use zipflow_core::{ColumnType, Error, IntVec, PType, Result, Values};
use zipflow_encodings::{NodeView, Scratch};

mod schema;
mod source;

pub use schema::{schema_from_ipc, schema_to_ipc};
pub use source::Payload;
use source::Source;

/// First 8 bytes of every file.
pub const MAGIC: [u8; 8] = *b"ZIPFLOW1";
/// Last 8 bytes of every file.
pub const END_MAGIC: [u8; 8] = *b"ZFEND001";
/// The format version this build writes and the newest it reads.
pub const VERSION: u16 = 4;
/// The first version whose footer is stored as a Zstandard frame.
pub const COMPRESSED_FOOTER: u16 = 4;
/// Zstandard level of the footer: the default, fast and within a few percent of the best.
const FOOTER_LEVEL: i32 = 3;
/// Header size: magic, version, 6 reserved zero bytes.
pub const HEADER_LEN: usize = 16;
/// Trailer size: footer length, footer checksum, end magic.
pub const TRAILER_LEN: usize = 24;

/// Per-row validity of a chunk: `true` where the row holds a value, `false` where it is null.
pub type Validity = Vec<bool>;

/// One column as the footer lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnMeta {
    /// Column name.
    pub name: String,
    /// What the column holds; decides the physical type of its value stream.
    pub column_type: ColumnType,
    /// Whether the column may hold nulls.
    pub nullable: bool,
}

/// Index entry of one chunk of one column: where its payload is and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkMeta {
    /// Byte offset of the payload from the start of the file (a multiple of 8).
    pub offset: u64,
    /// Length of the values node tree (the payload's first part).
    pub values_len: u32,
    /// Length of the validity node tree that follows it; 0 when the chunk has no nulls.
    pub validity_len: u32,
    /// Rows in the chunk.
    pub rows: u32,
    /// Index of the chunk's first row in the table.
    pub first_row: u64,
    /// xxh3-64 of the payload (values and validity trees).
    pub checksum: u64,
    /// Size of the chunk's values in plain form (`Values::plain_size`), for ratios.
    pub plain_bytes: u64,
    /// Zone map: min, max, null count.
    pub stats: ChunkStats,
    /// The plan of the values tree, parameters resolved.
    pub plan: String,
    /// The plan of the validity tree; empty when there is none.
    pub validity_plan: String,
}

impl ChunkMeta {
    /// Payload length in bytes.
    pub fn payload_len(&self) -> u64 {
        u64::from(self.values_len) + u64::from(self.validity_len)
    }

    /// What the chunk costs on disk: its payload (values and validity trees).
    pub fn compressed_bytes(&self) -> u64 {
        self.payload_len()
    }
}

/// One chunk, encoded, as the writer receives it.
#[derive(Debug, Clone)]
pub struct EncodedChunk {
    /// The serialised values node tree.
    pub values: Vec<u8>,
    /// The serialised validity node tree (a u8 stream of 0 and 1), if the chunk has nulls.
    pub validity: Option<Vec<u8>>,
    /// Rows in the chunk.
    pub rows: u32,
    /// Size of the values in plain form (`Values::plain_size`).
    pub plain_bytes: u64,
    /// Zone map.
    pub stats: ChunkStats,
    /// Plan text of the values tree.
    pub plan: String,
    /// Plan text of the validity tree (empty when there is none).
    pub validity_plan: String,
}

fn pad8(n: u64) -> u64 {
    n.next_multiple_of(8)
}

// ---------------------------------------------------------------------------------------------
// Footer encoding

struct FooterWriter {
    out: Vec<u8>,
}

impl FooterWriter {
    fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    fn bytes(&mut self, b: &[u8]) -> Result<()> {
        let len = u32::try_from(b.len())
            .map_err(|_| Error::unsupported("a footer field longer than 4 GiB"))?;
        self.u32(len);
        self.out.extend_from_slice(b);
        Ok(())
    }
}

struct FooterReader<'a> {
    bytes: &'a [u8],
}

impl<'a> FooterReader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(Error::corrupt(format!(
                "footer truncated in {what}: {n} bytes needed, {} left",
                self.bytes.len()
            )));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    fn bytes(&mut self, what: &str) -> Result<&'a [u8]> {
        let len = self.u32(what)? as usize;
        self.take(len, what)
    }
    fn string(&mut self, what: &str) -> Result<String> {
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| Error::corrupt(format!("{what} in the footer is not UTF-8")))
    }
}

/// Everything the footer holds.
#[derive(Debug, Clone)]
struct Footer {
    total_rows: u64,
    chunk_rows: u64,
    columns: Vec<ColumnMeta>,
    schema_ipc: Vec<u8>,
    /// `chunks[column][chunk]`.
    chunks: Vec<Vec<ChunkMeta>>,
}

/// Number of row groups a table of `total_rows` rows in groups of `chunk_rows` has.
fn row_groups(total_rows: u64, chunk_rows: u64) -> u64 {
    total_rows.div_ceil(chunk_rows.max(1))
}

impl Footer {
    fn write(&self) -> Result<Vec<u8>> {
        let mut w = FooterWriter { out: Vec::new() };
        w.u16(VERSION);
        w.u64(self.total_rows);
        w.u64(self.chunk_rows);
        w.u32(u32::try_from(self.columns.len()).map_err(|_| Error::unsupported("2^32 columns"))?);
        for c in &self.columns {
            w.bytes(c.name.as_bytes())?;
            w.out.extend_from_slice(&c.column_type.to_bytes());
            w.u8(u8::from(c.nullable));
        }
        w.bytes(&self.schema_ipc)?;
        for col in &self.chunks {
            for m in col {
                w.u64(m.offset);
                w.u32(m.values_len);
                w.u32(m.validity_len);
                w.u32(m.rows);
                w.u64(m.first_row);
                w.u64(m.checksum);
                w.u64(m.plain_bytes);
                m.stats.write(&mut w.out);
                w.bytes(m.plan.as_bytes())?;
                w.bytes(m.validity_plan.as_bytes())?;
            }
        }
        Ok(w.out)
    }

    /// Parses the footer and checks every index entry against the file: offsets and lengths
    /// inside the payload area, row ranges consistent, null counts consistent with validity.
    fn read(bytes: &[u8], payload_end: u64, header_version: u16) -> Result<Footer> {
        let mut r = FooterReader { bytes };
        let version = r.u16("version")?;
        if version != header_version {
            return Err(Error::corrupt(format!(
                "footer says format version {version}, the header says {header_version}"
            )));
        }
        let total_rows = r.u64("total rows")?;
        let chunk_rows = r.u64("rows per chunk")?;
        if chunk_rows == 0 || chunk_rows > zipflow_core::MAX_CHUNK_LEN as u64 {
            return Err(Error::corrupt(format!(
                "rows per chunk is {chunk_rows}, outside 1..={}",
                zipflow_core::MAX_CHUNK_LEN
            )));
        }
        let ncols = r.u32("column count")?;
        let mut columns = Vec::new();
        for i in 0..ncols {
            let name = r.string("column name")?;
            let column_type = ColumnType::from_bytes(r.array::<4>("column type")?)
                .map_err(|e| e.at_column(&name))?;
            let nullable = match r.u8("nullable flag")? {
                0 => false,
                1 => true,
                b => {
                    return Err(Error::corrupt(format!(
                        "column {i} (`{name}`) has nullable flag {b}"
                    )));
                }
            };
            columns.push(ColumnMeta {
                name,
                column_type,
                nullable,
            });
        }
        let schema_ipc = r.bytes("Arrow schema")?.to_vec();
        let ngroups = row_groups(total_rows, chunk_rows);
        let mut chunks = Vec::with_capacity(columns.len());
        for col in &columns {
            let mut metas = Vec::new();
            for i in 0..ngroups {
                let chunk = u32::try_from(i).map_err(|_| Error::corrupt("2^32 chunks"))?;
                let m = read_entry(&mut r)
                    .and_then(|m| {
                        check_entry(&m, col, i, total_rows, chunk_rows, payload_end).map(|()| m)
                    })
                    .map_err(|e| e.at_chunk(chunk).at_column(&col.name))?;
                metas.push(m);
            }
            chunks.push(metas);
        }
        if !r.bytes.is_empty() {
            return Err(Error::corrupt(format!(
                "{} unexpected bytes at the end of the footer",
                r.bytes.len()
            )));
        }
        Ok(Footer {
            total_rows,
            chunk_rows,
            columns,
            schema_ipc,
            chunks,
        })
    }
}

fn read_entry(r: &mut FooterReader<'_>) -> Result<ChunkMeta> {
    let offset = r.u64("chunk offset")?;
    let values_len = r.u32("values length")?;
    let validity_len = r.u32("validity length")?;
    let rows = r.u32("row count")?;
    let first_row = r.u64("first row")?;
    let checksum = r.u64("chunk checksum")?;
    let plain_bytes = r.u64("plain size")?;
    let stats = ChunkStats::read(&mut r.bytes)?;
    let plan = r.string("plan")?;
    let validity_plan = r.string("validity plan")?;
    Ok(ChunkMeta {
        offset,
        values_len,
        validity_len,
        rows,
        first_row,
        checksum,
        plain_bytes,
        stats,
        plan,
        validity_plan,
    })
}

fn check_entry(
    m: &ChunkMeta,
    col: &ColumnMeta,
    index: u64,
    total_rows: u64,
    chunk_rows: u64,
    payload_end: u64,
) -> Result<()> {
    let first_row = index * chunk_rows;
    let rows = chunk_rows.min(total_rows - first_row);
    if m.first_row != first_row || u64::from(m.rows) != rows {
        return Err(Error::corrupt(format!(
            "index entry says rows {}..{}, the row group is rows {first_row}..{}",
            m.first_row,
            m.first_row.saturating_add(u64::from(m.rows)),
            first_row + rows
        )));
    }
    let end = m.offset.checked_add(m.payload_len());
    if m.offset < HEADER_LEN as u64
        || !m.offset.is_multiple_of(8)
        || end.is_none_or(|e| e > payload_end)
    {
        return Err(Error::corrupt(format!(
            "payload of {} bytes at offset {} lies outside the payload area {HEADER_LEN}..{payload_end} or is not 8-byte aligned",
            m.payload_len(),
            m.offset
        )));
    }
    if !m.values_len.is_multiple_of(8) || !m.validity_len.is_multiple_of(8) || m.values_len == 0 {
        return Err(Error::corrupt(format!(
            "node tree lengths {} and {} are not whole, 8-byte aligned trees",
            m.values_len, m.validity_len
        )));
    }
    let has_nulls = m.stats.null_count > 0;
    if m.stats.null_count > u64::from(m.rows)
        || has_nulls != (m.validity_len > 0)
        || (has_nulls && !col.nullable)
    {
        return Err(Error::corrupt(format!(
            "null count {} of {} rows does not match the validity tree ({} bytes, column {})",
            m.stats.null_count,
            m.rows,
            m.validity_len,
            if col.nullable {
                "nullable"
            } else {
                "not nullable"
            }
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Reader

/// An open zipflow file: the parsed, checked footer plus the bytes of the file.
///
/// Any chunk of any column can be read alone ([`ZfFile::read_chunk`]); chunks are read from
/// the file and decoded only when asked for. Each read of a chunk checks its checksum, so
/// a file changed under an open reader gives an error, not other values.
pub struct ZfFile {
    path: PathBuf,
    source: Source,
    footer: Footer,
    schema: SchemaRef,
    /// For a file held in memory, whose bytes cannot change: chunks whose payload checksum
    /// already matched (column-major), so reading a chunk again (a query run many times, a
    /// scan after a check) does not hash it again.
    verified: Vec<AtomicBool>,
}

impl std::fmt::Debug for ZfFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZfFile")
            .field("path", &self.path)
            .field("rows", &self.footer.total_rows)
            .field("columns", &self.footer.columns)
            .finish_non_exhaustive()
    }
}

impl ZfFile {
    /// Opens `path` and checks magics, version, the footer checksum and every index entry,
    /// reading header, footer and trailer only. No chunk is read.
    pub fn open(path: impl AsRef<Path>) -> Result<ZfFile> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        Self::from_source(path.to_path_buf(), Source::File { file, len })
    }

    /// Opens a file held in memory; `name` is what errors call it.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: &[u8]) -> Result<ZfFile> {
        Self::from_source(name.into(), Source::from_vec(bytes))
    }

    fn from_source(path: PathBuf, source: Source) -> Result<ZfFile> {
        let (footer, schema) = parse(&source, &path).map_err(|e| e.in_file(&path))?;
        let nchunks: usize = footer.chunks.iter().map(Vec::len).sum();
        Ok(ZfFile {
            path,
            source,
            footer,
            schema: Arc::new(schema),
            verified: (0..nchunks).map(|_| AtomicBool::new(false)).collect(),
        })
    }

    /// The path the file was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Total rows.
    pub fn num_rows(&self) -> u64 {
        self.footer.total_rows
    }

    /// Rows per chunk (every chunk but the last of each column holds this many).
    pub fn chunk_rows(&self) -> u64 {
        self.footer.chunk_rows
    }

    /// Chunks per column (the number of row groups).
    pub fn num_chunks(&self) -> usize {
        // The footer parser read one entry per row group, so the count fits a usize.
        row_groups(self.footer.total_rows, self.footer.chunk_rows) as usize
    }

    /// The columns, in order.
    pub fn columns(&self) -> &[ColumnMeta] {
        &self.footer.columns
    }

    /// The index of the column called `name`.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.footer.columns.iter().position(|c| c.name == name)
    }

    /// The Arrow schema the file was written with, metadata included.
    pub fn arrow_schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// Size of the file in bytes.
    pub fn file_len(&self) -> u64 {
        self.source.len()
    }

    /// The index entry of chunk `chunk` of column `col`.
    ///
    /// # Panics
    /// If `col` or `chunk` is out of range (see [`ZfFile::try_chunk_meta`]).
    #[allow(clippy::indexing_slicing)]
    pub fn chunk_meta(&self, col: usize, chunk: usize) -> &ChunkMeta {
        &self.footer.chunks[col][chunk]
    }

    /// The index entry of chunk `chunk` of column `col`, or an error naming what is out of range.
    pub fn try_chunk_meta(&self, col: usize, chunk: usize) -> Result<&ChunkMeta> {
        let Some(c) = self.footer.columns.get(col) else {
            return Err(Error::invalid(format!(
                "column index {col} out of range: the file has {} columns",
                self.footer.columns.len()
            ))
            .in_file(&self.path));
        };
        self.footer
            .chunks
            .get(col)
            .and_then(|v| v.get(chunk))
            .ok_or_else(|| {
                Error::invalid(format!(
                    "chunk {chunk} out of range: the file has {} chunks per column",
                    self.num_chunks()
                ))
                .at_column(&c.name)
                .in_file(&self.path)
            })
    }

    /// The raw payload of a chunk (values tree, then validity tree), read and its checksum
    /// checked. Errors name file, column and chunk.
    pub fn chunk_payload(&self, col: usize, chunk: usize) -> Result<(Payload<'_>, &ChunkMeta)> {
        let meta = self.try_chunk_meta(col, chunk)?;
        self.checked_payload(col, chunk, meta)
            .map(|p| (p, meta))
            .map_err(|e| self.locate(e, col, chunk))
    }

    /// The chunk's payload, its checksum checked (for a file in memory, the first time it is
    /// read).
    fn checked_payload(&self, col: usize, chunk: usize, meta: &ChunkMeta) -> Result<Payload<'_>> {
        // Entries were checked against the file length at open.
        let len = usize::try_from(meta.payload_len()).map_err(|_| Error::corrupt("length"))?;
        let payload = self.source.read(meta.offset, len, &self.path)?;
        let flag = match self.source {
            Source::Memory { .. } => self.verified.get(col * self.num_chunks() + chunk),
            Source::File { .. } => None,
        };
        if flag.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return Ok(payload);
        }
        let computed = xxh3_64(&payload);
        if computed == meta.checksum {
            if let Some(f) = flag {
                f.store(true, Ordering::Relaxed);
            }
        } else {
            return Err(Error::Checksum {
                loc: Default::default(),
                part: "chunk payload".into(),
                stored: meta.checksum,
                computed,
            });
        }
        Ok(payload)
    }

    fn locate(&self, e: Error, col: usize, chunk: usize) -> Error {
        let e = match self.footer.columns.get(col) {
            Some(c) => e.at_column(&c.name),
            None => e,
        };
        e.at_chunk(u32::try_from(chunk).unwrap_or(u32::MAX))
            .in_file(&self.path)
    }

    /// Reads chunk `chunk` of column `col`: verifies its checksum, parses its node trees and
    /// decodes them. Returns the values (nulls hold a filler value) and, if the chunk has nulls,
    /// its validity. Every error names file, column and chunk.
    pub fn read_chunk(
        &self,
        col: usize,
        chunk: usize,
        scratch: &mut Scratch,
    ) -> Result<(Values, Option<Validity>)> {
        let (payload, _) = self.chunk_payload(col, chunk)?;
        self.decode_payload(col, chunk, &payload, scratch)
    }

    /// Decodes chunk `chunk` of column `col` from its payload, read and checked by
    /// [`ZfFile::chunk_payload`]. Every error names file, column and chunk.
    pub fn decode_payload(
        &self,
        col: usize,
        chunk: usize,
        payload: &[u8],
        scratch: &mut Scratch,
    ) -> Result<(Values, Option<Validity>)> {
        let meta = self.try_chunk_meta(col, chunk)?;
        let column = self
            .footer
            .columns
            .get(col)
            .ok_or_else(|| Error::invalid(format!("column index {col} out of range")))?;
        decode_chunk(column, meta, payload, scratch).map_err(|e| self.locate(e, col, chunk))
    }

    /// Reads the validity of chunk `chunk` of column `col` (`None` when the chunk has no
    /// nulls), checked as [`ZfFile::read_chunk`] checks it: for readers that decode the
    /// values elsewhere (on a GPU). Every error names file, column and chunk.
    pub fn read_validity(
        &self,
        col: usize,
        chunk: usize,
        scratch: &mut Scratch,
    ) -> Result<Option<Validity>> {
        let (payload, meta) = self.chunk_payload(col, chunk)?;
        let validity_bytes = payload
            .get(meta.values_len as usize..)
            .ok_or_else(|| Error::corrupt("validity tree outside the chunk payload"));
        validity_bytes
            .and_then(|b| decode_validity(b, meta, scratch))
            .map_err(|e| self.locate(e, col, chunk))
    }
}

/// Decodes a chunk's values and validity from its payload.
fn decode_chunk(
    column: &ColumnMeta,
    meta: &ChunkMeta,
    payload: &[u8],
    scratch: &mut Scratch,
) -> Result<(Values, Option<Validity>)> {
    let rows = meta.rows as usize;
    let (values_bytes, validity_bytes) = payload
        .split_at_checked(meta.values_len as usize)
        .ok_or_else(|| Error::corrupt("values tree outside the chunk payload"))?;
    let node = NodeView::parse(values_bytes)?;
    let ptype = column.column_type.ptype();
    // A chunk with nulls may hold only its valid values (version 3, see `crate::nulls`).
    let valid = (meta.rows as u64).saturating_sub(meta.stats.null_count);
    let compacted = node.len != rows && meta.stats.null_count > 0 && node.len as u64 == valid;
    if node.ptype != ptype || (node.len != rows && !compacted) {
        return Err(Error::corrupt(format!(
            "values tree holds {} {} values, the index says {rows} {ptype} values",
            node.len, node.ptype
        )));
    }
    let mut values = scratch.take(ptype);
    zipflow_encodings::decode(&node, &mut values, scratch)?;
    let validity = decode_validity(validity_bytes, meta, scratch)?;
    if compacted {
        let Some(v) = &validity else {
            return Err(Error::corrupt(
                "values tree holds fewer values than rows, and the chunk has no validity",
            ));
        };
        crate::nulls::expand(&mut values, v)?;
    }
    Ok((values, validity))
}

/// Decodes a chunk's validity tree (`bytes`, after its values tree) into flags, checked to
/// hold one 0 or 1 per row and as many zeros as the statistics' null count; `None` when the
/// chunk has none.
fn decode_validity(
    bytes: &[u8],
    meta: &ChunkMeta,
    scratch: &mut Scratch,
) -> Result<Option<Validity>> {
    if meta.validity_len == 0 {
        return Ok(None);
    }
    let rows = meta.rows as usize;
    let node = NodeView::parse(bytes)?;
    if node.ptype != PType::U8 || node.len != rows {
        return Err(Error::corrupt(format!(
            "validity tree holds {} {} values, expected {rows} u8 values",
            node.len, node.ptype
        )));
    }
    let mut flags = scratch.take(PType::U8);
    zipflow_encodings::decode(&node, &mut flags, scratch)?;
    let validity = validity_from_u8(&flags, meta.stats.null_count);
    scratch.give(flags);
    validity.map(Some)
}

/// Turns a decoded validity stream into flags, checking that it holds only 0 and 1 and exactly
/// `null_count` zeros.
fn validity_from_u8(flags: &Values, null_count: u64) -> Result<Validity> {
    let Values::Int(IntVec::U8(flags)) = flags else {
        return Err(Error::corrupt("validity stream is not u8"));
    };
    // One pass for both checks (it vectorizes); the bad value is looked for only if any.
    let (mut high, mut nulls) = (0u8, 0u64);
    for &f in flags {
        high |= f & !1;
        nulls += u64::from(f == 0);
    }
    if high != 0
        && let Some(bad) = flags.iter().find(|&&f| f > 1)
    {
        return Err(Error::corrupt(format!("validity stream holds {bad}")));
    }
    if nulls != null_count {
        return Err(Error::corrupt(format!(
            "validity stream has {nulls} nulls, the statistics say {null_count}"
        )));
    }
    Ok(flags.iter().map(|&f| f == 1).collect())
}

/// The footer's bytes as a file of `version` stores them: from [`COMPRESSED_FOOTER`] on, one
/// Zstandard frame (which states its size) of the layout.
fn pack_footer(layout: Vec<u8>, version: u16) -> Result<Vec<u8>> {
    if version < COMPRESSED_FOOTER {
        return Ok(layout);
    }
    zipflow_encodings::zstd::compress(&layout, FOOTER_LEVEL)
        .map_err(|e| Error::external("compressing the footer", e))
}

/// The footer's layout from its stored bytes (checksummed already). A frame that states no
/// size, or more than 256 times its own bytes (footers compress 3-10x), is refused before
/// anything is allocated for it.
fn unpack_footer(stored: &[u8], version: u16) -> Result<std::borrow::Cow<'_, [u8]>> {
    if version < COMPRESSED_FOOTER {
        return Ok(std::borrow::Cow::Borrowed(stored));
    }
    let bad = |what: String| Error::corrupt(format!("footer: {what}"));
    let size = zipflow_encodings::zstd::frame_size(stored)
        .ok_or_else(|| bad("not a Zstandard frame that states its size".into()))?;
    let limit = 256 * stored.len() as u64 + (1 << 20);
    if size > limit {
        return Err(bad(format!(
            "its frame claims {size} bytes from {} stored",
            stored.len()
        )));
    }
    let mut layout = vec![0u8; size as usize];
    let got = zipflow_encodings::zstd::decompress_to(stored, &mut layout)
        .map_err(|e| bad(format!("Zstandard frame: {e}")))?;
    if got as u64 != size {
        return Err(bad(format!(
            "its frame holds {got} bytes, it states {size}"
        )));
    }
    Ok(std::borrow::Cow::Owned(layout))
}

/// Checks header and trailer and parses the footer of a file, reading only those.
fn parse(source: &Source, path: &Path) -> Result<(Footer, Schema)> {
    let len = source.len();
    if len < (HEADER_LEN + TRAILER_LEN) as u64 {
        return Err(Error::corrupt(format!(
            "not a zipflow file: {len} bytes is shorter than header and trailer"
        )));
    }
    let header = source.read(0, HEADER_LEN, path)?;
    let trailer = source.read(len - TRAILER_LEN as u64, TRAILER_LEN, path)?;
    if header[..8] != MAGIC {
        return Err(Error::corrupt(
            "not a zipflow file: the magic `ZIPFLOW1` is missing",
        ));
    }
    let version = u16::from_le_bytes([header[8], header[9]]);
    if version > VERSION {
        return Err(Error::unsupported(format!(
            "written by a newer zipflow (format version {version}, this build reads up to \
             {VERSION})"
        )));
    }
    if version == 0 {
        return Err(Error::corrupt("file format version 0 does not exist"));
    }
    if header[10..16].iter().any(|&b| b != 0) {
        return Err(Error::corrupt("reserved header bytes are not zero"));
    }
    if trailer[16..24] != END_MAGIC {
        return Err(Error::corrupt(
            "the end magic `ZFEND001` is missing: the file is truncated or was not finished",
        ));
    }
    let footer_len = u64::from_le_bytes(
        trailer[0..8]
            .try_into()
            .map_err(|_| Error::corrupt("trailer"))?,
    );
    let stored = u64::from_le_bytes(
        trailer[8..16]
            .try_into()
            .map_err(|_| Error::corrupt("trailer"))?,
    );
    let body_len = len - (HEADER_LEN + TRAILER_LEN) as u64;
    if footer_len > body_len {
        return Err(Error::corrupt(format!(
            "footer length {footer_len} exceeds the {body_len} bytes between header and trailer"
        )));
    }
    let payload_end = HEADER_LEN as u64 + (body_len - footer_len);
    let footer_len = usize::try_from(footer_len)
        .map_err(|_| Error::corrupt(format!("footer length {footer_len} is too large")))?;
    let footer = source.read(payload_end, footer_len, path)?;
    let computed = xxh3_64(&footer);
    if computed != stored {
        return Err(Error::Checksum {
            loc: Default::default(),
            part: "footer".into(),
            stored,
            computed,
        });
    }
    if !payload_end.is_multiple_of(8) {
        return Err(Error::corrupt(format!(
            "footer starts at byte {payload_end}, not 8-byte aligned"
        )));
    }
    let footer = Footer::read(&unpack_footer(&footer, version)?, payload_end, version)?;
    let schema = schema_from_ipc(&footer.schema_ipc)?;
    if schema.fields().len() != footer.columns.len()
        || schema
            .fields()
            .iter()
            .zip(&footer.columns)
            .any(|(f, c)| f.name() != &c.name || f.is_nullable() != c.nullable)
    {
        return Err(Error::corrupt(
            "the Arrow schema does not match the column list in the footer",
        ));
    }
    Ok((footer, schema))
}

/// Rewrites the checksums in a file's bytes to match what the bytes now hold: the footer's
/// in the trailer and, when the footer parses, every chunk payload's in the footer. A damaged
/// or mutated file then gets past the checksums to the footer parser and the decoders behind
/// them: for fuzzing and for tests of what the checksums guard. `None` when the bytes have no
/// trailer to locate the footer by.
pub fn reseal(bytes: &[u8]) -> Option<Vec<u8>> {
    if bytes.len() < HEADER_LEN + TRAILER_LEN {
        return None;
    }
    let mut out = bytes.to_vec();
    let body_end = out.len() - TRAILER_LEN;
    let footer_len = u64::from_le_bytes(out.get(body_end..body_end + 8)?.try_into().ok()?);
    let footer_len = usize::try_from(footer_len).ok()?;
    let footer_start = body_end.checked_sub(footer_len)?;
    if footer_start < HEADER_LEN {
        return None;
    }
    let version = u16::from_le_bytes([out[8], out[9]]);
    // `Footer::write` writes this build's version: older footers keep their entries.
    let resealed = (version == VERSION)
        .then(|| {
            let layout = unpack_footer(&out[footer_start..body_end], version).ok()?;
            let mut footer = Footer::read(&layout, footer_start as u64, version).ok()?;
            for m in footer.chunks.iter_mut().flatten() {
                // `Footer::read` checked that every payload lies inside the payload area.
                let start = usize::try_from(m.offset).ok()?;
                let end = start.checked_add(usize::try_from(m.payload_len()).ok()?)?;
                m.checksum = xxh3_64(out.get(start..end)?);
            }
            footer.write().and_then(|l| pack_footer(l, version)).ok()
        })
        .flatten();
    // A rewritten footer may differ in length (it is compressed): the trailer follows it.
    if let Some(new) = resealed {
        let trailer = out[body_end..].to_vec();
        out.truncate(footer_start);
        out.extend_from_slice(&new);
        out.extend_from_slice(&trailer);
        let body_end = out.len() - TRAILER_LEN;
        out[body_end..body_end + 8].copy_from_slice(&(new.len() as u64).to_le_bytes());
    }
    // The footer still starts at `footer_start`; only its end may have moved.
    let body_end = out.len() - TRAILER_LEN;
    let sum = xxh3_64(&out[footer_start..body_end]);
    out[body_end + 8..body_end + 16].copy_from_slice(&sum.to_le_bytes());
    Some(out)
}

// ---------------------------------------------------------------------------------------------
// Writer

/// The temporary file a [`FileWriter`] writes into; removed on drop unless it was renamed.
struct TempFile {
    path: PathBuf,
    keep: bool,
    // Keeps the path on the list removed by a signal until it is renamed or deleted.
    _listed: crate::cleanup::Registered,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            // Nothing useful can be done if removal fails while unwinding or dropping.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Streams chunk payloads into a temporary file next to the target and, on
/// [`FileWriter::finish`], writes the footer, syncs and renames it onto the target.
///
/// Memory use is the index (a few dozen bytes per chunk) plus what the caller hands in.
/// Dropping an unfinished writer deletes the temporary file.
pub struct FileWriter {
    target: PathBuf,
    out: BufWriter<File>,
    // Declared after `out` so the file is closed before it is removed.
    temp: TempFile,
    pos: u64,
    overwrite: bool,
    total_rows: u64,
    chunk_rows: u64,
    columns: Vec<ColumnMeta>,
    schema_ipc: Vec<u8>,
    chunks: Vec<Vec<ChunkMeta>>,
}

impl std::fmt::Debug for FileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileWriter")
            .field("target", &self.target)
            .field("temp", &self.temp.path)
            .field("rows", &self.total_rows)
            .finish_non_exhaustive()
    }
}

/// The temporary path for `target`: `.NAME.tmp-<pid>` in the same directory, so the final
/// rename stays on one file system.
pub fn temp_path(target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "zipflow".into());
    target.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

fn refuse_existing(target: &Path) -> Error {
    Error::invalid("the file already exists; pass --force to overwrite it").in_file(target)
}

impl FileWriter {
    /// Starts a file at `target` with the given columns, Arrow schema (as
    /// [`schema_to_ipc`] bytes) and rows per chunk. Refuses an existing target unless
    /// `overwrite` is set.
    pub fn create(
        target: impl AsRef<Path>,
        columns: Vec<ColumnMeta>,
        schema_ipc: Vec<u8>,
        chunk_rows: usize,
        overwrite: bool,
    ) -> Result<FileWriter> {
        let target = target.as_ref().to_path_buf();
        if chunk_rows == 0 || chunk_rows > zipflow_core::MAX_CHUNK_LEN {
            return Err(Error::invalid(format!(
                "rows per chunk must be between 1 and {}, got {chunk_rows}",
                zipflow_core::MAX_CHUNK_LEN
            )));
        }
        if !overwrite && target.exists() {
            return Err(refuse_existing(&target));
        }
        let temp_path = temp_path(&target);
        let listed = crate::cleanup::register_file(&temp_path);
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp_path)
            .map_err(|e| Error::io(&temp_path, e))?;
        let temp = TempFile {
            path: temp_path,
            keep: false,
            _listed: listed,
        };
        let mut out = BufWriter::with_capacity(1 << 20, file);
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(&MAGIC);
        header[8..10].copy_from_slice(&VERSION.to_le_bytes());
        out.write_all(&header)
            .map_err(|e| Error::io(&temp.path, e))?;
        let chunks = vec![Vec::new(); columns.len()];
        Ok(FileWriter {
            target,
            out,
            temp,
            pos: HEADER_LEN as u64,
            overwrite,
            total_rows: 0,
            chunk_rows: chunk_rows as u64,
            columns,
            schema_ipc,
            chunks,
        })
    }

    /// The target path.
    pub fn path(&self) -> &Path {
        &self.target
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.total_rows
    }

    fn write_padded(&mut self, bytes: &[u8]) -> Result<()> {
        let io = |e| Error::io(&self.temp.path, e);
        self.out.write_all(bytes).map_err(io)?;
        self.pos += bytes.len() as u64;
        let pad = (pad8(self.pos) - self.pos) as usize;
        self.out.write_all(&[0u8; 8][..pad]).map_err(io)?;
        self.pos += pad as u64;
        Ok(())
    }

    /// Appends one row group: one encoded chunk per column, in column order, each of `rows`
    /// rows. Every row group but the last must hold exactly the rows per chunk.
    pub fn write_row_group(&mut self, chunks: Vec<EncodedChunk>) -> Result<()> {
        let fail = |what: String| Err(Error::invalid(what).in_file(&self.target));
        if chunks.len() != self.columns.len() {
            return fail(format!(
                "row group has {} chunks, the file has {} columns",
                chunks.len(),
                self.columns.len()
            ));
        }
        if !self.total_rows.is_multiple_of(self.chunk_rows) {
            return fail("a row group after a short (final) row group".into());
        }
        let rows = chunks.first().map_or(0, |c| c.rows);
        if rows == 0 || u64::from(rows) > self.chunk_rows || chunks.iter().any(|c| c.rows != rows) {
            return fail(format!(
                "row group chunks must all hold the same 1..={} rows",
                self.chunk_rows
            ));
        }
        let chunk_index = self.chunks.first().map_or(0, Vec::len);
        for (col, c) in chunks.into_iter().enumerate() {
            let name = self.columns[col].name.clone();
            let locate = |e: Error| {
                e.at_column(&name)
                    .at_chunk(u32::try_from(chunk_index).unwrap_or(u32::MAX))
            };
            let values_len = u32::try_from(c.values.len())
                .map_err(|_| locate(Error::unsupported("an encoded chunk over 4 GiB")))?;
            let validity = c.validity.unwrap_or_default();
            let validity_len = u32::try_from(validity.len())
                .map_err(|_| locate(Error::unsupported("an encoded validity over 4 GiB")))?;
            if !values_len.is_multiple_of(8) || !validity_len.is_multiple_of(8) {
                return Err(locate(Error::invalid(
                    "node trees must be whole serialised trees",
                )));
            }
            if (c.stats.null_count > 0) != (validity_len > 0) {
                return Err(locate(Error::invalid(
                    "a chunk has a validity tree exactly when it has nulls",
                )));
            }
            let mut hasher = xxhash_rust::xxh3::Xxh3::new();
            hasher.update(&c.values);
            hasher.update(&validity);
            let meta = ChunkMeta {
                offset: self.pos,
                values_len,
                validity_len,
                rows,
                first_row: self.total_rows,
                checksum: hasher.digest(),
                plain_bytes: c.plain_bytes,
                stats: c.stats,
                plan: c.plan,
                validity_plan: c.validity_plan,
            };
            self.write_padded(&c.values)?;
            self.write_padded(&validity)?;
            self.chunks[col].push(meta);
        }
        self.total_rows += u64::from(rows);
        Ok(())
    }

    /// Writes footer and trailer, syncs the file to disk and renames it onto the target.
    /// Returns the file's size in bytes.
    pub fn finish(mut self) -> Result<u64> {
        let footer = Footer {
            total_rows: self.total_rows,
            chunk_rows: self.chunk_rows,
            columns: std::mem::take(&mut self.columns),
            schema_ipc: std::mem::take(&mut self.schema_ipc),
            chunks: std::mem::take(&mut self.chunks),
        }
        .write()
        .and_then(|layout| pack_footer(layout, VERSION))
        .map_err(|e| e.in_file(&self.target))?;
        // The footer starts 8-byte aligned (payloads are padded); footer and trailer are not
        // padded, so the file ends right after the end magic.
        let mut trailer = [0u8; TRAILER_LEN];
        trailer[..8].copy_from_slice(&(footer.len() as u64).to_le_bytes());
        trailer[8..16].copy_from_slice(&xxh3_64(&footer).to_le_bytes());
        trailer[16..].copy_from_slice(&END_MAGIC);
        let io = |e| Error::io(&self.temp.path, e);
        self.out.write_all(&footer).map_err(io)?;
        self.pos += footer.len() as u64;
        self.out.write_all(&trailer).map_err(io)?;
        self.pos += TRAILER_LEN as u64;
        self.out.flush().map_err(io)?;
        self.out.get_ref().sync_all().map_err(io)?;
        if !self.overwrite && self.target.exists() {
            return Err(refuse_existing(&self.target));
        }
        std::fs::rename(&self.temp.path, &self.target).map_err(|e| Error::io(&self.target, e))?;
        self.temp.keep = true;
        // Make the rename itself durable (the file's bytes were synced above).
        crate::cleanup::sync_parent(&self.target).map_err(|e| {
            Error::io(
                self.target.parent().unwrap_or(Path::new(".")),
                std::io::Error::new(
                    e.kind(),
                    format!("renamed the finished file in, but syncing the directory failed: {e}"),
                ),
            )
        })?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipflow_core::stats::Scalar;

    fn entry(offset: u64, rows: u32, first_row: u64) -> ChunkMeta {
        ChunkMeta {
            offset,
            values_len: 64,
            validity_len: 0,
            rows,
            first_row,
            checksum: 7,
            plain_bytes: 40,
            stats: ChunkStats {
                min: Some(Scalar::Int(-3)),
                max: Some(Scalar::Int(9)),
                null_count: 0,
            },
            plan: "for | bitpack(4)".into(),
            validity_plan: String::new(),
        }
    }

    fn footer() -> Footer {
        Footer {
            total_rows: 15,
            chunk_rows: 10,
            columns: vec![ColumnMeta {
                name: "a".into(),
                column_type: ColumnType::Int(PType::I32),
                nullable: false,
            }],
            schema_ipc: vec![1, 2, 3],
            chunks: vec![vec![entry(16, 10, 0), entry(80, 5, 10)]],
        }
    }

    #[test]
    fn footer_round_trips() -> Result<()> {
        let f = footer();
        let bytes = f.write()?;
        let back = Footer::read(&bytes, 144, VERSION)?;
        assert_eq!(back.chunks, f.chunks);
        assert_eq!(back.columns, f.columns);
        assert_eq!(back.schema_ipc, f.schema_ipc);
        Ok(())
    }

    #[test]
    fn footer_rejects_bad_entries() -> Result<()> {
        let bytes = footer().write()?;
        // Payload area too small for the second chunk.
        assert!(Footer::read(&bytes, 100, VERSION).is_err());
        for n in 0..bytes.len() {
            assert!(
                Footer::read(&bytes[..n], 144, VERSION).is_err(),
                "prefix {n}"
            );
        }
        let mut f = footer();
        f.chunks[0][1].first_row = 9;
        assert!(Footer::read(&f.write()?, 144, VERSION).is_err());
        let mut f = footer();
        f.chunks[0][0].offset = 20;
        assert!(Footer::read(&f.write()?, 144, VERSION).is_err());
        let mut f = footer();
        f.chunks[0][0].stats.null_count = 1;
        assert!(Footer::read(&f.write()?, 144, VERSION).is_err());
        Ok(())
    }

    #[test]
    fn validity_checks_flags() {
        let v = Values::Int(IntVec::U8(vec![1, 0, 1]));
        assert_eq!(validity_from_u8(&v, 1).ok(), Some(vec![true, false, true]));
        assert!(validity_from_u8(&v, 2).is_err());
        assert!(validity_from_u8(&Values::Int(IntVec::U8(vec![2])), 0).is_err());
    }
}
