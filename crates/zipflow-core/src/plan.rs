//! Plans: which primitives encode a stream, as a tree, and its text form.
//!
//! A plan node names a primitive, carries optional integer parameters, and has child plans,
//! one per stream the primitive produces. The child that a primitive hands its main output to
//! is unnamed and written with a pipe; other children are named inside the parentheses.
//!
//! # Grammar
//!
//! ```text
//! plan  := stage ( '|' stage )*        a | b | c  means  a's unnamed child is b | c
//! stage := NAME [ '(' [ item ( ',' item )* ] ')' ]
//! item  := INTEGER                     a parameter, e.g. float2int(2)
//!        | NAME ':' plan               a named child, e.g. rle(values: for | bitpack, runs: bitpack)
//! NAME  := [a-z_][a-z0-9_]*
//! ```
//!
//! Whitespace is free between tokens. Parameters come before named children; `name()` is the
//! same as `name`. Printing writes the canonical form (single spaces around `|`, `, ` between
//! items), and `parse(print(p)) == p` for every plan.
//!
//! Which names exist, which parameters and children each takes, and what a missing child
//! defaults to is up to the encodings (see `zipflow-encodings`); this module only knows shape.

use crate::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// The name of the unnamed child that `|` denotes.
pub const THEN: &str = "";

/// A plan node: primitive name, parameters, children.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Plan {
    /// Primitive name, e.g. `bitpack`.
    pub name: String,
    /// Integer parameters, in order.
    pub params: Vec<i64>,
    /// Child plans by slot name; the unnamed slot [`THEN`] is the pipe child.
    pub children: Vec<(String, Plan)>,
}

impl Plan {
    /// A node with no parameters or children.
    pub fn new(name: impl Into<String>) -> Plan {
        Plan {
            name: name.into(),
            params: Vec::new(),
            children: Vec::new(),
        }
    }

    /// Adds a parameter.
    pub fn param(mut self, p: i64) -> Plan {
        self.params.push(p);
        self
    }

    /// Sets a named child, replacing any child of that name. The unnamed child stays last, as
    /// the text form writes it.
    pub fn child(mut self, slot: impl Into<String>, plan: Plan) -> Plan {
        let slot = slot.into();
        self.children.retain(|(s, _)| *s != slot);
        let at = if slot == THEN {
            self.children.len()
        } else {
            self.children
                .iter()
                .position(|(s, _)| s == THEN)
                .unwrap_or(self.children.len())
        };
        self.children.insert(at, (slot, plan));
        self
    }

    /// Pipes into `next`: this node's unnamed child becomes `next`. On a node that already has
    /// an unnamed child, pipes into the end of that chain.
    pub fn then(mut self, next: Plan) -> Plan {
        match self.children.iter_mut().find(|(s, _)| s == THEN) {
            Some((_, child)) => {
                let old = std::mem::replace(child, Plan::new(""));
                *child = old.then(next);
                self
            }
            None => self.child(THEN, next),
        }
    }

    /// The child in slot `slot`.
    pub fn get(&self, slot: &str) -> Option<&Plan> {
        self.children
            .iter()
            .find(|(s, _)| s == slot)
            .map(|(_, p)| p)
    }

    /// The unnamed (pipe) child.
    pub fn next(&self) -> Option<&Plan> {
        self.get(THEN)
    }

    /// Nodes in the tree, this one included.
    pub fn node_count(&self) -> usize {
        1 + self
            .children
            .iter()
            .map(|(_, c)| c.node_count())
            .sum::<usize>()
    }

    /// Depth of the tree (a leaf has depth 1).
    pub fn depth(&self) -> usize {
        1 + self
            .children
            .iter()
            .map(|(_, c)| c.depth())
            .max()
            .unwrap_or(0)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        let named: Vec<_> = self.children.iter().filter(|(s, _)| s != THEN).collect();
        if !self.params.is_empty() || !named.is_empty() {
            f.write_str("(")?;
            let mut first = true;
            for p in &self.params {
                if !first {
                    f.write_str(", ")?;
                }
                first = false;
                write!(f, "{p}")?;
            }
            for (slot, child) in named {
                if !first {
                    f.write_str(", ")?;
                }
                first = false;
                write!(f, "{slot}: {child}")?;
            }
            f.write_str(")")?;
        }
        if let Some(next) = self.next() {
            write!(f, " | {next}")?;
        }
        Ok(())
    }
}

impl FromStr for Plan {
    type Err = Error;

    fn from_str(s: &str) -> Result<Plan> {
        let mut p = Parser { src: s, pos: 0 };
        let plan = p.plan(0)?;
        p.skip_ws();
        if p.pos != s.len() {
            return Err(p.error("expected `|`, `,` or the end of the plan"));
        }
        Ok(plan)
    }
}

