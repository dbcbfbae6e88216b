//! Raster bands: single-band GeoTIFF in (strips or tiles, uncompressed, Deflate, LZW or ZSTD;
//! integer or float samples), one-column zipflow file out, and back.
//!
//! A band is stored as a table with one column named [`VALUE_COLUMN`] of the band's sample
//! type holding the pixels in row-major order (row 0 left to right, then row 1, ...); the
//! image size lives in the Arrow schema metadata under [`WIDTH_KEY`] and [`HEIGHT_KEY`]
//! (decimal strings), and the TIFF's no-data value, if it states one, under [`NODATA_KEY`].
//! Any plan that stores the type works. The default, [`predictor_plan`], predicts each pixel
//! from its neighbours to the left, above and above-left, and entropy-codes what is left. The
//! NDVI kernels in [`crate::ndvi`] read uint16 bands: `bitpack`, `for | bitpack` and `for |
//! patch | bitpack` (and `patch | bitpack`) chunks are unpacked a vector at a time without
//! decoding them to memory, any other plan (the predictor's included) a chunk at a time.
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
use std::io::{Read, Seek};
use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float32Array, Float64Array, Int8Array, Int16Array, Int32Array, RecordBatch,
    UInt8Array, UInt16Array, UInt32Array,
};
use arrow::datatypes::{DataType, Field, Schema};
use zipflow_core::{Error, IntVec, Plan, Result, VECTOR_LEN, Values};
use zipflow_encodings::PlanChooser;
use zipflow_format::file::ZfFile;
use zipflow_format::table::{FileSummary, TableWriter, WriteOptions};

/// Name of the pixel column.
pub const VALUE_COLUMN: &str = "value";
/// Schema metadata key of the image width in pixels.
pub const WIDTH_KEY: &str = "zipflow.raster.width";
/// Schema metadata key of the image height in pixels.
pub const HEIGHT_KEY: &str = "zipflow.raster.height";
/// Schema metadata key of the band's no-data value, as its TIFF stated it.
pub const NODATA_KEY: &str = "zipflow.raster.nodata";
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

/// One band of any supported sample type, as read from a TIFF: the input of
/// [`write_image`].
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// `width * height` pixels, row-major: u8, u16, u32, i8, i16, i32, f32 or f64.
    pub pixels: Values,
    /// The band's no-data value as the TIFF states it (GDAL's `GDAL_NODATA` tag), if any.
    pub nodata: Option<String>,
}

impl From<Raster> for Image {
    fn from(r: Raster) -> Image {
        Image {
            width: r.width,
            height: r.height,
            pixels: Values::Int(IntVec::U16(r.pixels)),
            nodata: None,
        }
    }
}

