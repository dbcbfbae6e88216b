//! Slot-by-slot refinement, for [`Objective::MinDecodeGbs`], a bound rather than a sum.

use zipflow_core::Plan;

use super::objective::better;
use super::scorer::Scorer;
use super::space::{int_forms, is_type_change, leaves};
use super::{Candidate, Objective};

/// The subplan at `path` (slot names from the root).
fn at<'p>(plan: &'p Plan, path: &[String]) -> Option<&'p Plan> {
    path.iter().try_fold(plan, |p, slot| p.get(slot))
}

/// `plan` with the subplan at `path` replaced by `sub`.
fn replaced(plan: &Plan, path: &[String], sub: &Plan) -> Plan {
    let Some((first, rest)) = path.split_first() else {
        return sub.clone();
    };
    let mut out = plan.clone();
    for (slot, child) in &mut out.children {
        if slot == first {
            *child = replaced(child, rest, sub);
        }
    }
    out
}

/// Refines `root` slot by slot, breadth first, each slot trying every form that fits; slots
/// more than `levels` below the root are left as they are.
pub(super) fn refine(
    root: Candidate,
    scorer: &mut Scorer<'_>,
    limit: usize,
    objective: Objective,
    levels: usize,
) -> Candidate {
    let mut best = root;
    let base: Vec<String> = if is_type_change(&best.plan.name) {
        vec![String::new()]
    } else {
        Vec::new()
    };
    // Paths below `base` whose slot is to be refined, with the depth used above them.
    let mut queue: std::collections::VecDeque<Vec<String>> = std::collections::VecDeque::new();
    let push_children =
        |queue: &mut std::collections::VecDeque<Vec<String>>, plan: &Plan, path: &[String]| {
            if let Some(p) = at(plan, path) {
                for (slot, _) in &p.children {
                    let mut c = path.to_vec();
                    c.push(slot.clone());
                    queue.push_back(c);
                }
            }
        };
    push_children(&mut queue, &best.plan, &base);
    while let Some(path) = queue.pop_front() {
        let used = path.len() - base.len();
        if used > levels {
            continue;
        }
        let room = limit.saturating_sub(used);
        let start = best.clone();
        for form in int_forms(room) {
            let plan = replaced(&start.plan, &path, &form);
            let Some(mut c) = scorer.score(&plan) else {
                continue;
            };
            // A primitive with several child streams is judged with the best leaf in each
            // (short streams such as a dictionary's values pay `bitpack`'s 1024-value padding).
            if form.children.len() > 1 {
                for (slot, _) in &form.children {
                    let mut sub = path.clone();
                    sub.push(slot.clone());
                    let base = c.clone();
                    for leaf in leaves() {
                        let plan = replaced(&base.plan, &sub, &Plan::new(leaf));
                        if let Some(l) = scorer.score(&plan)
                            && better(&l, &c, objective)
                        {
                            c = l;
                        }
                    }
                }
            }
            if better(&c, &best, objective) {
                best = c;
            }
        }
        push_children(&mut queue, &best.plan, &path);
    }
    best
}
