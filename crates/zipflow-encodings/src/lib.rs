//! zipflow's lightweight encodings, on the CPU.
//!
//! Each primitive turns one value stream into metadata, raw buffers and child streams, and
//! each child stream is encoded by its own sub-plan. The [`Encoding`] trait is the contract
//! every primitive implements; [`encode`] and [`decode`] run a whole [`Plan`] tree. The bytes
//! are a tree of nodes ([`node`]), so any chunk decodes alone.
//!
//! ```
//! use zipflow_core::{IntVec, Plan, Values};
//! use zipflow_encodings::{decode_bytes, encode};
//!
//! let values = Values::Int(IntVec::I64((0..5000).map(|i| 1_000_000 + i % 17).collect()));
//! let plan: Plan = "for | bitpack".parse().unwrap();
//! let node = encode(&plan, &values).unwrap();
//! assert!(node.size() < 5000); // 5 bits per value instead of 64
//! let bytes = node.to_bytes().unwrap();
//! assert_eq!(decode_bytes(&bytes).unwrap(), values);
//! ```
//!
//! Families, one module each: [`bitpack`], [`blockpack`] (per-block widths and references),
//! [`frame`] (frame of reference), [`zigzag`], [`delta`], [`above`] (differences from the row
//! above, for images), [`rle`], [`dict`], [`constant`], [`patch`] (patched exceptions),
//! [`hipatch`] (exceptions that keep their low bits, high bits and positions encoded),
//! [`lowbits`] (integers cut into high bits and mostly-alike low bits, two streams),
//! [`radix`] (values below a small base packed as the digits of 32-bit numbers),
//! [`float2int`], [`alprd`] (float bits split: a few distinct high parts, packed low bits),
//! [`ans`] (interleaved rANS entropy coder),
//! [`plain`], [`strdict`] (string dictionary), [`fsst`], [`chardict`] (`chardict16`, the
//! published character-dictionary coder), [`chartable`] (character tables trained per text).
//!
//! Each primitive declares what it is once, in its module: a [`Descriptor`] with its id, name
//! and child slots, how the GPU decodes it ([`GpuDecode`], see [`gpu`]) and the part it plays
//! in the plan selector's search ([`Search`]). Its child-size hints, decode cost and
//! calibration cases for the selector are [`Encoding`] methods beside its encoder
//! ([`selection`]), so the selector and the GPU generator ask the registry ([`encodings`],
//! [`by_name`], [`by_id`]) and name no primitive.
//!
//! Every primitive's node is read through its typed view (`bitpack::View`, `frame::View`,
//! `patch::View`, ...), which parses and checks the node's metadata, buffers and children
//! once; its decoder, the CPU scan's fused readers and the GPU descriptor filler all read it
//! there, and the metadata bytes are private to this crate. The file writer gets its plans
//! from a [`PlanChooser`] ([`chooser`]), which the selector implements.

pub mod above;
pub mod alprd;
pub mod ans;
pub mod bitpack;
pub mod blockpack;
pub mod chardict;
pub mod chartable;
pub mod chooser;
pub mod constant;
pub mod delta;
pub mod dict;
pub mod float2int;
pub mod frame;
pub mod fsst;
pub mod gpu;
pub mod hipatch;
pub mod lowbits;
mod memo;
pub mod node;
pub mod patch;
pub mod plain;
pub mod radix;
pub mod rle;
pub mod rowindex;
pub mod runs;
pub mod selection;
pub mod strdict;
#[cfg(test)]
mod testing;
pub mod views;
pub mod words;
pub mod zigzag;
pub mod zstd;

pub use chooser::{ColumnChooser, PlanChooser};
pub use gpu::{ChildPlace, GpuDecode, GpuPlace, gpu_parallel, gpu_parallel_names};
pub use memo::Split;
pub use node::{EncodedNode, NodeView};
pub use selection::{Calibration, Role, Search, Shape};

use std::rc::Rc;

use zipflow_core::plan::THEN;
use zipflow_core::{Error, MAX_CHUNK_LEN, PType, Plan, Result, Values};

/// How a primitive's decoding parallelises; part of its [`GpuDecode`], which decides how the
/// GPU backend schedules it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Output `i` depends on a fixed input position.
    FullyParallel,
    /// Variable-size groups expand 1 -> N (runs, prefix sums, exceptions).
    GroupParallel,
    /// A serial coder, parallel only across chunks or interleaved states.
    Serial,
}

/// A child stream of a primitive.
#[derive(Debug, Clone, Copy)]
pub struct Slot {
    /// Name in the plan text ([`THEN`] for the pipe child).
    pub name: &'static str,
    /// Plan used when the user's plan leaves this child out.
    pub default: &'static str,
}

