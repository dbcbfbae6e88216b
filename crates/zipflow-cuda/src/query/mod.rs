//! Aggregating queries on the GPU: a table's chunks decoded on the device batch by batch, and
//! one generated kernel per query ([`kernel`]) that filters their rows, maps them to groups
//! and folds the aggregates' arguments into exact per-group accumulators there. Only the
//! accumulators come back; [`zipflow_compute::finish_groups`] finishes the query on the host
//! exactly as the CPU engine does (aggregate results, HAVING, output, ORDER BY, LIMIT).
//!
//! What runs here: filters of comparisons, `IN` lists, `AND`/`OR`/`NOT` over integers,
//! decimals and dates with `+ - *`, negation, `CASE ... ELSE` and widening casts; `count`,
//! `sum`, `avg`, `min`, `max` over such expressions; GROUP BY integral columns whose zone
//! maps bound them to at most [`MAX_GROUPS`] combinations. Columns the query reads must hold
//! no nulls. Anything else is an `Unsupported` error naming it, and callers run the query on
//! the CPU instead. The results equal the CPU engine's bit for bit: sums are exact `i128`
//! and every overflow the CPU reports is reported here too.

pub mod kernel;

use cudarc::driver::{CudaFunction, CudaSlice, DevicePtr, LaunchConfig, PushKernelArg};
use zipflow_compute::expr::{Expr, SqlType, Value, make_integral};
use zipflow_compute::query::{AggFunc, Query, QueryResult};
use zipflow_compute::{AggState, GroupState, Table, finish_groups};
use zipflow_core::stats::Scalar;
use zipflow_core::{Error, PType, Result, Values};
use zipflow_encodings::{NodeView, Scratch};

use crate::decode::{ColumnDecoder, decoded_tree};
use crate::device::{Gpu, cuda};
use kernel::{ERR_KEY, ERR_OVERFLOW, KeyMap, QUERY_KERNEL, QUERY_THREADS, QueryLayout};

/// Most groups a GPU query may have (the product of its keys' value ranges).
pub const MAX_GROUPS: usize = 1 << 16;
/// Rows decoded on the device at once.
const BATCH_ROWS: u64 = 1 << 24;

/// A query prepared for the GPU: what its kernel reads, and the kernel.
#[derive(Debug)]
pub struct GpuQuery {
    layout: QueryLayout,
    /// The table column of each slot, and whether the slot holds the dictionary codes of a
    /// string key instead of the column's values.
    columns: Vec<(usize, bool)>,
    /// String keys: every chunk's codes mapped to the key's distinct strings.
    codes: Codes,
    kernel: crate::codegen::Kernel,
    /// Rows decoded on the device at once (whole row groups; at least one).
    batch_rows: u64,
}

/// The code maps of a query's string keys.
#[derive(Debug, Default)]
struct Codes {
    /// Per string key, its distinct strings in group index order.
    strings: Vec<Vec<String>>,
    /// Every chunk's map of every string key, one after another, each after its length:
    /// code -> group index.
    maps: Vec<u32>,
    /// Per chunk and key (`chunk * keys + key`), where its map starts in `maps`.
    base: Vec<u32>,
}

