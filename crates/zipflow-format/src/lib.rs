//! The zipflow file: a streaming writer, a random-access reader, and Arrow conversion.
//!
//! This crate sits at the end of the write path and the start of the read path:
//!
//! ```text
//! Arrow batches -> arrow::to_column -> a plan chooser / zipflow-encodings -> file (payloads)
//! file -> footer index -> one chunk's node trees -> zipflow_encodings::decode -> arrow::from_column
//! ```
//!
//! - [`file`](mod@file): the container. Header, 8-byte aligned chunk payloads (serialised node trees),
//!   footer (schema, per-chunk index with offsets, zone maps, plans and xxh3 checksums),
//!   trailer. It knows encodings only through node bytes and plan text; any chunk of any
//!   column is readable alone. `docs/format.md` draws the bytes.
//! - [`arrow`]: Arrow arrays to value streams and back, exact `DataType` round trip.
//! - [`table`]: [`TableWriter`] (record batches in, row groups out, columns encoded in
//!   parallel) and [`ZfFile::read_batch`] / [`ZfFile::batches`].
//!
//! ```
//! use std::sync::Arc;
//! use arrow::array::{Int64Array, RecordBatch, StringArray};
//! use arrow::datatypes::{DataType, Field, Schema};
//! use zipflow_format::{TableWriter, WriteOptions, ZfFile};
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Int64, false),
//!     Field::new("name", DataType::Utf8, true),
//! ]));
//! let batch = RecordBatch::try_new(schema.clone(), vec![
//!     Arc::new(Int64Array::from_iter_values(0..3000)),
//!     Arc::new(StringArray::from_iter((0..3000).map(|i| (i % 7 != 0).then(|| format!("n{i}"))))),
//! ]).unwrap();
//!
//! let dir = std::env::temp_dir().join(format!("zipflow-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("t.zf");
//! let options = WriteOptions {
//!     chunk_rows: 1024,
//!     overwrite: true,
//!     chooser: Some(zipflow_select::Chooser::shared(Default::default())),
//!     ..Default::default()
//! };
//! let mut writer = TableWriter::create(&path, schema, options).unwrap();
//! writer.write(&batch).unwrap();
//! let summary = writer.finish().unwrap();
//! assert_eq!(summary.rows, 3000);
//!
//! let file = ZfFile::open(&path).unwrap();
//! assert_eq!(file.num_chunks(), 3);
//! let second = file.read_batch(1).unwrap(); // rows 1024..2048, decoded alone
//! assert_eq!(second, batch.slice(1024, 1024));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

pub mod arrow;
pub mod cleanup;
pub mod file;
pub mod nulls;
pub mod table;
pub mod text;

pub use arrow::ArrayPool;
pub use file::{ChunkMeta, ColumnMeta, FileWriter, Payload, Validity, ZfFile};
pub use table::{ColumnSummary, FileSummary, TableWriter, WriteOptions};
