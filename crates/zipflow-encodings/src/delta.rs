//! `delta` (not yet implemented).

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use zipflow_core::{Error, PType, Plan, Result, Values};

/// `delta`.
pub struct Delta;

/// On-disk id of [`Delta`].
pub const ID: u16 = 5;

impl Encoding for Delta {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "delta"
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
        Err(Error::plan(plan, "`delta` is not implemented yet"))
    }
    fn decode(&self, _node: &NodeView<'_>, _out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        Err(Error::unsupported("`delta` decoding is not implemented yet"))
    }
}