/// Reads the first image (the full-resolution one of a cloud-optimised GeoTIFF) of a
/// single-band TIFF: strips or tiles, uncompressed or compressed with Deflate, LZW or ZSTD,
/// with or without a horizontal or floating-point predictor; 8-, 16- and 32-bit integer and
/// 32- and 64-bit float samples. Its `GDAL_NODATA` tag, if any, is kept.
pub fn read_image(path: impl AsRef<Path>) -> Result<Image> {
    let path = path.as_ref();
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let tiff_err = |e: tiff::TiffError| Error::external("reading TIFF", e).in_file(path);
    let mut dec = tiff::decoder::Decoder::new(std::io::BufReader::new(file)).map_err(tiff_err)?;
    let color = dec.colortype().map_err(tiff_err)?;
    if !matches!(color, tiff::ColorType::Gray(_)) {
        return Err(Error::unsupported(format!(
            "TIFF color type {color:?}: only single-band rasters are read (write each band \
             to its own file, e.g. `gdal_translate -b N`)"
        ))
        .in_file(path));
    }
    let (width, height) = dec.dimensions().map_err(tiff_err)?;
    let nodata = match dec.find_tag(tiff::tags::Tag::GdalNodata) {
        Ok(Some(v)) => Some(
            v.into_string()
                .map_err(tiff_err)?
                .trim_end_matches('\0')
                .trim()
                .to_string(),
        ),
        Ok(None) => None,
        Err(e) => return Err(tiff_err(e)),
    };
    use tiff::decoder::DecodingResult as D;
    let tiled_lzw = dec.get_chunk_type() == tiff::decoder::ChunkType::Tile
        && dec
            .find_tag_unsigned::<u16>(tiff::tags::Tag::Compression)
            .map_err(tiff_err)?
            == Some(LZW);
    let result = if tiled_lzw {
        lzw_tiles(&mut dec, width, height).map_err(|e| e.in_file(path))?
    } else {
        // The `tiff` crate has asserted on damaged compressed streams instead of failing:
        // such a file is an error here like any other damage.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dec.read_image()))
            .map_err(|_| {
                Error::corrupt("the TIFF decoder failed on its compressed image data").in_file(path)
            })?
            .map_err(tiff_err)?
    };
    let pixels = match result {
        D::U8(v) => Values::Int(IntVec::U8(v)),
        D::U16(v) => Values::Int(IntVec::U16(v)),
        D::U32(v) => Values::Int(IntVec::U32(v)),
        D::I8(v) => Values::Int(IntVec::I8(v)),
        D::I16(v) => Values::Int(IntVec::I16(v)),
        D::I32(v) => Values::Int(IntVec::I32(v)),
        D::F32(v) => Values::F32(v),
        D::F64(v) => Values::F64(v),
        D::U64(_) | D::I64(_) | D::F16(_) => {
            return Err(Error::unsupported(
                "TIFF samples of 64-bit integers or 16-bit floats: rasters of 8-, 16- and \
                 32-bit integers and 32- and 64-bit floats are read",
            )
            .in_file(path));
        }
    };
    if pixels.len() as u64 != u64::from(width) * u64::from(height) {
        return Err(Error::corrupt(format!(
            "{} pixels do not make a {width} x {height} raster",
            pixels.len()
        ))
        .in_file(path));
    }
    Ok(Image {
        width,
        height,
        pixels,
        nodata,
    })
}

/// TIFF compression code of LZW.
const LZW: u16 = 5;