impl GpuQuery {
    /// Checks that `q` can run on the GPU over `table` and generates its kernel (no GPU
    /// needed): an `Unsupported` error names what cannot.
    pub fn new(table: &Table, q: &Query) -> Result<GpuQuery> {
        if !q.aggregating {
            return Err(Error::unsupported(
                "queries without aggregates on the GPU (they return rows, not aggregates)",
            ));
        }
        let file = table.file();
        let columns = q.columns();
        let string_keys: Vec<usize> = q
            .keys
            .iter()
            .filter_map(|k| match k {
                Expr::Column {
                    index,
                    ty: SqlType::Str,
                } => Some(*index),
                _ => None,
            })
            .collect();
        let mut codes = Codes::default();
        let mut slots = Vec::with_capacity(columns.len());
        let mut slot_columns = Vec::with_capacity(columns.len());
        for &c in &columns {
            let meta = file
                .columns()
                .get(c)
                .ok_or_else(|| Error::invalid(format!("column index {c} out of range")))?;
            for k in 0..file.num_chunks() {
                if file.try_chunk_meta(c, k)?.stats.null_count > 0 {
                    return Err(Error::unsupported(format!(
                        "column `{}` has nulls (row group {k}): GPU queries read columns \
                         without nulls",
                        meta.name
                    )));
                }
            }
            let p = meta.column_type.ptype();
            let is_key = string_keys.contains(&c) && !read_outside_keys(q, c);
            if p == PType::Bytes && is_key {
                // The codes' type is set with the key below.
                slots.push(PType::U32);
                slot_columns.push((c, true));
                continue;
            } else if !p.is_int() {
                return Err(Error::unsupported(format!(
                    "column `{}` ({p:?}) in a GPU query: integers, decimals and dates only",
                    meta.name
                )));
            }
            slots.push(p);
            slot_columns.push((c, false));
        }
        let column_slot: Vec<(usize, usize)> =
            columns.iter().enumerate().map(|(s, &c)| (c, s)).collect();
        let mut keys = Vec::with_capacity(q.keys.len());
        let mut groups = 1usize;
        for k in &q.keys {
            let map = match k {
                Expr::Column {
                    index,
                    ty: SqlType::Str,
                } => {
                    // A string column read outside the keys was refused above.
                    let slot = slot_of(&column_slot, *index)?;
                    let name = &file.columns()[*index].name;
                    slots[slot] = string_key(file, *index, &mut codes)
                        .map_err(|e| e.at_column(name).in_file(file.path()))?;
                    let m = codes.strings.len() - 1;
                    KeyMap::Codes {
                        slot,
                        map: m,
                        len: codes.strings[m].len().max(1),
                    }
                }
                _ => key_range(table, k, &column_slot)?,
            };
            groups = groups
                .checked_mul(map.values())
                .filter(|&g| g <= MAX_GROUPS)
                .ok_or_else(|| {
                    Error::unsupported(format!(
                        "more than {MAX_GROUPS} possible groups in a GPU query"
                    ))
                })?;
            keys.push(map);
        }
        if !codes.strings.is_empty() {
            // Kernels find a row's chunk as `row / chunk_rows`.
            let n = file.num_chunks();
            for k in 0..n.saturating_sub(1) {
                if u64::from(file.try_chunk_meta(0, k)?.rows) != file.chunk_rows() {
                    return Err(Error::unsupported(
                        "string keys on the GPU over row groups of different sizes",
                    ));
                }
            }
            let keys = codes.strings.len();
            // `string_key` appended each key's bases chunk by chunk: interleave them.
            let mut base = vec![0u32; n * keys];
            for (i, b) in codes.base.iter().enumerate() {
                base[(i % n) * keys + i / n] = *b;
            }
            codes.base = base;
        }
        let layout = QueryLayout {
            slots,
            column_slot,
            keys,
            groups,
            maps: codes.strings.len(),
        };
        let kernel = kernel::generate(q, &layout)?;
        Ok(GpuQuery {
            layout,
            columns: slot_columns,
            codes,
            kernel,
            batch_rows: BATCH_ROWS,
        })
    }

    /// Decodes at most `rows` rows on the device at once (whole row groups, at least one;
    /// the default is 2^24): less device memory, more batches.
    pub fn with_batch_rows(mut self, rows: u64) -> GpuQuery {
        self.batch_rows = rows;
        self
    }

    /// The generated CUDA C.
    pub fn source(&self) -> &str {
        &self.kernel.source
    }

    /// Runs the query on `gpu` and finishes it on the host ([`GpuQuery::prepare`], then one
    /// [`PreparedQuery::run`]).
    pub fn run(&self, gpu: &Gpu, table: &Table, q: &Query) -> Result<QueryResult> {
        self.prepare(gpu, table)?.run(q)
    }

