//! The bytes of an encoded stream: a tree of nodes, one per plan node.
//!
//! ```text
//! node   := header (16 B) | buf_len: u32 x nbuf | child_size: u32 x nchild | pad to 8
//!           | meta | pad to 8 | (buffer | pad to 8) x nbuf | child x nchild
//! header := id: u16 | ptype: u8 | nbuf: u8 | nchild: u8 | 0: u8 x 3 | len: u32 | meta_len: u32
//! ```
//!
//! All integers are little-endian. Every node, buffer and meta block starts 8-byte aligned
//! relative to the start of the tree, so a reader whose tree starts 8-byte aligned can view
//! buffers as `&[u64]` (or narrower) without copying. `len` is the number of values the node
//! decodes to; `ptype` their physical type.
//!
//! [`NodeView::parse`] checks every length and offset once; decoders then work on validated
//! slices and only need to check what their own metadata claims.

use std::borrow::Cow;
use zipflow_core::{Error, PType, Result};

/// Size of the fixed node header.
pub const HEADER_LEN: usize = 16;

/// Nodes nest at most this deep (the plan grammar allows no deeper).
pub const MAX_DEPTH: usize = 64;

/// An encoded node, as an encoder builds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedNode {
    /// Encoding id.
    pub id: u16,
    /// Physical type of the decoded values.
    pub ptype: PType,
    /// Number of decoded values.
    pub len: u32,
    /// Encoding-specific metadata (bit width, reference, ...).
    pub meta: Vec<u8>,
    /// Raw buffers (packed bits, exception lists, ...).
    pub buffers: Vec<Vec<u8>>,
    /// Child nodes, in the encoding's slot order.
    pub children: Vec<EncodedNode>,
}

fn pad8(n: usize) -> usize {
    n.next_multiple_of(8)
}

impl EncodedNode {
    /// A node with no buffers and no children.
    pub fn new(id: u16, ptype: PType, len: usize) -> Result<EncodedNode> {
        let len = u32::try_from(len)
            .map_err(|_| Error::unsupported(format!("stream of {len} values exceeds 2^32 - 1")))?;
        Ok(EncodedNode {
            id,
            ptype,
            len,
            meta: Vec::new(),
            buffers: Vec::new(),
            children: Vec::new(),
        })
    }

    /// Serialised size of this node once it has `children` more children, not counting the
    /// children themselves: what the node adds on top of them.
    pub(crate) fn size_with_children(&self, children: usize) -> usize {
        pad8(HEADER_LEN + 4 * (self.buffers.len() + self.children.len() + children))
            + pad8(self.meta.len())
            + self.buffers.iter().map(|b| pad8(b.len())).sum::<usize>()
            + self.children.iter().map(EncodedNode::size).sum::<usize>()
    }

    /// Serialised size in bytes (a multiple of 8).
    pub fn size(&self) -> usize {
        self.size_with_children(0)
    }

    /// Bytes of buffers and metadata only, without headers and padding: what the data costs.
    pub fn payload_size(&self) -> usize {
        self.meta.len()
            + self.buffers.iter().map(Vec::len).sum::<usize>()
            + self
                .children
                .iter()
                .map(EncodedNode::payload_size)
                .sum::<usize>()
    }

    /// Appends the serialised node to `out`. `out.len()` should be a multiple of 8 for the
    /// alignment promise to hold.
    pub fn write(&self, out: &mut Vec<u8>) -> Result<()> {
        let too_big = |what: &str| Error::unsupported(format!("{what} exceeds 4 GiB in one chunk"));
        let nbuf = u8::try_from(self.buffers.len()).map_err(|_| too_big("buffer count"))?;
        let nchild = u8::try_from(self.children.len()).map_err(|_| too_big("child count"))?;
        let meta_len = u32::try_from(self.meta.len()).map_err(|_| too_big("metadata"))?;
        out.reserve(self.size());
        out.extend_from_slice(&self.id.to_le_bytes());
        out.extend_from_slice(&[self.ptype.code(), nbuf, nchild, 0, 0, 0]);
        out.extend_from_slice(&self.len.to_le_bytes());
        out.extend_from_slice(&meta_len.to_le_bytes());
        for b in &self.buffers {
            let l = u32::try_from(b.len()).map_err(|_| too_big("a buffer"))?;
            out.extend_from_slice(&l.to_le_bytes());
        }
        for c in &self.children {
            let l = u32::try_from(c.size()).map_err(|_| too_big("a child"))?;
            out.extend_from_slice(&l.to_le_bytes());
        }
        pad_to_8(out);
        out.extend_from_slice(&self.meta);
        pad_to_8(out);
        for b in &self.buffers {
            out.extend_from_slice(b);
            pad_to_8(out);
        }
        for c in &self.children {
            c.write(out)?;
        }
        Ok(())
    }

    /// The serialised node as a new vector.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(self.size());
        self.write(&mut out)?;
        Ok(out)
    }
}

