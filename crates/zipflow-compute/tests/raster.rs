//! TIFF bands in every layout and codec the reader takes, through .zf and back, and fused NDVI
//! over bands stored with the 2-D predictor. The files are made by `tests/data/raster/make.py`
//! from formulas recomputed here.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use zipflow_compute::ndvi::{self, Op};
use zipflow_compute::raster::{self, Band, Image, Raster, RasterPlan};
use zipflow_core::{IntVec, Values};

const W: u32 = 97;
const H: u32 = 61;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/raster")
        .join(name)
}

/// The integer formula of `make.py`, before its type's adjustment.
fn formula() -> impl Iterator<Item = i64> {
    (0..H as i64).flat_map(|y| (0..W as i64).map(move |x| x * 7 + y * 13 + (x * y) % 17))
}

fn expected(name: &str) -> Values {
    if name.starts_with("u16") {
        Values::Int(IntVec::U16(formula().map(|v| v as u16).collect()))
    } else if name.starts_with("u8") {
        Values::Int(IntVec::U8(formula().map(|v| (v % 256) as u8).collect()))
    } else if name.starts_with("i16") {
        Values::Int(IntVec::I16(formula().map(|v| (v - 600) as i16).collect()))
    } else {
        Values::F32(
            (0..H)
                .flat_map(|y| (0..W).map(move |x| x as f32 * 0.5 + y as f32 * 0.25 - 3.0))
                .collect(),
        )
    }
}

const FIXTURES: &[(&str, Option<&str>)] = &[
    ("u16_deflate_tiled.tif", Some("0")),
    ("u16_lzw_strips.tif", None),
    ("u16_zstd_cog.tif", Some("0")),
    ("u8_lzw_tiled.tif", None),
    ("u16_lzw_cog.tif", Some("0")),
    ("f32_lzw_tiled.tif", None),
    ("i16_zstd_strips.tif", Some("-9999")),
    ("f32_deflate_tiled.tif", Some("nan")),
];

#[test]
fn every_layout_and_codec_reads_its_pixels() {
    for &(name, nodata) in FIXTURES {
        let image = raster::read_image(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!((image.width, image.height), (W, H), "{name}");
        assert_eq!(image.pixels, expected(name), "{name}");
        assert_eq!(image.nodata.as_deref(), nodata, "{name}");
    }
}

/// Writes `image` by `plan` and reads the column back (one chunk: the fixtures are small);
/// the plan summary.
fn through_zf(image: &Image, plan: RasterPlan) -> (Values, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("band.zf");
    let summary = raster::write_image(image, &path, plan, false).unwrap();
    let file = zipflow_format::file::ZfFile::open(&path).unwrap();
    let meta = file.arrow_schema().metadata().clone();
    assert_eq!(meta[raster::WIDTH_KEY], image.width.to_string());
    assert_eq!(meta.get(raster::NODATA_KEY), image.nodata.as_ref());
    assert_eq!(file.num_chunks(), 1);
    let mut scratch = zipflow_encodings::Scratch::default();
    let (values, validity) = file.read_chunk(0, 0, &mut scratch).unwrap();
    assert!(validity.is_none());
    (values, summary.columns[0].plan_summary())
}

#[test]
fn bands_round_trip_through_zf_with_the_predictor() {
    for &(name, _) in FIXTURES {
        let image = raster::read_image(fixture(name)).unwrap();
        let plan = if matches!(image.pixels, Values::Int(_)) {
            RasterPlan::Forced(raster::predictor_plan(image.width))
        } else {
            RasterPlan::Chosen(zipflow_select::Chooser::shared(Default::default()))
        };
        let (back, plans) = through_zf(&image, plan);
        assert_eq!(back, image.pixels, "{name}");
        if matches!(image.pixels, Values::Int(_)) {
            assert!(
                plans.starts_with("above(97) | delta | zigzag | ans"),
                "{plans}"
            );
        }
    }
}

#[test]
fn ndvi_over_predictor_bands_counts_pixels_with_data() {
    let read = |name: &str| raster::read_tiff(fixture(name)).unwrap();
    let nir = read("u16_deflate_tiled.tif");
    // A red band with no-data pixels (both bands 0) and pixels where only one band is 0.
    let mut red = read("u16_lzw_strips.tif").pixels;
    let mut nir_px = nir.pixels.clone();
    for i in (0..red.len()).step_by(5) {
        red[i] = 0;
        if i % 3 == 0 {
            nir_px[i] = 0;
        }
    }
    let (nir, red) = (
        Raster::new(W, H, nir_px).unwrap(),
        Raster::new(W, H, red).unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let (np, rp) = (dir.path().join("n.zf"), dir.path().join("r.zf"));
    let plan = || RasterPlan::Forced(raster::predictor_plan(W));
    raster::write_zf(&nir, &np, plan(), false).unwrap();
    raster::write_zf(&red, &rp, plan(), false).unwrap();
    let (nb, rb) = (Band::open(&np).unwrap(), Band::open(&rp).unwrap());
    let pool = ndvi::pool(2).unwrap();
    let want_valid = ndvi::valid_reference(&nir.pixels, &red.pixels);
    assert!(want_valid < nir.pixels.len() as u64);
    for op in [
        Op::Sum,
        Op::SumNr,
        Op::Count(ndvi::Threshold::parse("0.2").unwrap()),
    ] {
        let (got, valid) = ndvi::fused_counted(op, &nb, &rb, &pool).unwrap();
        assert_eq!(valid, want_valid);
        let plain = ndvi::plain(op, &nir.pixels, &red.pixels, &pool).unwrap();
        assert_eq!(got, plain, "{op:?}");
    }
}

#[test]
fn ndvi_refuses_a_band_with_another_nodata_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut image = raster::read_image(fixture("u16_lzw_strips.tif")).unwrap();
    image.nodata = Some("65535".to_string());
    let p = dir.path().join("b.zf");
    raster::write_image(
        &image,
        &p,
        RasterPlan::Forced(raster::predictor_plan(W)),
        false,
    )
    .unwrap();
    let band = Band::open(&p).unwrap();
    let pool = ndvi::pool(1).unwrap();
    let e = ndvi::fused(Op::Sum, &band, &band, &pool).unwrap_err();
    assert!(e.to_string().contains("65535"), "{e}");
    assert!(e.to_string().contains("b.zf"), "{e}");
}

#[test]
fn unreadable_tiffs_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cut.tif");
    let bytes = std::fs::read(fixture("u16_zstd_cog.tif")).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() / 3]).unwrap();
    let e = raster::read_image(&p).unwrap_err();
    assert!(e.to_string().contains("cut.tif"), "{e}");
    // A band of the wrong type for NDVI says what it is.
    let e = raster::read_tiff(fixture("f32_deflate_tiled.tif")).unwrap_err();
    assert!(e.to_string().contains("f32"), "{e}");
}
