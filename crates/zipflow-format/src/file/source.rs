//! Where a reader's bytes come from: the file, read at positions, or memory.

use std::fs::File;
use std::path::Path;

use zipflow_core::{Error, Result};

/// Where an open file's bytes come from: the file itself, read at positions when asked for
/// (so a file truncated or rewritten under a reader gives an error, never a fault, as a
/// memory map would), or bytes held in memory (8-byte aligned, so node buffers can be
/// viewed in place).
pub(super) enum Source {
    File { file: File, len: u64 },
    Memory { words: Vec<u64>, len: usize },
}

impl Source {
    pub(super) fn from_vec(bytes: &[u8]) -> Source {
        let words = aligned_copy(bytes);
        Source::Memory {
            words,
            len: bytes.len(),
        }
    }

    pub(super) fn len(&self) -> u64 {
        match self {
            Source::File { len, .. } => *len,
            Source::Memory { len, .. } => *len as u64,
        }
    }

    /// `len` bytes from byte `offset`: borrowed from memory, or read from the file into an
    /// 8-byte aligned buffer.
    /// `path` names the file in an I/O error.
    pub(super) fn read(&self, offset: u64, len: usize, path: &Path) -> Result<Payload<'_>> {
        let past = || {
            Error::corrupt(format!(
                "bytes {offset}..{} lie past the end of the file",
                offset.saturating_add(len as u64)
            ))
        };
        match self {
            Source::Memory { words, len: n } => {
                let all: &[u8] = bytemuck::cast_slice(words);
                let start = usize::try_from(offset).map_err(|_| past())?;
                all.get(..*n)
                    .and_then(|b| b.get(start..start.checked_add(len)?))
                    .map(|b| Payload(Bytes::Borrowed(b)))
                    .ok_or_else(past)
            }
            Source::File { file, .. } => {
                let mut words = buffers::take(len.div_ceil(8));
                let buf = bytemuck::cast_slice_mut::<u64, u8>(&mut words);
                read_exact_at(file, buf.get_mut(..len).unwrap_or_default(), offset).map_err(
                    |e| match e.kind() {
                        std::io::ErrorKind::UnexpectedEof => Error::corrupt(format!(
                            "bytes {offset}..{} lie past the end of the file: it was truncated \
                             or rewritten while open",
                            offset.saturating_add(len as u64)
                        )),
                        _ => Error::io(path, e),
                    },
                )?;
                Ok(Payload(Bytes::Owned { words, len }))
            }
        }
    }
}

/// Read buffers recycled on each thread: a chunk's payload is read into a buffer that a
/// payload dropped on the same thread gave back, so a scan reading chunk after chunk neither
/// allocates, nor zeroes, nor faults in fresh pages for each. A thread keeps a few, up to
/// [`buffers::KEEP_BYTES`] in all.
mod buffers {
    use std::cell::RefCell;

    /// Buffers a thread keeps at most.
    const KEEP: usize = 8;
    /// Bytes a thread keeps in its buffers at most.
    pub(super) const KEEP_BYTES: usize = 32 << 20;

    thread_local! {
        static FREE: RefCell<Vec<Vec<u64>>> = const { RefCell::new(Vec::new()) };
    }

    /// A buffer of at least `words` words (their contents unspecified).
    pub(super) fn take(words: usize) -> Vec<u64> {
        let kept = FREE.with(|f| {
            let mut f = f.borrow_mut();
            // The smallest that holds `words`, else the largest (grown below).
            let fit = f
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= words)
                .min_by_key(|(_, b)| b.len())
                .or_else(|| f.iter().enumerate().max_by_key(|(_, b)| b.len()))
                .map(|(i, _)| i);
            fit.map(|i| f.swap_remove(i))
        });
        let mut b = kept.unwrap_or_default();
        if b.len() < words {
            b.resize(words, 0);
        }
        b
    }

    /// Gives `b` back to this thread's buffers, where they have room.
    pub(super) fn give(b: Vec<u64>) {
        // `try_with`: a payload dropped while its thread exits just frees its buffer.
        let _ = FREE.try_with(|f| {
            let mut f = f.borrow_mut();
            let held: usize = f.iter().map(|k| k.capacity() * 8).sum();
            if f.len() < KEEP && held + b.capacity() * 8 <= KEEP_BYTES {
                f.push(b);
            }
        });
    }
}

/// `bytes` copied into 64-bit words, so that they start 8-byte aligned.
fn aligned_copy(bytes: &[u8]) -> Vec<u64> {
    let mut words = vec![0u64; bytes.len().div_ceil(8)];
    bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
    words
}

#[cfg(unix)]
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buf, offset)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    use std::os::windows::fs::FileExt;
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Bytes of a file (a chunk's payload): borrowed from a file held in memory, or read from
/// the file into a buffer of their own, 8-byte aligned either way. Dereferences to the bytes.
#[derive(Debug)]
pub struct Payload<'a>(Bytes<'a>);

#[derive(Debug)]
enum Bytes<'a> {
    /// Bytes of a file held in memory.
    Borrowed(&'a [u8]),
    /// Bytes read from the file: the first `len` bytes of `words`.
    Owned { words: Vec<u64>, len: usize },
}

impl Payload<'_> {
    /// Keeps the first `len` bytes (all of them where there are fewer).
    pub fn truncate(&mut self, len: usize) {
        match &mut self.0 {
            Bytes::Borrowed(b) => *b = b.get(..len).unwrap_or(b),
            Bytes::Owned { len: n, .. } => *n = len.min(*n),
        }
    }
}

impl std::ops::Deref for Payload<'_> {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            Bytes::Borrowed(b) => b,
            Bytes::Owned { words, len } => {
                let all: &[u8] = bytemuck::cast_slice(words);
                all.get(..*len).unwrap_or(all)
            }
        }
    }
}

impl Drop for Payload<'_> {
    fn drop(&mut self) {
        if let Bytes::Owned { words, .. } = &mut self.0 {
            buffers::give(std::mem::take(words));
        }
    }
}
