//! `float2int` (not yet implemented).

use crate::node::{EncodedNode, NodeView};
use crate::{Encoding, Pattern, Scratch, Slot};
use zipflow_core::{Error, PType, Plan, Result, Values};

/// `float2int`.
pub struct FloatToInt;

/// On-disk id of [`FloatToInt`].
pub const ID: u16 = 10;

impl Encoding for FloatToInt {
    fn id(&self) -> u16 {
        ID
    }
    fn name(&self) -> &'static str {
        "float2int"
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
        Err(Error::plan(plan, "`float2int` is not implemented yet"))
    }
    fn decode(&self, _node: &NodeView<'_>, _out: &mut Values, _scratch: &mut Scratch) -> Result<()> {
        Err(Error::unsupported("`float2int` decoding is not implemented yet"))
    }
}