impl Slot {
    /// The slots of a leaf: none.
    pub const NONE: &'static [Slot] = &[];
}

/// What a primitive is, declared once in its module: its on-disk id, its name in plans, its
/// child streams, how the GPU decodes it and what part it plays in the selector's search.
#[derive(Debug, Clone, Copy)]
pub struct Descriptor {
    /// Stable on-disk id, never reused.
    pub id: u16,
    /// Name in plans, e.g. `bitpack`.
    pub name: &'static str,
    /// Child streams, in the order their nodes are stored.
    pub slots: &'static [Slot],
    /// Whether a numeric stream's node is a leaf: the slots hold the parts of byte strings
    /// only, and a numeric node has no children whatever the slots' defaults say.
    pub leaf_for_numbers: bool,
    /// How the GPU decoder decodes it.
    pub gpu: GpuDecode,
    /// What part it plays in the selector's search.
    pub search: Search,
}

/// The contract every primitive implements.
///
/// Ids are stable on disk and never reused; names are what plans use. Both, with the child
/// slots and the GPU and search hints, come from the primitive's [`Descriptor`].
pub trait Encoding: Send + Sync + 'static {
    /// What the primitive is, declared once in its module.
    fn descriptor(&self) -> &'static Descriptor;
    /// Stable on-disk id.
    fn id(&self) -> u16 {
        self.descriptor().id
    }
    /// Name in plans, e.g. `bitpack`.
    fn name(&self) -> &'static str {
        self.descriptor().name
    }
    /// Child streams, in the order their nodes are stored.
    fn slots(&self) -> &'static [Slot] {
        self.descriptor().slots
    }
    /// How the GPU decoder decodes it.
    fn gpu(&self) -> GpuDecode {
        self.descriptor().gpu
    }
    /// How many integer parameters the plan may give (all optional).
    fn max_params(&self) -> usize {
        0
    }
    /// Whether a stream of `ptype` can be encoded.
    fn accepts(&self, ptype: PType) -> bool;
    /// Encodes `input` by `plan` (whose name is this encoding's), children included. Fails with
    /// [`Error::Plan`] when the plan cannot represent the input (e.g. `constant` on varying
    /// values).
    fn encode(&self, plan: &Plan, input: &Values) -> Result<EncodedNode>;
    /// Decodes `node` (whose id is this encoding's) into `out`, replacing its contents.
    /// `out` has the node's physical type.
    fn decode(&self, node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()>;
    /// The parameters this node was encoded with, as a plan would state them.
    fn params(&self, node: &NodeView<'_>) -> Vec<i64> {
        let _ = node;
        Vec::new()
    }
    /// What the node makes of `input` before its children are encoded: its own bytes and
    /// its child streams in slot order, for a node whose size is exactly those bytes plus its
    /// children's. `None` where the node is a leaf or its size depends on how its children
    /// turn out. Splits of small streams are remembered for a while (per thread), since a
    /// plan search splits the same sample many times.
    fn split(&self, plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
        let _ = (plan, input);
        None
    }
    /// A [`split`](Encoding::split) of a sample made to stand for the split of the whole
    /// stream it was drawn from: each child stream as a search should estimate it, with how
    /// many times longer it is on the whole stream. The whole stream is `scale` times as long
    /// as the sample and holds `distinct` times as many distinct values. `None` where every
    /// child grows with the stream as sampled (most primitives); a dictionary's entries grow
    /// with the distinct values instead, and its codes widen to index them all.
    fn extrapolate_split(
        &self,
        split: &Split,
        scale: f64,
        distinct: f64,
    ) -> Option<Vec<(Values, f64)>> {
        let _ = (split, scale, distinct);
        None
    }
    /// Predicted encoded size in bytes. The default adds the children's estimates to the
    /// node's own bytes where the node [`split`](Encoding::split)s, and otherwise encodes and
    /// measures, which is exact; leaves override it with something cheaper where they can
    /// stay within 10 %.
    fn estimate(&self, plan: &Plan, input: &Values) -> Result<usize> {
        match self.split(plan, input) {
            Some(split) => {
                let split = split?;
                let mut total = split.own;
                for (slot, child) in self.slots().iter().zip(&split.children) {
                    total += estimate(&slot_plan(plan, slot)?, child)?;
                }
                Ok(total)
            }
            None => Ok(self.encode(plan, input)?.size()),
        }
    }
    /// The shape of the stream in child slot `slot` of a node that decodes a stream of
    /// `shape`, for the decode-cost model. By default the pipe child holds the node's stream
    /// and every other slot one number per value.
    fn child_shape(&self, slot: &str, shape: Shape) -> Shape {
        if slot == THEN { shape } else { shape.numbers() }
    }
    /// Nanoseconds a node takes to decode a stream of `shape`, its children not counted,
    /// given `ns`, the measured cost per value of each primitive by name. By default its own
    /// cost per value times the values.
    fn decode_cost(&self, shape: Shape, ns: &dyn Fn(&str) -> f64) -> f64 {
        ns(self.name()) * shape.values
    }
    /// Synthetic streams and plans that isolate this primitive's decode cost, for measuring
    /// the cost table.
    fn calibration(&self) -> Vec<Calibration> {
        Vec::new()
    }
}