/// The image of a tiled, LZW-compressed single-band TIFF (the `tiff` crate's own tile reader
/// fails on LZW tiles): each tile decoded whole with `weezl`, its horizontal predictor undone,
/// its visible part copied into place.
fn lzw_tiles<R: Read + Seek>(
    dec: &mut tiff::decoder::Decoder<R>,
    width: u32,
    height: u32,
) -> Result<tiff::decoder::DecodingResult> {
    use tiff::decoder::DecodingResult as D;
    use tiff::tags::Tag;
    let tiff_err = |e: tiff::TiffError| Error::external("reading TIFF", e);
    let mut order = [0u8; 2];
    let reader = dec.inner();
    reader
        .seek(std::io::SeekFrom::Start(0))
        .and_then(|_| reader.read_exact(&mut order))
        .map_err(|e| Error::external("reading the TIFF header", e))?;
    if &order != b"II" {
        return Err(Error::unsupported(
            "big-endian TIFFs with LZW tiles (little-endian ones, and big-endian strips, are read)",
        ));
    }
    let bits = dec
        .get_tag_unsigned::<u16>(Tag::BitsPerSample)
        .map_err(tiff_err)?;
    let format = dec
        .find_tag_unsigned::<u16>(Tag::SampleFormat)
        .map_err(tiff_err)?
        .unwrap_or(1);
    let predictor = dec
        .find_tag_unsigned::<u16>(Tag::Predictor)
        .map_err(tiff_err)?
        .unwrap_or(1);
    let (tw, th) = dec.chunk_dimensions();
    let offsets = dec.get_tag_u64_vec(Tag::TileOffsets).map_err(tiff_err)?;
    let counts = dec.get_tag_u64_vec(Tag::TileByteCounts).map_err(tiff_err)?;
    let size = usize::from(bits / 8);
    if !matches!(bits, 8 | 16 | 32 | 64) || !matches!(format, 1..=3) || tw == 0 || th == 0 {
        return Err(Error::unsupported(format!(
            "LZW tiles of {bits}-bit samples of format {format}"
        )));
    }
    if !matches!(predictor, 1 | 2) || (predictor == 2 && format == 3) {
        return Err(Error::unsupported(format!(
            "LZW tiles with TIFF predictor {predictor} (none and the horizontal predictor on \
             integers are read)"
        )));
    }
    let (across, down) = (width.div_ceil(tw) as usize, height.div_ceil(th) as usize);
    if offsets.len() < across * down || counts.len() < across * down {
        return Err(Error::corrupt(format!(
            "{} tile offsets and {} byte counts for {across} x {down} tiles",
            offsets.len(),
            counts.len()
        )));
    }
    let (tw, th, w) = (tw as usize, th as usize, width as usize);
    let tile_bytes = tw * th * size;
    let mut image = vec![0u8; w * height as usize * size];
    let mut packed = Vec::new();
    for t in 0..across * down {
        let reader = dec.inner();
        reader
            .seek(std::io::SeekFrom::Start(offsets[t]))
            .map_err(|e| Error::external("reading an LZW tile", e))?;
        let count = usize::try_from(counts[t])
            .map_err(|_| Error::corrupt(format!("tile {t} claims {} bytes", counts[t])))?;
        packed.clear();
        (&mut *reader)
            .take(count as u64)
            .read_to_end(&mut packed)
            .map_err(|e| Error::external("reading an LZW tile", e))?;
        if packed.len() != count {
            return Err(Error::corrupt(format!(
                "tile {t} is cut short: {} of its {count} bytes",
                packed.len()
            )));
        }
        let mut tile = weezl::decode::Configuration::with_tiff_size_switch(weezl::BitOrder::Msb, 8)
            .build()
            .decode(&packed)
            .map_err(|e| Error::corrupt(format!("LZW tile {t}: {e}")))?;
        // A tile that decodes short is padded with zeros, as the `tiff` crate does for strips.
        tile.resize(tile_bytes, 0);
        if predictor == 2 {
            for row in tile.chunks_exact_mut(tw * size) {
                undo_horizontal(row, size);
            }
        }
        let (tx, ty) = (t % across * tw, t / across * th);
        for r in 0..th.min(height as usize - ty) {
            let cols = tw.min(w - tx);
            let from = r * tw * size;
            let to = ((ty + r) * w + tx) * size;
            image[to..to + cols * size].copy_from_slice(&tile[from..from + cols * size]);
        }
    }
    let le = |chunk: &[u8]| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..chunk.len()].copy_from_slice(chunk);
        a
    };
    let words = image.chunks_exact(size).map(|c| u64::from_le_bytes(le(c)));
    Ok(match (format, bits) {
        (1, 8) => D::U8(image),
        (1, 16) => D::U16(words.map(|v| v as u16).collect()),
        (1, 32) => D::U32(words.map(|v| v as u32).collect()),
        (2, 8) => D::I8(words.map(|v| v as i8).collect()),
        (2, 16) => D::I16(words.map(|v| v as i16).collect()),
        (2, 32) => D::I32(words.map(|v| v as i32).collect()),
        (3, 32) => D::F32(words.map(|v| f32::from_bits(v as u32)).collect()),
        (3, 64) => D::F64(words.map(f64::from_bits).collect()),
        (1, 64) => D::U64(words.collect()),
        (2, 64) => D::I64(words.map(|v| v as i64).collect()),
        _ => {
            return Err(Error::unsupported(format!(
                "LZW tiles of {bits}-bit samples of format {format}"
            )));
        }
    })
}

