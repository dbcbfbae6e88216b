//! Criterion benches of the fused kernels at in-cache sizes: NDVI over a synthetic pair of
//! 1 Mi-pixel bands (fused `for | bitpack` files vs the same kernels over plain u16 slices) and
//! SUM over a 1 Mi-value u32 column bit-packed at a few widths vs plain. The DRAM-sized figures
//! come from `zipflow bench ndvi` and `zipflow bench sum-curve`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use zipflow_compute::ndvi::{self, Op, Threshold};
use zipflow_compute::raster::{self, Band, Raster};
use zipflow_core::Result;
use zipflow_encodings::bitpack;

fn synthetic(seed: u64, len: usize) -> Vec<u16> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 12000) as u16
        })
        .collect()
}

struct Bands {
    _dir: tempfile::TempDir,
    nir: Raster,
    red: Raster,
    nb: Band,
    rb: Band,
}

fn bands() -> Result<Bands> {
    let (w, h) = (1024u32, 1024u32);
    let dir = tempfile::tempdir().map_err(|e| zipflow_core::Error::io("temp dir", e))?;
    let nir = Raster::new(w, h, synthetic(1, (w * h) as usize))?;
    let red = Raster::new(w, h, synthetic(2, (w * h) as usize))?;
    let (np, rp) = (dir.path().join("n.zf"), dir.path().join("r.zf"));
    raster::write_zf(
        &nir,
        &np,
        raster::RasterPlan::Forced("for | bitpack".parse()?),
        true,
    )?;
    raster::write_zf(
        &red,
        &rp,
        raster::RasterPlan::Forced("for | bitpack".parse()?),
        true,
    )?;
    let (nb, rb) = (Band::open(&np)?, Band::open(&rp)?);
    Ok(Bands {
        _dir: dir,
        nir,
        red,
        nb,
        rb,
    })
}

fn bench_ndvi(c: &mut Criterion) {
    let (b, pool) = match (bands(), ndvi::pool(1)) {
        (Ok(b), Ok(p)) => (b, p),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("ndvi bench setup failed: {e}");
            return;
        }
    };
    let mut g = c.benchmark_group("ndvi");
    g.throughput(Throughput::Elements(b.nir.pixels.len() as u64));
    let ops = [
        Op::Sum,
        Op::SumRecip,
        Op::SumNewton,
        Op::Count(Threshold { k: 3000 }),
        Op::SumNr,
    ];
    for op in ops {
        g.bench_function(format!("fused/{}", op.name()), |it| {
            it.iter(|| ndvi::fused(op, &b.nb, &b.rb, &pool).ok())
        });
        g.bench_function(format!("plain/{}", op.name()), |it| {
            it.iter(|| ndvi::plain(op, black_box(&b.nir.pixels), &b.red.pixels, &pool).ok())
        });
    }
    g.finish();
}

fn bench_sum(c: &mut Criterion) {
    let len = 1 << 20;
    let Ok(pool) = ndvi::pool(1) else {
        eprintln!("no thread pool");
        return;
    };
    let mut g = c.benchmark_group("sum");
    g.throughput(Throughput::Elements(len as u64));
    for width in [4u32, 8, 12, 16, 24, 32] {
        let mask = if width == 32 {
            u32::MAX
        } else {
            (1 << width) - 1
        };
        let values: Vec<u32> = synthetic(3, len)
            .iter()
            .map(|&v| u32::from(v).wrapping_mul(40503) & mask)
            .collect();
        let words = bitpack::pack(&values, width);
        g.bench_function(format!("packed/w{width}"), |it| {
            it.iter(|| ndvi::packed_sum(black_box(&words), width, &pool).ok())
        });
        g.bench_function(format!("plain/w{width}"), |it| {
            it.iter(|| ndvi::plain_sum(black_box(&values), &pool))
        });
    }
    g.finish();
}

criterion_group!(benches, bench_ndvi, bench_sum);
criterion_main!(benches);