/// Every primitive, in the order the selector tries them (ties between equally good forms
/// go to the earlier): leaves before inner primitives, and the measured primitives before
/// the calibration cases that subtract them.
static ENCODINGS: &[&dyn Encoding] = &[
    &bitpack::BitPack,
    &plain::Plain,
    &constant::Constant,
    &radix::Radix,
    &ans::Ans,
    &frame::FrameOfReference,
    &zigzag::ZigZag,
    &delta::Delta,
    &above::Above,
    &patch::Patch,
    &hipatch::HiPatch,
    &lowbits::LowBits,
    &blockpack::BlockPack,
    &rle::Rle,
    &dict::Dict,
    &float2int::FloatToInt,
    &alprd::AlpRd,
    &strdict::StrDict,
    &words::Words,
    &fsst::Fsst,
    &chardict::CharDict16,
    &chartable::CharTable,
    &zstd::Zstd,
];

/// All primitives, in the order the selector tries them.
pub fn encodings() -> &'static [&'static dyn Encoding] {
    ENCODINGS
}

/// The primitive called `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Encoding> {
    ENCODINGS.iter().copied().find(|e| e.name() == name)
}

/// The primitive with on-disk id `id`.
pub fn by_id(id: u16) -> Option<&'static dyn Encoding> {
    ENCODINGS.iter().copied().find(|e| e.id() == id)
}

fn lookup(plan: &Plan, ptype: PType) -> Result<&'static dyn Encoding> {
    let Some(enc) = by_name(&plan.name) else {
        let names: Vec<_> = ENCODINGS.iter().map(|e| e.name()).collect();
        return Err(Error::plan(
            plan,
            format!(
                "unknown primitive `{}` (known: {})",
                plan.name,
                names.join(", ")
            ),
        ));
    };
    if !enc.accepts(ptype) {
        return Err(Error::plan(
            plan,
            format!("`{}` cannot encode {ptype} values", plan.name),
        ));
    }
    if plan.params.len() > enc.max_params() {
        return Err(Error::plan(
            plan,
            format!(
                "`{}` takes at most {} parameter(s), got {}",
                plan.name,
                enc.max_params(),
                plan.params.len()
            ),
        ));
    }
    for (slot, _) in &plan.children {
        if !enc.slots().iter().any(|s| s.name == slot) {
            let what = if slot == THEN {
                format!("`{}` has no pipe child (`| ...`)", plan.name)
            } else {
                let names: Vec<_> = enc.slots().iter().map(|s| s.name).collect();
                format!(
                    "`{}` has no child `{slot}` (children: {})",
                    plan.name,
                    names.join(", ")
                )
            };
            return Err(Error::plan(plan, what));
        }
    }
    Ok(enc)
}

/// Encodes `input` by `plan`. Children the plan leaves out get their slot's default plan.
pub fn encode(plan: &Plan, input: &Values) -> Result<EncodedNode> {
    lookup(plan, input.ptype())?.encode(plan, input)
}

/// Predicts the encoded size of `input` under `plan`.
pub fn estimate(plan: &Plan, input: &Values) -> Result<usize> {
    lookup(plan, input.ptype())?.estimate(plan, input)
}

/// How the root primitive of `plan` splits `input` (see [`Encoding::split`]); `None` for a
/// primitive that does not split.
pub fn split(plan: &Plan, input: &Values) -> Option<Result<Rc<Split>>> {
    match lookup(plan, input.ptype()) {
        Ok(enc) => enc.split(plan, input),
        Err(e) => Some(Err(e)),
    }
}

/// The sub-plan for child slot `slot` of `plan`: as given, or the slot's default.
pub fn child_plan(plan: &Plan, enc: &dyn Encoding, slot: &str) -> Result<Plan> {
    if let Some(p) = plan.get(slot) {
        return Ok(p.clone());
    }
    let Some(s) = enc.slots().iter().find(|s| s.name == slot) else {
        return Err(Error::plan(
            plan,
            format!("`{}` has no child `{slot}`", enc.name()),
        ));
    };
    s.default.parse()
}

