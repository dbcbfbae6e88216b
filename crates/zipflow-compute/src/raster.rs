//! Raster bands: single-band uint16 GeoTIFF in, one-column zipflow file out, and back.
//!
//! A band is stored as a table with one u16 column named [`VALUE_COLUMN`] holding the pixels in
//! row-major order (row 0 left to right, then row 1, ...); the image size lives in the Arrow
//! schema metadata under [`WIDTH_KEY`] and [`HEIGHT_KEY`] (decimal strings). Any plan that
//! stores u16 works; `bitpack`, `for | bitpack` and `for | patch | bitpack` (and `patch |
//! bitpack`) chunks are read by the fused two-band kernels in [`crate::ndvi`] without
//! decoding them to memory.
//!
//! ```no_run
//! use zipflow_compute::raster;
//!
//! let band = raster::read_tiff("B08.tif").unwrap();
//! let plan = "for | bitpack".parse().unwrap();
//! raster::write_zf(&band, "B08.zf", raster::RasterPlan::Forced(plan), true).unwrap();
//! let back = raster::Band::open("B08.zf").unwrap();
//! assert_eq!((back.width, back.height), (band.width, band.height));
//! ```

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use arrow::array::{RecordBatch, UInt16Array};
use arrow::datatypes::{DataType, Field, Schema};
use zipflow_core::{Error, Plan, Result, VECTOR_LEN};
use zipflow_encodings::PlanChooser;
use zipflow_format::file::ZfFile;
use zipflow_format::table::{FileSummary, TableWriter, WriteOptions};

/// Name of the pixel column.
pub const VALUE_COLUMN: &str = "value";
/// Schema metadata key of the image width in pixels.
pub const WIDTH_KEY: &str = "zipflow.raster.width";
/// Schema metadata key of the image height in pixels.
pub const HEIGHT_KEY: &str = "zipflow.raster.height";
/// Rows per chunk of a raster file: 256 vectors, so a chunk of two bands (1 MiB plain) is a
/// unit of parallel work large enough to amortise scheduling and small enough to balance.
pub const RASTER_CHUNK_ROWS: usize = 256 * VECTOR_LEN;

/// One uint16 band in memory, row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Raster {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// `width * height` pixels, row-major.
    pub pixels: Vec<u16>,
}

impl Raster {
    /// A raster from its pixels; fails unless `pixels.len() == width * height`.
    pub fn new(width: u32, height: u32, pixels: Vec<u16>) -> Result<Raster> {
        if pixels.len() as u64 != u64::from(width) * u64::from(height) {
            return Err(Error::invalid(format!(
                "{} pixels do not make a {width} x {height} raster",
                pixels.len()
            )));
        }
        Ok(Raster {
            width,
            height,
            pixels,
        })
    }

    /// The `w x h` window whose top-left pixel is `(x, y)`.
    pub fn crop(&self, x: u32, y: u32, w: u32, h: u32) -> Result<Raster> {
        if u64::from(x) + u64::from(w) > u64::from(self.width)
            || u64::from(y) + u64::from(h) > u64::from(self.height)
        {
            return Err(Error::invalid(format!(
                "window {w} x {h} at ({x}, {y}) exceeds the {} x {} raster",
                self.width, self.height
            )));
        }
        let (x, w) = (x as usize, w as usize);
        let mut pixels = Vec::with_capacity(w * h as usize);
        for row in y..y + h {
            let start = row as usize * self.width as usize + x;
            pixels.extend_from_slice(&self.pixels[start..start + w]);
        }
        Raster::new(w as u32, h, pixels)
    }

    /// The raster stacked vertically `copies` times (a larger scene with the same statistics).
    pub fn tile_vertically(&self, copies: u32) -> Result<Raster> {
        let height = self
            .height
            .checked_mul(copies)
            .ok_or_else(|| Error::invalid("tiled raster height overflows u32"))?;
        let mut pixels = Vec::with_capacity(self.pixels.len() * copies as usize);
        for _ in 0..copies {
            pixels.extend_from_slice(&self.pixels);
        }
        Raster::new(self.width, height, pixels)
    }
}

/// Reads the first image of a single-band uint16 TIFF (any layout the `tiff` crate reads
/// without a codec: uncompressed strips or tiles).
pub fn read_tiff(path: impl AsRef<Path>) -> Result<Raster> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let tiff_err = |e: tiff::TiffError| Error::external("reading TIFF", e).in_file(path);
    let mut dec = tiff::decoder::Decoder::new(std::io::BufReader::new(file)).map_err(tiff_err)?;
    let color = dec.colortype().map_err(tiff_err)?;
    if color != tiff::ColorType::Gray(16) {
        return Err(Error::unsupported(format!(
            "TIFF color type {color:?}: only single-band uint16 (Gray(16)) rasters are read"
        ))
        .in_file(path));
    }
    let (width, height) = dec.dimensions().map_err(tiff_err)?;
    match dec.read_image().map_err(tiff_err)? {
        tiff::decoder::DecodingResult::U16(pixels) => {
            Raster::new(width, height, pixels).map_err(|e| e.in_file(path))
        }
        _ => Err(Error::unsupported("TIFF sample format is not uint16").in_file(path)),
    }
}

