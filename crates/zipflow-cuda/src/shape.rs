//! Plan shapes: the part of an encoded node tree that decides the generated kernel.
//!
//! A shape is the tree of primitives, their physical types and their bit widths: two chunks
//! encoded as `for | bitpack(12)` share one shape, one kernel source and one compiled module,
//! while `for | bitpack(7)` gets its own. Compiled-in widths turn the unpacking's shifts,
//! masks and word indices into constants (measured in docs/history/gpu-2026-12.md); every
//! other parameter (references, offsets, lengths) travels in the per-chunk descriptor.

pub use crate::ops::Op;
use zipflow_core::{Error, PType, Result};
use zipflow_encodings::NodeView;

/// The shape of an encoded node tree: ops and physical types, no parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape {
    /// The primitive.
    pub op: Op,
    /// The physical type the node decodes to.
    pub ptype: PType,
    /// A `bitpack` node's bit width or a `radix` node's base, compiled into the kernel as a
    /// constant (`None` for other primitives, and for a width past the type's bits or a base
    /// outside 2..=255, which the descriptor check rejects).
    pub width: Option<u32>,
    /// Child shapes, in the primitive's slot order.
    pub children: Vec<Shape>,
}

impl Shape {
    /// The shape of a parsed node tree. Primitives the GPU does not decode give an
    /// `Unsupported` error that names them.
    pub fn of(node: &NodeView<'_>) -> Result<Shape> {
        let op = Op::from_id(node.id)?;
        if node.ptype == PType::Bytes && !op.decodes_strings() {
            return Err(Error::unsupported(format!(
                "the GPU decoder does not handle byte strings (`{}` node)",
                op.name()
            )));
        }
        let children = node
            .children
            .iter()
            .map(Shape::of)
            .collect::<Result<Vec<_>>>()?;
        let width = op.compiled_width(node);
        Ok(Shape {
            op,
            ptype: node.ptype,
            width,
            children,
        })
    }

    /// A canonical text key, e.g. `for:i64(bitpack(12):u64)`.
    pub fn key(&self) -> String {
        let mut s = match self.width {
            Some(w) => format!("{}({w}):{}", self.op.name(), self.ptype),
            None => format!("{}:{}", self.op.name(), self.ptype),
        };
        if !self.children.is_empty() {
            s.push('(');
            for (i, c) in self.children.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&c.key());
            }
            s.push(')');
        }
        s
    }

    /// Nodes in pre-order (the order of the descriptor slots).
    pub fn preorder(&self) -> Vec<&Shape> {
        let mut out = Vec::new();
        fn walk<'a>(s: &'a Shape, out: &mut Vec<&'a Shape>) {
            out.push(s);
            for c in &s.children {
                walk(c, out);
            }
        }
        walk(self, &mut out);
        out
    }
}