/// The sub-plan `plan` gives child slot `slot`, or the slot's default.
fn slot_plan(plan: &Plan, slot: &Slot) -> Result<Plan> {
    match plan.get(slot.name) {
        Some(p) => Ok(p.clone()),
        None => slot.default.parse(),
    }
}

/// Encodes child stream `input` of `plan`'s slot `slot`.
pub fn encode_child(
    plan: &Plan,
    enc: &dyn Encoding,
    slot: &str,
    input: &Values,
) -> Result<EncodedNode> {
    encode(&child_plan(plan, enc, slot)?, input)
}

/// Decodes a validated node tree into `out` (any previous contents are replaced; the
/// allocation is reused when the type matches).
pub fn decode(node: &NodeView<'_>, out: &mut Values, scratch: &mut Scratch) -> Result<()> {
    let Some(enc) = by_id(node.id) else {
        return Err(Error::corrupt(format!("unknown encoding id {}", node.id)));
    };
    if !enc.accepts(node.ptype) {
        return Err(Error::corrupt(format!(
            "`{}` node claims {} values",
            enc.name(),
            node.ptype
        )));
    }
    if out.ptype() != node.ptype {
        *out = Values::empty(node.ptype);
    }
    enc.decode(node, out, scratch)?;
    if out.len() != node.len {
        return Err(Error::corrupt(format!(
            "`{}` node decoded {} values, header says {}",
            enc.name(),
            out.len(),
            node.len
        )));
    }
    Ok(())
}

/// Parses and decodes a serialised node tree of at most [`MAX_CHUNK_LEN`] values.
pub fn decode_bytes(bytes: &[u8]) -> Result<Values> {
    let node = NodeView::parse(bytes)?;
    if node.len > MAX_CHUNK_LEN {
        return Err(Error::corrupt(format!(
            "stream claims {} values, more than the {MAX_CHUNK_LEN} a chunk may hold",
            node.len
        )));
    }
    let mut out = Values::empty(node.ptype);
    decode(&node, &mut out, &mut Scratch::default())?;
    Ok(out)
}

/// The plan a node tree was encoded with, parameters resolved (e.g. `for | bitpack(13)`).
pub fn describe(node: &NodeView<'_>) -> Result<Plan> {
    let Some(enc) = by_id(node.id) else {
        return Err(Error::corrupt(format!("unknown encoding id {}", node.id)));
    };
    let mut plan = Plan::new(enc.name());
    plan.params = enc.params(node);
    for (slot, child) in enc.slots().iter().zip(&node.children) {
        plan = plan.child(slot.name, describe(child)?);
    }
    Ok(plan)
}

/// Reusable buffers for intermediate streams, so decoding chunk after chunk allocates nothing.
#[derive(Debug, Default)]
pub struct Scratch {
    pool: Vec<Values>,
}

impl Scratch {
    /// An empty stream of `ptype`, reusing a pooled allocation when one fits.
    pub fn take(&mut self, ptype: PType) -> Values {
        match self.pool.iter().position(|v| v.ptype() == ptype) {
            Some(i) => self.pool.swap_remove(i),
            None => Values::empty(ptype),
        }
    }

    /// Returns a stream to the pool.
    pub fn give(&mut self, v: Values) {
        if self.pool.len() < 16 {
            self.pool.push(v);
        }
    }

    /// Decodes `node` into a pooled stream; hand it back with [`Scratch::give`].
    pub fn decode(&mut self, node: &NodeView<'_>) -> Result<Values> {
        let mut v = self.take(node.ptype);
        decode(node, &mut v, self)?;
        Ok(v)
    }
}

/// Sets `v`'s length to `n` for a decoder that then overwrites every element. Elements already
/// there are kept rather than zeroed, so decoding chunk after chunk into a reused buffer
/// writes each value once instead of twice.
#[inline]
pub(crate) fn resize_for_overwrite<T: Copy>(v: &mut Vec<T>, n: usize, fill: T) {
    v.truncate(n);
    v.resize(n, fill);
}

/// Requires `node`'s child `i` to decode to `ptype` values, `len` of them.
pub(crate) fn expect_child(
    node: &NodeView<'_>,
    i: usize,
    what: &str,
    ptype: PType,
    len: Option<usize>,
) -> Result<()> {
    let c = node.child(i, what)?;
    if c.ptype != ptype {
        return Err(Error::corrupt(format!(
            "{what} child holds {} values, expected {ptype}",
            c.ptype
        )));
    }
    if let Some(len) = len
        && c.len != len
    {
        return Err(Error::corrupt(format!(
            "{what} child holds {} values, expected {len}",
            c.len
        )));
    }
    Ok(())
}
