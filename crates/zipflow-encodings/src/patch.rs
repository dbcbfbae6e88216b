//! `patch` (not yet implemented).

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use zipflow_core::{Error, PType, Plan, Result, Values};

/// `patch`.
pub struct Patch;

/// On-disk id of [`Patch`].
pub const ID: u16 = 9;

impl Encoding for Patch {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "patch"
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
        Err(Error::plan(plan, "`patch` is not implemented yet"))
    }
    fn decode(&self, _node: &NodeView<'_>, _out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        Err(Error::unsupported("`patch` decoding is not implemented yet"))
    }
}