    /// Lays out the columns the query reads for `gpu`: every batch's chunks checked and
    /// parsed, their compressed bytes in pinned host memory, descriptors on the device and
    /// output buffers allocated, the kernel compiled. What stays to do for each run is the
    /// copy of the compressed bytes, the decode and the query kernel.
    pub fn prepare<'g>(&'g self, gpu: &'g Gpu, table: &'g Table) -> Result<PreparedQuery<'g>> {
        let file = table.file();
        let stream = &gpu.streams[0];
        let function = gpu.function(&self.kernel, QUERY_KERNEL)?;
        // At least one u32, so that the map arguments are valid pointers when no key uses them.
        let maps = stream
            .clone_htod(if self.codes.maps.is_empty() {
                &[0u32][..]
            } else {
                &self.codes.maps
            })
            .map_err(cuda("uploading the key maps"))?;
        let nmaps = self.layout.maps;
        let mut prepared = Vec::new();
        for chunks in batches(table, self.batch_rows) {
            let mut decoders = Vec::with_capacity(self.columns.len());
            for (slot, &(c, codes)) in self.columns.iter().enumerate() {
                let d = if codes {
                    let payloads = chunks
                        .iter()
                        .map(|&k| decoded_tree(file, c, k).map(|(p, _)| p))
                        .collect::<Result<Vec<_>>>()?;
                    let views = payloads
                        .iter()
                        .map(|p| NodeView::parse(p))
                        .collect::<Result<Vec<_>>>()?;
                    let trees = views
                        .iter()
                        .map(|v| v.child(0, "strdict codes").map(|c| c.raw))
                        .collect::<Result<Vec<_>>>()?;
                    ColumnDecoder::new(gpu, self.layout.slots[slot], &trees)
                        .map_err(|e| e.at_column(&file.columns()[c].name).in_file(file.path()))?
                } else {
                    ColumnDecoder::for_chunks(gpu, file, c, &chunks)?
                };
                decoders.push(d);
            }
            let rows: u64 = chunks
                .iter()
                .map(|&k| file.try_chunk_meta(0, k).map(|m| u64::from(m.rows)))
                .sum::<Result<u64>>()?;
            if decoders.iter().any(|d| d.rows() as u64 != rows) {
                return Err(Error::corrupt(
                    "the columns of a row group decode to different numbers of rows",
                )
                .in_file(file.path()));
            }
            let mut ptrs: Vec<u64> = decoders
                .iter()
                .map(|d| d.output().device_ptr(stream).0)
                .collect();
            ptrs.push(0);
            let ptrs = stream
                .clone_htod(&ptrs)
                .map_err(cuda("uploading column addresses"))?;
            let mut base = vec![0u32; chunks.len() * nmaps];
            for (i, &k) in chunks.iter().enumerate() {
                base[i * nmaps..(i + 1) * nmaps]
                    .copy_from_slice(&self.codes.base[k * nmaps..(k + 1) * nmaps]);
            }
            base.push(0);
            let base = stream
                .clone_htod(&base)
                .map_err(cuda("uploading the key maps' bases"))?;
            prepared.push(Batch {
                decoders,
                rows,
                ptrs,
                base,
            });
        }
        let err = stream
            .alloc_zeros::<i32>(1)
            .map_err(cuda("allocating the error word"))?;
        Ok(PreparedQuery {
            gpu,
            query: self,
            table,
            function,
            maps,
            batches: prepared,
            err,
        })
    }

    /// The groups that received rows, in key order, from the accumulators.
    fn groups(&self, q: &Query, acc: &[u64]) -> Result<Vec<GroupState>> {
        let s = self.layout.slots_per_group(q.aggregates.len());
        let mut out = Vec::new();
        for (g, a) in acc.chunks_exact(s).enumerate() {
            let rows = a[0];
            if rows == 0 {
                continue;
            }
            let mut key = Vec::with_capacity(q.keys.len());
            let mut rest = g;
            let mut digits = vec![0usize; self.layout.keys.len()];
            for (i, map) in self.layout.keys.iter().enumerate().rev() {
                digits[i] = rest % map.values();
                rest /= map.values();
            }
            for ((map, k), d) in self.layout.keys.iter().zip(&q.keys).zip(digits) {
                match map {
                    KeyMap::Range { lo, .. } => {
                        key.push(make_integral(i128::from(*lo) + d as i128, k.ty())?);
                    }
                    KeyMap::Codes { map, .. } => {
                        let s = self.codes.strings[*map].get(d).ok_or_else(|| {
                            Error::corrupt("a group index past its key's strings")
                        })?;
                        key.push(Value::Str(s.clone()));
                    }
                }
            }
            let aggs = q
                .aggregates
                .iter()
                .zip(a[1..].chunks_exact(4))
                .map(|(agg, x)| {
                    let ty = agg.arg.as_ref().map_or(SqlType::Int, Expr::ty);
                    let value = |v: u64| make_integral(i128::from(v as i64), ty).map(Some);
                    Ok(AggState {
                        count: i64::try_from(rows).unwrap_or(i64::MAX),
                        sum: (i128::from(x[1] as i64) << 64) | i128::from(x[0]),
                        min: if agg.func == AggFunc::Min {
                            value(x[2])?
                        } else {
                            None
                        },
                        max: if agg.func == AggFunc::Max {
                            value(x[3])?
                        } else {
                            None
                        },
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            out.push(GroupState { key, aggs });
        }
        Ok(out)
    }
}

/// One batch of a prepared query: a decoder per column slot, and the kernel's inputs.
struct Batch<'g> {
    decoders: Vec<ColumnDecoder<'g>>,
    rows: u64,
    /// The device addresses of the slots' decoded values (and one 0, so never empty).
    ptrs: CudaSlice<u64>,
    /// Per chunk of the batch and string key, where its code map starts.
    base: CudaSlice<u32>,
}

impl Batch<'_> {
    /// Queues the copy of the batch's compressed bytes to the device and their decoding,
    /// without waiting (see [`ColumnDecoder::upload_and_decode`]).
    fn queue_decode(&mut self) -> Result<()> {
        for d in &mut self.decoders {
            d.upload_and_decode()?;
        }
        Ok(())
    }

    /// Waits for the batch's decode and reports damaged chunks.
    fn finish(&self, file: &zipflow_format::ZfFile) -> Result<()> {
        for d in &self.decoders {
            d.finish().map_err(|e| e.in_file(file.path()))?;
        }
        Ok(())
    }
}

/// A [`GpuQuery`] laid out on one GPU for one table ([`GpuQuery::prepare`]): each
/// [`PreparedQuery::run`] copies the compressed bytes from pinned host memory, decodes them
/// and runs the query kernel.
pub struct PreparedQuery<'g> {
    gpu: &'g Gpu,
    query: &'g GpuQuery,
    table: &'g Table,
    function: CudaFunction,
    maps: CudaSlice<u32>,
    batches: Vec<Batch<'g>>,
    err: CudaSlice<i32>,
}

