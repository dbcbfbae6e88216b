//! 16-byte string views, the layout of Arrow's `Utf8View` and `BinaryView`: the length in the
//! low 4 bytes, then up to 12 bytes inline, or a 4-byte prefix, buffer index 0 and the offset.
//!
//! String decoders build them while the bytes they just wrote are hot in cache, and the
//! Arrow layer builds them for any other byte strings, with one function.

/// Masks that keep a string's bytes in the low and high words of an inline view, by length
/// (13 stands for every length past 12, which do not inline).
const MASKS: [(u64, u64); 14] = {
    let mut m = [(0u64, 0u64); 14];
    let mut len = 0;
    while len < 14 {
        let head = if len >= 4 {
            0xffff_ffff
        } else {
            (1u64 << (8 * len)) - 1
        };
        let rest = if len <= 4 {
            0
        } else if len >= 12 {
            u64::MAX
        } else {
            (1u64 << (8 * (len - 4))) - 1
        };
        m[len] = (head, rest);
        len += 1;
    }
    m
};

/// The view of the string of `len` bytes at `start` in buffer 0, whose first 4 bytes are
/// `head` and next 8 `rest` (bytes past the string may hold anything): up to 12 bytes inline,
/// else the 4-byte prefix and the offset. Both forms share the low word and the high word is a
/// select, so mixed lengths cost no mispredicted branch.
#[inline(always)]
pub fn view_of(head: u64, rest: u64, start: usize, len: usize) -> u128 {
    let (head_mask, rest_mask) = MASKS[len.min(13)];
    let low = len as u64 | ((head & head_mask) << 32);
    let high = if len <= 12 {
        rest & rest_mask
    } else {
        (start as u64) << 32
    };
    u128::from(low) | (u128::from(high) << 64)
}

/// Appends the views of strings delimited by `offsets` in `data` (buffer 0), in order, while
/// each starts at least 12 bytes before the end of `data` (so its 12 bytes load at once).
/// Returns how many strings it covered (`offsets.len() - 1` at most), and whether a non-empty
/// one starts with a UTF-8 continuation byte. Stops early, covering fewer, at a range that
/// runs backwards or past `data`.
pub fn push_views(data: &[u8], offsets: &[u64], views: &mut Vec<u128>) -> (usize, bool) {
    let n = offsets.len().saturating_sub(1);
    views.reserve(n);
    let (src, dst, at) = (data.as_ptr(), views.as_mut_ptr(), views.len());
    let mut mid_char = false;
    let mut done = 0;
    for w in offsets.windows(2) {
        let (start, end) = (w[0] as usize, w[1] as usize);
        if start > end || end > data.len() || start + 12 > data.len() {
            break;
        }
        // SAFETY: `start + 12 <= data.len()` (checked just above).
        let (head, rest) = unsafe {
            (
                u64::from(src.add(start).cast::<u32>().read_unaligned()),
                src.add(start + 4).cast::<u64>().read_unaligned(),
            )
        };
        // SAFETY: `at + done < at + n`, within the capacity reserved above.
        unsafe {
            dst.add(at + done)
                .write(view_of(head, rest, start, end - start))
        };
        mid_char |= end > start && (head as u8) & 0xc0 == 0x80;
        done += 1;
    }
    // SAFETY: the loop initialised `done` views after the first `at`.
    unsafe { views.set_len(at + done) };
    (done, mid_char)
}

/// [`push_views`] for strings anywhere in `data` (short ones near its end included), one
/// bounds-checked copy each: for the few strings `push_views` leaves. Returns the same pair.
pub fn push_views_checked(data: &[u8], offsets: &[u64], views: &mut Vec<u128>) -> (usize, bool) {
    let mut mid_char = false;
    let mut done = 0;
    for w in offsets.windows(2) {
        let (start, end) = (w[0] as usize, w[1] as usize);
        let Some(s) = data.get(start..end) else {
            break;
        };
        let mut word = [0u8; 12];
        let tail = &data[start..data.len().min(start + 12)];
        word[..tail.len()].copy_from_slice(tail);
        let head = u64::from(u32::from_le_bytes([word[0], word[1], word[2], word[3]]));
        let rest = u64::from_le_bytes([
            word[4], word[5], word[6], word[7], word[8], word[9], word[10], word[11],
        ]);
        views.push(view_of(head, rest, start, s.len()));
        mid_char |= !s.is_empty() && word[0] & 0xc0 == 0x80;
        done += 1;
    }
    (done, mid_char)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The layout spelled out byte by byte.
    fn reference(data: &[u8], start: usize, end: usize) -> u128 {
        let s = &data[start..end];
        let mut v = [0u8; 16];
        v[..4].copy_from_slice(&(s.len() as u32).to_le_bytes());
        if s.len() <= 12 {
            v[4..4 + s.len()].copy_from_slice(s);
        } else {
            v[4..8].copy_from_slice(&s[..4]);
            v[12..16].copy_from_slice(&(start as u32).to_le_bytes());
        }
        u128::from_le_bytes(v)
    }

    #[test]
    fn views_match_the_layout_at_every_length() {
        let data: Vec<u8> = (0..870u32).map(|i| (i * 37 % 251) as u8).collect();
        let mut offsets = vec![0u64];
        let mut end = 0;
        for len in (0..=40).chain([0, 0, 13, 12, 11, 1]) {
            end += len;
            offsets.push(end);
        }
        let mut fast = Vec::new();
        let (done, _) = push_views(&data, &offsets, &mut fast);
        let (rest, _) = push_views_checked(&data, &offsets[done..], &mut fast);
        assert_eq!(done + rest, offsets.len() - 1);
        let mut slow = Vec::new();
        push_views_checked(&data, &offsets, &mut slow);
        let want: Vec<u128> = offsets
            .windows(2)
            .map(|w| reference(&data, w[0] as usize, w[1] as usize))
            .collect();
        assert_eq!(fast, want);
        assert_eq!(slow, want);
    }

    #[test]
    fn bad_ranges_stop_and_continuation_bytes_are_seen() {
        let data = b"abc\x80def ghijklmnopqrstu".to_vec();
        let mut v = Vec::new();
        assert_eq!(push_views(&data, &[0, 3, 2], &mut v).0, 1);
        assert_eq!(push_views_checked(&data, &[0, 99], &mut v).0, 0);
        assert!(push_views(&data, &[3, 5], &mut v).1);
        assert!(!push_views(&data, &[4, 4, 6], &mut v).1);
    }
}
