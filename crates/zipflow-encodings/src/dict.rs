//! `dict` (not yet implemented).

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use zipflow_core::{Error, PType, Plan, Result, Values};

/// `dict`.
pub struct Dict;

/// On-disk id of [`Dict`].
pub const ID: u16 = 7;

impl Encoding for Dict {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "dict"
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
        Err(Error::plan(plan, "`dict` is not implemented yet"))
    }
    fn decode(&self, _node: &NodeView<'_>, _out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        Err(Error::unsupported("`dict` decoding is not implemented yet"))
    }
}