impl std::fmt::Debug for PreparedQuery<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedQuery")
            .field("batches", &self.batches.len())
            .field("compressed_bytes", &self.compressed_bytes())
            .finish_non_exhaustive()
    }
}

impl PreparedQuery<'_> {
    /// Bytes each run copies to the device: the compressed chunks of the columns read.
    pub fn compressed_bytes(&self) -> usize {
        self.batches
            .iter()
            .flat_map(|b| &b.decoders)
            .map(ColumnDecoder::compressed_bytes)
            .sum()
    }

    /// Copies and decodes every batch's columns without running the query kernel (what a
    /// run spends on the data path; benchmarks compare it with [`PreparedQuery::run`]).
    pub fn decode(&mut self) -> Result<()> {
        let file = self.table.file();
        for batch in &mut self.batches {
            batch.queue_decode()?;
        }
        self.batches.iter().try_for_each(|b| b.finish(file))
    }

    /// Runs query `q` (the one the [`GpuQuery`] was made for) and finishes it on the host.
    pub fn run(&mut self, q: &Query) -> Result<QueryResult> {
        let gpu = self.gpu;
        let stream = &gpu.streams[0];
        let layout = &self.query.layout;
        let file = self.table.file();
        let s = layout.slots_per_group(q.aggregates.len());
        let mut init = vec![0u64; layout.groups * s];
        for g in init.chunks_exact_mut(s) {
            for a in g[1..].chunks_exact_mut(4) {
                a[2] = i64::MAX as u64;
                a[3] = i64::MIN as u64;
            }
        }
        let acc = stream
            .clone_htod(&init)
            .map_err(cuda("uploading the accumulators"))?;
        stream
            .memset_zeros(&mut self.err)
            .map_err(cuda("clearing the error word"))?;
        let sms = u32::try_from(gpu.info().multiprocessors.max(1)).unwrap_or(1);
        let chunk_rows = file.chunk_rows().max(1);
        // Every batch's copies and decode kernels are queued at once: the copies run back to
        // back on the copy stream while the kernels decode and query what has arrived.
        for batch in &mut self.batches {
            batch.queue_decode()?;
            if batch.rows == 0 {
                continue;
            }
            // The decoders finish on the first stream, which the query kernel then follows.
            let blocks = batch
                .rows
                .div_ceil(u64::from(QUERY_THREADS))
                .min(u64::from(sms) * 8)
                .max(1) as u32;
            let cfg = LaunchConfig {
                grid_dim: (blocks, 1, 1),
                block_dim: (QUERY_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            let (cols_p, _a) = batch.ptrs.device_ptr(stream);
            let (maps_p, _b) = self.maps.device_ptr(stream);
            let (base_p, _e) = batch.base.device_ptr(stream);
            let (acc_p, _c) = acc.device_ptr(stream);
            let (err_p, _d) = self.err.device_ptr(stream);
            let mut b = stream.launch_builder(&self.function);
            b.arg(&cols_p)
                .arg(&batch.rows)
                .arg(&maps_p)
                .arg(&base_p)
                .arg(&chunk_rows)
                .arg(&acc_p)
                .arg(&err_p);
            // SAFETY: the arguments match the generated signature (see `kernel::generate`);
            // each column slot holds `rows` decoded values of its physical type (checked when
            // the batch was prepared); group indices are checked against the keys' ranges and
            // code maps in the kernel, so accumulator writes stay within `groups` groups.
            unsafe { b.launch(cfg) }.map_err(cuda("launching the query kernel"))?;
        }
        // A damaged chunk is reported as such before anything the query kernel made of it.
        self.batches.iter().try_for_each(|b| b.finish(file))?;
        let flags = stream
            .clone_dtoh(&self.err)
            .map_err(cuda("reading the error word"))?;
        let flags = flags.first().copied().unwrap_or(0);
        if flags & ERR_KEY != 0 {
            return Err(Error::corrupt(
                "a group key outside its zone maps or past its chunk's dictionary",
            )
            .in_file(file.path()));
        }
        if flags & ERR_OVERFLOW != 0 {
            return Err(Error::invalid(
                "arithmetic overflow (the result does not fit a 64-bit decimal)",
            ));
        }
        let acc = stream
            .clone_dtoh(&acc)
            .map_err(cuda("reading the accumulators"))?;
        finish_groups(q, self.query.groups(q, &acc)?)
    }
}

/// Runs aggregating query `q` over `table` on `gpu` (see the module docs).
pub fn run_query(gpu: &Gpu, table: &Table, q: &Query) -> Result<QueryResult> {
    GpuQuery::new(table, q)?.run(gpu, table, q)
}

/// The dense index of a GROUP BY key: an integral column bounded by its zone maps.
fn key_range(table: &Table, k: &Expr, column_slot: &[(usize, usize)]) -> Result<KeyMap> {
    let file = table.file();
    let Expr::Column { index, ty } = k else {
        return Err(Error::unsupported(
            "GROUP BY expressions on the GPU (columns only)",
        ));
    };
    if !matches!(ty, SqlType::Int | SqlType::Decimal(_) | SqlType::Date) {
        return Err(Error::unsupported(format!(
            "GROUP BY a {ty} column on the GPU"
        )));
    }
    let (mut lo, mut hi) = (i128::MAX, i128::MIN);
    for c in 0..file.num_chunks() {
        let m = file.try_chunk_meta(*index, c)?;
        let (Some(Scalar::Int(a)), Some(Scalar::Int(b))) = (&m.stats.min, &m.stats.max) else {
            return Err(Error::unsupported(
                "GROUP BY a column without zone maps on the GPU",
            ));
        };
        (lo, hi) = (lo.min(*a), hi.max(*b));
    }
    if lo > hi {
        (lo, hi) = (0, 0);
    }
    let len = usize::try_from(hi - lo + 1)
        .ok()
        .filter(|&l| l <= MAX_GROUPS)
        .ok_or_else(|| {
            Error::unsupported(format!(
                "GROUP BY a column spanning more than {MAX_GROUPS} values on the GPU"
            ))
        })?;
    let slot = slot_of(column_slot, *index)?;
    Ok(KeyMap::Range {
        slot,
        lo: i64::try_from(lo).map_err(|_| Error::unsupported("a key beyond 64 bits"))?,
        len,
    })
}

/// The kernel slot of table column `index`.
fn slot_of(column_slot: &[(usize, usize)], index: usize) -> Result<usize> {
    column_slot
        .iter()
        .find(|(c, _)| *c == index)
        .map(|(_, s)| *s)
        .ok_or_else(|| Error::invalid(format!("column {index} has no slot in the kernel")))
}

/// Whether `q` reads column `c` anywhere but its GROUP BY keys.
fn read_outside_keys(q: &Query, c: usize) -> bool {
    let mut cols = Vec::new();
    if let Some(f) = &q.filter {
        f.columns(&mut cols);
    }
    for a in &q.aggregates {
        if let Some(e) = &a.arg {
            e.columns(&mut cols);
        }
    }
    cols.contains(&c)
}

/// Adds the code maps of string key column `c` to `codes`: every chunk must be a `strdict`
/// (the codes decode on the device, the dictionaries here). Returns the codes' physical type.
fn string_key(file: &zipflow_format::ZfFile, c: usize, codes: &mut Codes) -> Result<PType> {
    let mut index: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let mut strings: Vec<String> = Vec::new();
    let mut scratch = Scratch::default();
    let mut ptype = None;
    for k in 0..file.num_chunks() {
        let (payload, _) = decoded_tree(file, c, k)?;
        let root = NodeView::parse(&payload).map_err(|e| e.at_chunk(k as u32))?;
        if root.id != zipflow_encodings::strdict::ID {
            return Err(Error::unsupported(format!(
                "GROUP BY a string column on the GPU needs dictionary-coded chunks (strdict); \
                 row group {k} is not"
            )));
        }
        let code_node = root.child(0, "strdict codes")?;
        if *ptype.get_or_insert(code_node.ptype) != code_node.ptype || !code_node.ptype.is_int() {
            return Err(Error::unsupported(
                "string key codes of different types across row groups on the GPU",
            ));
        }
        let dict_node = root.child(1, "strdict dictionary")?;
        if dict_node.len > MAX_GROUPS {
            return Err(Error::unsupported(format!(
                "GROUP BY a string column with more than {MAX_GROUPS} distinct values on the GPU"
            )));
        }
        let Values::Bytes(dict) = scratch.decode(dict_node)? else {
            return Err(Error::corrupt(
                "a strdict dictionary that is not byte strings",
            ));
        };
        // Each map is preceded by its length, which the kernel checks codes against.
        codes.maps.push(dict.len() as u32);
        codes.base.push(
            u32::try_from(codes.maps.len())
                .map_err(|_| Error::unsupported("key maps beyond 2^32 entries"))?,
        );
        for i in 0..dict.len() {
            // As the CPU engine reads a string cell (lossy for bytes that are not UTF-8).
            let s = String::from_utf8_lossy(dict.get(i).unwrap_or(&[])).into_owned();
            let next = strings.len();
            let id = *index.entry(s.clone()).or_insert_with(|| {
                strings.push(s);
                next as u32
            });
            codes.maps.push(id);
        }
        if strings.len() > MAX_GROUPS {
            return Err(Error::unsupported(format!(
                "GROUP BY a string column with more than {MAX_GROUPS} distinct values on the GPU"
            )));
        }
    }
    codes.strings.push(strings);
    ptype.ok_or_else(|| Error::unsupported("GROUP BY a string column of an empty table"))
}

/// The table's row groups in batches of at most `batch_rows` rows (at least one each).
fn batches(table: &Table, batch_rows: u64) -> Vec<Vec<usize>> {
    let file = table.file();
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut rows = 0u64;
    for c in 0..file.num_chunks() {
        let r = file.try_chunk_meta(0, c).map_or(0, |m| u64::from(m.rows));
        match out.last_mut() {
            Some(b) if rows + r <= batch_rows => {
                b.push(c);
                rows += r;
            }
            _ => {
                out.push(vec![c]);
                rows = r;
            }
        }
    }
    out
}