/// Undoes TIFF's horizontal predictor on one row of little-endian samples of `size` bytes:
/// each sample is the wrapping sum of its stored difference and the sample to its left.
fn undo_horizontal(row: &mut [u8], size: usize) {
    let mut prev = 0u64;
    let mask = if size == 8 {
        u64::MAX
    } else {
        (1u64 << (8 * size)) - 1
    };
    for s in row.chunks_exact_mut(size) {
        let mut a = [0u8; 8];
        a[..size].copy_from_slice(s);
        prev = prev.wrapping_add(u64::from_le_bytes(a)) & mask;
        s.copy_from_slice(&prev.to_le_bytes()[..size]);
    }
}

/// Reads a single-band uint16 TIFF (any layout and compression [`read_image`] reads).
pub fn read_tiff(path: impl AsRef<Path>) -> Result<Raster> {
    let path = path.as_ref();
    let image = read_image(path)?;
    match image.pixels {
        Values::Int(IntVec::U16(pixels)) => {
            Raster::new(image.width, image.height, pixels).map_err(|e| e.in_file(path))
        }
        other => Err(Error::unsupported(format!(
            "TIFF samples are {}, a uint16 band is needed here",
            other.ptype()
        ))
        .in_file(path)),
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

/// The schema of a u16 raster file of `width x height` pixels.
pub fn schema(width: u32, height: u32) -> Schema {
    image_schema(width, height, &DataType::UInt16, None)
}

/// The schema of a raster file of `width x height` pixels of `data_type`.
fn image_schema(width: u32, height: u32, data_type: &DataType, nodata: Option<&str>) -> Schema {
    let mut metadata = HashMap::from([
        (WIDTH_KEY.to_string(), width.to_string()),
        (HEIGHT_KEY.to_string(), height.to_string()),
    ]);
    if let Some(nd) = nodata {
        metadata.insert(NODATA_KEY.to_string(), nd.to_string());
    }
    Schema::new(vec![Field::new(VALUE_COLUMN, data_type.clone(), false)]).with_metadata(metadata)
}

/// How a raster's chunks are encoded.
#[derive(Debug, Clone)]
pub enum RasterPlan {
    /// This plan for every chunk.
    Forced(Plan),
    /// A plan chosen per chunk.
    Chosen(Arc<dyn PlanChooser>),
}

/// The default plan of a band `width` pixels wide: the planar gradient predictor (the pixel
/// to the left plus the pixel above minus the pixel above-left) and an entropy coder for its
/// residuals.
pub fn predictor_plan(width: u32) -> Plan {
    Plan::new("above")
        .param(i64::from(width))
        .then(Plan::new("delta"))
        .then(Plan::new("zigzag"))
        .then(Plan::new("ans"))
}

/// Writes `raster` to a zipflow file at `path` in chunks of [`RASTER_CHUNK_ROWS`] pixels,
/// encoded as `plan` says.
pub fn write_zf(
    raster: &Raster,
    path: impl AsRef<Path>,
    plan: RasterPlan,
    overwrite: bool,
) -> Result<FileSummary> {
    let pixels = Pixels::U16(&raster.pixels);
    write_pixels(
        raster.width,
        raster.height,
        pixels,
        None,
        path,
        plan,
        overwrite,
    )
}

/// Writes a band of any sample type [`read_image`] reads, as [`write_zf`] does; its no-data
/// value goes into the schema metadata under [`NODATA_KEY`].
pub fn write_image(
    image: &Image,
    path: impl AsRef<Path>,
    plan: RasterPlan,
    overwrite: bool,
) -> Result<FileSummary> {
    let pixels = match &image.pixels {
        Values::Int(IntVec::U8(v)) => Pixels::U8(v),
        Values::Int(IntVec::U16(v)) => Pixels::U16(v),
        Values::Int(IntVec::U32(v)) => Pixels::U32(v),
        Values::Int(IntVec::I8(v)) => Pixels::I8(v),
        Values::Int(IntVec::I16(v)) => Pixels::I16(v),
        Values::Int(IntVec::I32(v)) => Pixels::I32(v),
        Values::F32(v) => Pixels::F32(v),
        Values::F64(v) => Pixels::F64(v),
        other => {
            return Err(Error::unsupported(format!(
                "raster pixels of type {}",
                other.ptype()
            )));
        }
    };
    let (w, h, nd) = (image.width, image.height, image.nodata.as_deref());
    write_pixels(w, h, pixels, nd, path, plan, overwrite)
}

/// A borrowed band's pixels.
#[derive(Clone, Copy)]
enum Pixels<'a> {
    U8(&'a [u8]),
    U16(&'a [u16]),
    U32(&'a [u32]),
    I8(&'a [i8]),
    I16(&'a [i16]),
    I32(&'a [i32]),
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl Pixels<'_> {
    fn len(self) -> usize {
        match self {
            Pixels::U8(v) => v.len(),
            Pixels::U16(v) => v.len(),
            Pixels::U32(v) => v.len(),
            Pixels::I8(v) => v.len(),
            Pixels::I16(v) => v.len(),
            Pixels::I32(v) => v.len(),
            Pixels::F32(v) => v.len(),
            Pixels::F64(v) => v.len(),
        }
    }

    fn data_type(self) -> DataType {
        match self {
            Pixels::U8(_) => DataType::UInt8,
            Pixels::U16(_) => DataType::UInt16,
            Pixels::U32(_) => DataType::UInt32,
            Pixels::I8(_) => DataType::Int8,
            Pixels::I16(_) => DataType::Int16,
            Pixels::I32(_) => DataType::Int32,
            Pixels::F32(_) => DataType::Float32,
            Pixels::F64(_) => DataType::Float64,
        }
    }

    /// Pixels `range` as an Arrow array.
    fn array(self, range: std::ops::Range<usize>) -> ArrayRef {
        match self {
            Pixels::U8(v) => Arc::new(UInt8Array::from(v[range].to_vec())),
            Pixels::U16(v) => Arc::new(UInt16Array::from(v[range].to_vec())),
            Pixels::U32(v) => Arc::new(UInt32Array::from(v[range].to_vec())),
            Pixels::I8(v) => Arc::new(Int8Array::from(v[range].to_vec())),
            Pixels::I16(v) => Arc::new(Int16Array::from(v[range].to_vec())),
            Pixels::I32(v) => Arc::new(Int32Array::from(v[range].to_vec())),
            Pixels::F32(v) => Arc::new(Float32Array::from(v[range].to_vec())),
            Pixels::F64(v) => Arc::new(Float64Array::from(v[range].to_vec())),
        }
    }
}

fn write_pixels(
    width: u32,
    height: u32,
    pixels: Pixels<'_>,
    nodata: Option<&str>,
    path: impl AsRef<Path>,
    plan: RasterPlan,
    overwrite: bool,
) -> Result<FileSummary> {
    if pixels.len() as u64 != u64::from(width) * u64::from(height) {
        return Err(Error::invalid(format!(
            "{} pixels do not make a {width} x {height} raster",
            pixels.len()
        )));
    }
    let schema = Arc::new(image_schema(width, height, &pixels.data_type(), nodata));
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
    let step = 16 * RASTER_CHUNK_ROWS;
    for start in (0..pixels.len()).step_by(step) {
        let array = pixels.array(start..(start + step).min(pixels.len()));
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

    /// The no-data value the band's TIFF stated, if any.
    pub fn nodata(&self) -> Option<String> {
        self.file.arrow_schema().metadata().get(NODATA_KEY).cloned()
    }

    /// Fails unless the band's no-data value, if stated, is 0: the NDVI kernels take a pixel
    /// whose bands are both 0 as no data, and no other value.
    pub fn check_ndvi_nodata(&self) -> Result<()> {
        match self.nodata().as_deref() {
            Some(v) if v.parse::<f64>().ok() != Some(0.0) => Err(Error::unsupported(format!(
                "the band states the no-data value `{v}`; NDVI takes a pixel whose bands are \
                 both 0 as no data, and no other value"
            ))
            .in_file(self.file.path())),
            _ => Ok(()),
        }
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
