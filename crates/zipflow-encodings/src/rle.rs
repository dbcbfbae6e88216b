//! `rle` (not yet implemented).

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use zipflow_core::{Error, PType, Plan, Result, Values};

/// `rle`.
pub struct Rle;

/// On-disk id of [`Rle`].
pub const ID: u16 = 6;

impl Encoding for Rle {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "rle"
    }
    fn pattern(&self) -> Pattern {
        Pattern::GroupParallel
    }
    fn slots(&self) -> &'static [Slot] {
        &[]
    }
    fn accepts(&self, ptype: PType) -> bool {
        ptype.is_int()
    }
    fn encode(&self, plan: &Plan, _input: &Values) -> Result<EncodedNode> {
        Err(Error::plan(plan, "`rle` is not implemented yet"))
    }
    fn decode(&self, _node: &NodeView<'_>, _out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        Err(Error::unsupported("`rle` decoding is not implemented yet"))
    }
}