/// Plans nest at most this deep, so a hostile string cannot overflow the stack.
const MAX_NESTING: usize = 64;

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, what: &str) -> Error {
        let found = match self.src[self.pos..].chars().next() {
            Some(c) => format!("`{c}`"),
            None => "the end".to_string(),
        };
        Error::plan(
            self.src,
            format!("{what}, found {found} at column {}", self.pos + 1),
        )
    }

    fn skip_ws(&mut self) {
        let rest = &self.src[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.src[self.pos..].starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_ws();
        self.src[self.pos..].chars().next()
    }

    fn name(&mut self) -> Result<String> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        let len = rest
            .char_indices()
            .find(|&(i, c)| !(c == '_' || c.is_ascii_lowercase() || (i > 0 && c.is_ascii_digit())))
            .map_or(rest.len(), |(i, _)| i);
        if len == 0 {
            return Err(self.error("expected a primitive name"));
        }
        self.pos += len;
        Ok(rest[..len].to_string())
    }

    fn integer(&mut self) -> Result<i64> {
        self.skip_ws();
        let rest = &self.src[self.pos..];
        let len = rest
            .char_indices()
            .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
            .map_or(rest.len(), |(i, _)| i);
        let v = rest[..len]
            .parse::<i64>()
            .map_err(|_| self.error("expected an integer"))?;
        self.pos += len;
        Ok(v)
    }

    fn plan(&mut self, depth: usize) -> Result<Plan> {
        if depth > MAX_NESTING {
            return Err(self.error("plan nests too deeply"));
        }
        let mut stages = vec![self.stage(depth)?];
        while self.eat('|') {
            stages.push(self.stage(depth + stages.len())?);
        }
        let mut plan = stages.pop().unwrap_or_else(|| Plan::new(""));
        while let Some(mut prev) = stages.pop() {
            prev.children.push((THEN.to_string(), plan));
            plan = prev;
        }
        Ok(plan)
    }

    fn stage(&mut self, depth: usize) -> Result<Plan> {
        if depth > MAX_NESTING {
            return Err(self.error("plan nests too deeply"));
        }
        let mut node = Plan::new(self.name()?);
        if self.eat('(') {
            if self.eat(')') {
                return Ok(node);
            }
            loop {
                match self.peek() {
                    Some(c) if c == '-' || c.is_ascii_digit() => {
                        if !node.children.is_empty() {
                            return Err(self.error("parameters must come before named children"));
                        }
                        node.params.push(self.integer()?);
                    }
                    _ => {
                        let slot = self.name()?;
                        if !self.eat(':') {
                            return Err(self.error("expected `:` after a child name"));
                        }
                        if node.children.iter().any(|(s, _)| *s == slot) {
                            return Err(Error::plan(
                                self.src,
                                format!("child `{slot}` given twice"),
                            ));
                        }
                        let child = self.plan(depth + 1)?;
                        node.children.push((slot, child));
                    }
                }
                if self.eat(')') {
                    break;
                }
                if !self.eat(',') {
                    return Err(self.error("expected `,` or `)`"));
                }
            }
        }
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> Plan {
        match s.parse() {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn examples_round_trip() {
        for s in [
            "bitpack",
            "for | bitpack",
            "delta | rle(values: for | bitpack, runs: bitpack)",
            "dict(codes: bitpack, values: for | bitpack)",
            "float2int(2) | for | bitpack",
            "strdict(codes: bitpack, dict: fsst)",
            "chardict16 | ans",
            "patch(-3, 7) | bitpack",
        ] {
            let plan = p(s);
            assert_eq!(plan.to_string(), s);
            assert_eq!(p(&plan.to_string()), plan);
        }
    }

    #[test]
    fn whitespace_and_empty_parens() {
        assert_eq!(p("  for|bitpack( ) "), p("for | bitpack"));
        assert_eq!(
            p("rle( values :for|bitpack ,runs: bitpack )"),
            p("rle(values: for | bitpack, runs: bitpack)")
        );
    }

    #[test]
    fn pipe_builds_chain() {
        let plan = p("a | b | c");
        assert_eq!(plan.name, "a");
        assert_eq!(plan.next().map(|n| n.name.as_str()), Some("b"));
        assert_eq!(
            plan.next().and_then(Plan::next).map(|n| n.name.as_str()),
            Some("c")
        );
        assert_eq!(
            Plan::new("a").then(Plan::new("b")).then(Plan::new("c")),
            plan
        );
    }

    #[test]
    fn errors_point_at_the_problem() {
        for (s, needle) in [
            ("", "expected a primitive name"),
            ("for |", "expected a primitive name"),
            ("rle(values bitpack)", "expected `:`"),
            ("rle(values: bitpack", "expected `,` or `)`"),
            ("for bitpack", "expected `|`"),
            ("rle(a: x, a: y)", "given twice"),
            ("x(a: y, 3)", "parameters must come before"),
            ("x(99999999999999999999)", "expected an integer"),
            ("Bitpack", "expected a primitive name"),
        ] {
            let e = s
                .parse::<Plan>()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(needle), "{s:?}: {e}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let s = "a(b: ".repeat(10_000);
        assert!(s.parse::<Plan>().is_err());
        let s = vec!["a"; 10_000].join(" | ");
        assert!(s.parse::<Plan>().is_err());
    }

    fn arb_plan() -> impl Strategy<Value = Plan> {
        let leaf = "[a-z_][a-z0-9_]{0,6}".prop_map(Plan::new);
        leaf.prop_recursive(4, 24, 4, |inner| {
            (
                "[a-z_][a-z0-9_]{0,6}",
                prop::collection::vec(any::<i64>(), 0..3),
                prop::collection::btree_map("[a-z_][a-z0-9_]{0,4}", inner.clone(), 0..3),
                prop::option::of(inner),
            )
                .prop_map(|(name, params, named, next)| {
                    let mut plan = Plan::new(name);
                    plan.params = params;
                    for (slot, child) in named {
                        plan = plan.child(slot, child);
                    }
                    if let Some(next) = next {
                        plan = plan.then(next);
                    }
                    plan
                })
        })
    }

    proptest! {
        #[test]
        fn parse_print_round_trip(plan in arb_plan()) {
            let text = plan.to_string();
            let back: Plan = text.parse().map_err(|e| TestCaseError::fail(format!("{e}")))?;
            prop_assert_eq!(back, plan);
        }

        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = s.parse::<Plan>();
        }
    }
}