fn pad_to_8(out: &mut Vec<u8>) {
    out.resize(pad8(out.len()), 0);
}

/// A validated view of a serialised node.
#[derive(Debug, Clone)]
pub struct NodeView<'a> {
    /// Encoding id.
    pub id: u16,
    /// Physical type of the decoded values.
    pub ptype: PType,
    /// Number of decoded values.
    pub len: usize,
    /// Encoding metadata, read only by the encoding's own module (through its typed view).
    pub(crate) meta: &'a [u8],
    /// Buffers, each starting 8-byte aligned relative to the tree start.
    pub buffers: Vec<&'a [u8]>,
    /// Children.
    pub children: Vec<NodeView<'a>>,
    /// The node's own serialised bytes (header, metadata, buffers and children): a child's
    /// are a tree of their own, which a decoder can take alone.
    pub raw: &'a [u8],
}

impl<'a> NodeView<'a> {
    /// Parses and validates a whole tree; `bytes` must hold exactly one node.
    pub fn parse(bytes: &'a [u8]) -> Result<NodeView<'a>> {
        let (node, used) = Self::parse_at(bytes, 0)?;
        if used != bytes.len() {
            return Err(Error::corrupt(format!(
                "{} trailing bytes after the encoded stream",
                bytes.len() - used
            )));
        }
        Ok(node)
    }

    fn parse_at(bytes: &'a [u8], depth: usize) -> Result<(NodeView<'a>, usize)> {
        if depth > MAX_DEPTH {
            return Err(Error::corrupt("encoded stream nests too deeply"));
        }
        let mut r = Reader { bytes, pos: 0 };
        let id = u16::from_le_bytes(r.array::<2>("node header")?);
        let [ptype, nbuf, nchild, _, _, _] = r.array::<6>("node header")?;
        let ptype = PType::from_code(ptype)?;
        let len = u32::from_le_bytes(r.array::<4>("node header")?) as usize;
        let meta_len = u32::from_le_bytes(r.array::<4>("node header")?) as usize;
        let mut buf_lens = Vec::with_capacity(usize::from(nbuf));
        for _ in 0..nbuf {
            buf_lens.push(u32::from_le_bytes(r.array::<4>("buffer table")?) as usize);
        }
        let mut child_sizes = Vec::with_capacity(usize::from(nchild));
        for _ in 0..nchild {
            child_sizes.push(u32::from_le_bytes(r.array::<4>("child table")?) as usize);
        }
        r.align()?;
        let meta = r.take(meta_len, "metadata")?;
        r.align()?;
        let mut buffers = Vec::with_capacity(buf_lens.len());
        for l in buf_lens {
            buffers.push(r.take(l, "buffer")?);
            r.align()?;
        }
        let mut children = Vec::with_capacity(child_sizes.len());
        for size in child_sizes {
            let start = r.pos;
            let child_bytes = r.take(size, "child node")?;
            let (child, used) = Self::parse_at(child_bytes, depth + 1)?;
            // No primitive expands a child beyond its parent's value count (byte strings
            // excepted, whose children may count bytes). This bounds every allocation a
            // decoder makes by the root's length, which the caller checks.
            if child.len > len && ptype != PType::Bytes {
                return Err(Error::corrupt(format!(
                    "child node claims {} values, more than its parent's {len}",
                    child.len
                )));
            }
            if used != size {
                return Err(Error::corrupt(format!(
                    "child node at byte {start} is {used} bytes, table says {size}"
                )));
            }
            children.push(child);
        }
        Ok((
            NodeView {
                id,
                ptype,
                len,
                meta,
                buffers,
                children,
                raw: &bytes[..r.pos],
            },
            r.pos,
        ))
    }

    /// Buffer `i`, or a corrupt-data error naming `what` if the node has no such buffer.
    pub fn buffer(&self, i: usize, what: &str) -> Result<&'a [u8]> {
        self.buffers
            .get(i)
            .copied()
            .ok_or_else(|| Error::corrupt(format!("missing {what} buffer")))
    }

    /// Child `i`, or a corrupt-data error naming `what`.
    pub fn child(&self, i: usize, what: &str) -> Result<&NodeView<'a>> {
        self.children
            .get(i)
            .ok_or_else(|| Error::corrupt(format!("missing {what} child")))
    }

    /// Checks the number of buffers and children the encoding expects.
    pub fn expect_shape(&self, name: &str, nbuf: usize, nchild: usize) -> Result<()> {
        if self.buffers.len() != nbuf || self.children.len() != nchild {
            return Err(Error::corrupt(format!(
                "{name} node has {} buffers and {} children, expected {nbuf} and {nchild}",
                self.buffers.len(),
                self.children.len()
            )));
        }
        Ok(())
    }

    /// Bytes of metadata and buffers, children included, without headers and padding: what
    /// the data costs (as [`EncodedNode::payload_size`]).
    pub fn payload_size(&self) -> usize {
        self.meta.len()
            + self.buffers.iter().map(|b| b.len()).sum::<usize>()
            + self
                .children
                .iter()
                .map(NodeView::payload_size)
                .sum::<usize>()
    }

    /// A reader over the metadata.
    pub(crate) fn meta_reader(&self) -> MetaReader<'a> {
        MetaReader {
            bytes: self.meta,
            pos: 0,
        }
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(Error::corrupt(format!(
                "{what} of {n} bytes at byte {} runs past the end ({} bytes)",
                self.pos,
                self.bytes.len()
            )));
        };
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn align(&mut self) -> Result<()> {
        let target = pad8(self.pos);
        if target > self.bytes.len() {
            return Err(Error::corrupt("node padding runs past the end"));
        }
        self.pos = target;
        Ok(())
    }
}