/// Writes `raster` as an uncompressed single-band uint16 TIFF (for tests and tools).
pub fn write_tiff(raster: &Raster, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let tiff_err = |e: tiff::TiffError| Error::external("writing TIFF", e).in_file(path);
    let mut enc =
        tiff::encoder::TiffEncoder::new(std::io::BufWriter::new(file)).map_err(tiff_err)?;
    enc.write_image::<tiff::encoder::colortype::Gray16>(raster.width, raster.height, &raster.pixels)
        .map_err(tiff_err)
}

/// The schema of a raster file of `width x height` pixels.
pub fn schema(width: u32, height: u32) -> Schema {
    let metadata = HashMap::from([
        (WIDTH_KEY.to_string(), width.to_string()),
        (HEIGHT_KEY.to_string(), height.to_string()),
    ]);
    Schema::new(vec![Field::new(VALUE_COLUMN, DataType::UInt16, false)]).with_metadata(metadata)
}

/// How a raster's chunks are encoded.
#[derive(Debug, Clone)]
pub enum RasterPlan {
    /// This plan for every chunk.
    Forced(Plan),
    /// A plan chosen per chunk.
    Chosen(Arc<dyn PlanChooser>),
}

/// Writes `raster` to a zipflow file at `path` in chunks of [`RASTER_CHUNK_ROWS`] pixels,
/// encoded as `plan` says.
pub fn write_zf(
    raster: &Raster,
    path: impl AsRef<Path>,
    plan: RasterPlan,
    overwrite: bool,
) -> Result<FileSummary> {
    let schema = Arc::new(schema(raster.width, raster.height));
    let mut options = WriteOptions {
        chunk_rows: RASTER_CHUNK_ROWS,
        overwrite,
        ..WriteOptions::default()
    };
    match plan {
        RasterPlan::Forced(p) => {
            options.plans.insert(VALUE_COLUMN.to_string(), p);
        }
        RasterPlan::Chosen(c) => options.chooser = Some(c),
    }
    let mut writer = TableWriter::create(path, schema.clone(), options)?;
    // Batches of several chunks: the writer encodes the chunks of a batch's row groups while
    // only this slice is copied into Arrow.
    for part in raster.pixels.chunks(16 * RASTER_CHUNK_ROWS) {
        let array = Arc::new(UInt16Array::from(part.to_vec()));
        let batch = RecordBatch::try_new(schema.clone(), vec![array])
            .map_err(|e| Error::external("building a raster batch", e))?;
        writer.write(&batch)?;
    }
    writer.finish()
}

/// A raster band stored in a zipflow file.
pub struct Band {
    /// The file.
    pub file: ZfFile,
    /// Index of [`VALUE_COLUMN`] in it.
    pub column: usize,
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
}

impl Band {
    /// Opens a raster file and checks its schema: a u16 [`VALUE_COLUMN`] and a width and
    /// height whose product is the row count.
    pub fn open(path: impl AsRef<Path>) -> Result<Band> {
        let path = path.as_ref();
        Band::new(ZfFile::open(path)?).map_err(|e| e.in_file(path))
    }

    /// Checks an open file as [`Band::open`] does.
    pub fn new(file: ZfFile) -> Result<Band> {
        let schema = file.arrow_schema();
        let dim = |key: &str| -> Result<u32> {
            schema
                .metadata()
                .get(key)
                .ok_or_else(|| Error::invalid(format!("not a raster file: no `{key}` metadata")))?
                .parse::<u32>()
                .map_err(|_| Error::corrupt(format!("`{key}` metadata is not a u32")))
        };
        let (width, height) = (dim(WIDTH_KEY)?, dim(HEIGHT_KEY)?);
        let column = file.column_index(VALUE_COLUMN).ok_or_else(|| {
            Error::invalid(format!("not a raster file: no `{VALUE_COLUMN}` column"))
        })?;
        let field = schema.field(column);
        if field.data_type() != &DataType::UInt16 {
            return Err(Error::unsupported(format!(
                "raster column `{VALUE_COLUMN}` is {}, only uint16 bands are supported",
                field.data_type()
            )));
        }
        if u64::from(width) * u64::from(height) != file.num_rows() {
            return Err(Error::corrupt(format!(
                "raster metadata says {width} x {height} pixels, the file holds {} rows",
                file.num_rows()
            )));
        }
        Ok(Band {
            file,
            column,
            width,
            height,
        })
    }

    /// Pixels in the band.
    pub fn pixels(&self) -> u64 {
        self.file.num_rows()
    }

    /// Decodes the whole band (for references and tools; the kernels never do this).
    pub fn decode(&self) -> Result<Raster> {
        let mut scratch = zipflow_encodings::Scratch::default();
        let mut pixels = Vec::with_capacity(self.pixels() as usize);
        for chunk in 0..self.file.num_chunks() {
            let (values, validity) = self.file.read_chunk(self.column, chunk, &mut scratch)?;
            if validity.is_some() {
                return Err(Error::unsupported("raster bands with null pixels"));
            }
            match values {
                zipflow_core::Values::Int(zipflow_core::IntVec::U16(v)) => {
                    pixels.extend_from_slice(&v)
                }
                _ => return Err(Error::corrupt("raster chunk is not u16")),
            }
        }
        Raster::new(self.width, self.height, pixels)
    }
}
