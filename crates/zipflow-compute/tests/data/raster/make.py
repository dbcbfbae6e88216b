import numpy as np, tifffile
W, H = 97, 61
y, x = np.mgrid[0:H, 0:W]
def ints(dtype):
    v = (x * 7 + y * 13 + (x * y) % 17).astype(np.int64)
    if dtype == np.int16: v = v - 600
    if dtype == np.uint8: v = v % 256
    return v.astype(dtype)
f32 = (x * 0.5 + y * 0.25 - 3.0).astype(np.float32)
cases = [
  ("u16_deflate_tiled.tif", ints(np.uint16), dict(compression="zlib", tile=(32, 32), predictor=2), "0"),
  ("u16_lzw_strips.tif", ints(np.uint16), dict(compression="lzw", rowsperstrip=8), None),
  ("u16_zstd_cog.tif", ints(np.uint16), dict(compression="zstd", tile=(32, 32)), "0"),
  ("u8_lzw_tiled.tif", ints(np.uint8), dict(compression="lzw", tile=(16, 16), predictor=2), None),
  ("u16_lzw_cog.tif", ints(np.uint16), dict(compression="lzw", tile=(32, 32), predictor=2), "0"),
  ("f32_lzw_tiled.tif", f32, dict(compression="lzw", tile=(16, 16)), None),
  ("i16_zstd_strips.tif", ints(np.int16), dict(compression="zstd", rowsperstrip=16), "-9999"),
  ("f32_deflate_tiled.tif", f32, dict(compression="zlib", tile=(32, 32), predictor=3), "nan"),
]
for name, data, kw, nodata in cases:
    extratags = []
    if nodata is not None:
        s = nodata + "\0"
        extratags.append((42113, 's', len(s), s, True))
    with tifffile.TiffWriter(name) as t:
        t.write(data, photometric="minisblack", extratags=extratags, metadata=None, **kw)
        if "cog" in name:
            # an overview after the full-resolution image, as in a cloud-optimised GeoTIFF
            t.write(data[::2, ::2], photometric="minisblack", subfiletype=1, metadata=None, **kw)
    back = tifffile.imread(name)
    assert (back == data).all() or np.array_equal(back, data), name
print("ok")