/// Reads little-endian fields from node metadata with bounds checks.
#[derive(Debug, Clone)]
pub(crate) struct MetaReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl MetaReader<'_> {
    /// The next `N` bytes.
    pub fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let end = self.pos + N;
        let Some(s) = self.bytes.get(self.pos..end) else {
            return Err(Error::corrupt(format!("metadata too short for {what}")));
        };
        self.pos = end;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    /// The next byte.
    pub fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    /// The next u32.
    pub fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array::<4>(what)?))
    }

    /// The next u64.
    pub fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array::<8>(what)?))
    }

    /// Errors unless every byte was read.
    pub fn finish(&self, what: &str) -> Result<()> {
        if self.pos != self.bytes.len() {
            return Err(Error::corrupt(format!(
                "{what} metadata has {} extra bytes",
                self.bytes.len() - self.pos
            )));
        }
        Ok(())
    }
}

/// Views a buffer as `&[T]` if it is aligned and a whole number of `T`s; otherwise copies it
/// into `scratch` (a reader whose bytes are not 8-aligned still works, only slower).
pub fn cast_or_copy<'s, T: bytemuck::Pod>(
    bytes: &'s [u8],
    scratch: &'s mut Vec<T>,
    what: &str,
) -> Result<&'s [T]> {
    let size = size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::corrupt(format!(
            "{what} buffer of {} bytes is not a multiple of {size}",
            bytes.len()
        )));
    }
    match bytemuck::try_cast_slice(bytes) {
        Ok(s) => Ok(s),
        Err(_) => {
            scratch.clear();
            scratch.resize(bytes.len() / size, T::zeroed());
            bytemuck::cast_slice_mut::<T, u8>(scratch).copy_from_slice(bytes);
            Ok(scratch)
        }
    }
}

/// Views a buffer as `&[T]` if it is aligned and a whole number of `T`s; otherwise copies it
/// (a reader whose bytes are not 8-aligned still works, only slower).
pub fn cast_cow<'a, T: bytemuck::Pod>(bytes: &'a [u8], what: &str) -> Result<Cow<'a, [T]>> {
    let size = size_of::<T>();
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::corrupt(format!(
            "{what} buffer of {} bytes is not a multiple of {size}",
            bytes.len()
        )));
    }
    Ok(match bytemuck::try_cast_slice(bytes) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => {
            let mut v = vec![T::zeroed(); bytes.len() / size];
            bytemuck::cast_slice_mut::<T, u8>(&mut v).copy_from_slice(bytes);
            Cow::Owned(v)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> EncodedNode {
        let mut leaf = EncodedNode::new(7, PType::U32, 3).unwrap_or_else(|e| panic!("{e}"));
        leaf.meta = vec![5];
        leaf.buffers = vec![vec![1, 2, 3], vec![]];
        let mut root = EncodedNode::new(2, PType::I64, 3).unwrap_or_else(|e| panic!("{e}"));
        root.meta = 42u64.to_le_bytes().to_vec();
        root.children = vec![leaf.clone(), leaf];
        root
    }

    #[test]
    fn round_trip() -> Result<()> {
        let root = sample();
        let bytes = root.to_bytes()?;
        assert_eq!(bytes.len(), root.size());
        assert_eq!(bytes.len() % 8, 0);
        let v = NodeView::parse(&bytes)?;
        assert_eq!((v.id, v.ptype, v.len), (2, PType::I64, 3));
        assert_eq!(v.meta, &42u64.to_le_bytes());
        assert_eq!(v.children.len(), 2);
        assert_eq!(v.children[1].buffers, vec![&[1u8, 2, 3][..], &[][..]]);
        Ok(())
    }

    #[test]
    fn every_truncation_is_an_error() -> Result<()> {
        let bytes = sample().to_bytes()?;
        for n in 0..bytes.len() {
            assert!(NodeView::parse(&bytes[..n]).is_err(), "prefix {n}");
        }
        Ok(())
    }

    #[test]
    fn bit_flips_never_panic() -> Result<()> {
        let bytes = sample().to_bytes()?;
        for i in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[i / 8] ^= 1 << (i % 8);
            let _ = NodeView::parse(&b);
        }
        Ok(())
    }
}
